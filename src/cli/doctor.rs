//! `acp-bash doctor`: each sandbox layer on this machine, whether it works here and, if not, why
//! and what to do about it; then what commands do not see here (masked paths) with these flags, a
//! verdict per mode (what holds here, one line each) and which of this environment's variables
//! the env scrub would remove (names only, never values).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::process::ExitCode;

use acp_bash::exec::{env, Engine, EngineConfig};
use acp_bash::sandbox::{self, DoctorReport, Mode, Verdict};

use super::{DoctorArgs, EnvArgs, StoreArgs};

/// What a mode's description says after what the mode allows, when this machine lacks a layer
/// (see `sandbox::describe`).
const GAPS: &str = " Not enforced on this machine: ";

pub fn doctor(args: &DoctorArgs) -> ExitCode {
    // Probe in the state `serve` runs in (non-dumpable), so that the two can never disagree.
    sandbox::protect_agent_process();
    let report = DoctorReport::probe();
    print!("{report}");
    let mut config = EngineConfig::default();
    args.protection.apply(&mut config);
    // As `serve` does: the session store is masked from commands.
    config
        .protection
        .agent_dirs
        .extend(StoreArgs::default().state_dir_path());
    let engine = Engine::new(config);
    let config_home = engine.protection().home.clone();
    print!("{}", sandbox::masked_report(engine.protection()));
    print!("{}", sandbox::cache_layer_report(config_home.as_deref()));
    print!("{}", network_report(&args.network));
    let config_home = acp_bash::driver::model::keyfile::config_home(|name| {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    });
    print!(
        "{}",
        always_report(
            config_home
                .as_deref()
                .map(acp_bash::permit::AlwaysFile::under)
        )
    );
    print!("\n{}", verdicts(&report));
    print!("\n{}", scrub_report(&args.env, std::env::vars_os()));
    let (last, status) = exit_status(&report, EngineConfig::default().sandbox_mode);
    print!("{last}");
    // The probes made cgroup folders (and may have run commands): none is left behind.
    acp_bash::exec::leave();
    status
}

/// One line per mode a client can pick (`off` is the starter's choice, not a protection): what
/// holds, what of it is weakened, or that its first promise is missing here.
fn verdicts(report: &DoctorReport) -> String {
    let mut out = String::from("Verdict on this machine:\n");
    for (mode, verdict) in &report.verdicts {
        if !Mode::ALL.contains(mode) {
            continue;
        }
        let description = report
            .modes
            .iter()
            .find(|(m, _)| m == mode)
            .map_or("", |(_, d)| d.as_str());
        let promise = description.split_once(GAPS).map_or(description, |(p, _)| p);
        // The first sentence is what the mode allows; the rest (what full gives up) is above.
        let promise = promise.split_once(". ").map_or(promise, |(first, _)| first);
        let promise = promise.trim_end_matches('.');
        let line = match verdict {
            Verdict::Holds => format!("holds: {promise}."),
            Verdict::Weakened(gaps) => format!(
                "weakened: {promise}; NOT enforced here: {} (see the layers above).",
                gaps.join("; ")
            ),
            Verdict::Missing(gaps) => format!(
                "missing: its first promise does not hold here: {} (see the layers above).",
                gaps.join("; ")
            ),
            _ => format!("{verdict:?}"),
        };
        let _ = writeln!(out, "  {:<10} {line}", mode.id());
    }
    out
}

/// `doctor`'s exit status: 0 when the default mode (the one a session starts in) holds here,
/// 1 when it is weakened or missing, with a last line that says so.
fn exit_status(report: &DoctorReport, default: Mode) -> (String, ExitCode) {
    let verdict = report.verdicts.iter().find(|(m, _)| *m == default);
    match verdict.map(|(_, v)| v) {
        Some(Verdict::Holds) | None => (String::new(), ExitCode::SUCCESS),
        Some(verdict) => {
            let word = match verdict {
                Verdict::Missing(_) => "missing",
                _ => "weakened",
            };
            (
                format!(
                    "\nThe default mode ({}) is {word} here: exit status 1. `acp-bash serve \
                     --require-sandbox` refuses commands in a mode that is not whole.\n",
                    default.id()
                ),
                ExitCode::from(1),
            )
        }
    }
}

/// Which of `vars` the scrub that `flags` choose would remove, and which acp-bash replaces:
/// names and the rule that matched, never a value.
fn scrub_report(flags: &EnvArgs, vars: impl IntoIterator<Item = (OsString, OsString)>) -> String {
    let vars: Vec<_> = vars.into_iter().collect();
    let total = vars.len();
    let prepared = env::prepare(&flags.policy(), vars);
    let mut out = String::from("Environment scrub (this environment, names only):\n");
    if flags.no_env_scrub {
        let _ = writeln!(
            out,
            "  off (--no-env-scrub): commands get all {total} variables, secrets included."
        );
    } else if prepared.removed.is_empty() {
        let _ = writeln!(
            out,
            "  none of the {total} variables looks like a secret; commands get them all."
        );
    } else {
        let _ = writeln!(
            out,
            "  {} of {total} variables are removed before every command:",
            prepared.removed.len()
        );
        let width = prepared
            .removed
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(0);
        for scrubbed in &prepared.removed {
            let _ = writeln!(out, "    {:<width$}  {}", scrubbed.name, scrubbed.reason);
        }
        let _ = writeln!(
            out,
            "  A tool that needs one (gh, aws, …): start acp-bash with --keep-env NAME."
        );
    }
    if !prepared.replaced.is_empty() {
        let _ = writeln!(
            out,
            "  Replaced for every command (acp-bash sets them; --set-env NAME=VALUE overrides): {}",
            prepared.replaced.join(", ")
        );
    }
    out
}

/// Workspace mode's network: whether the allowlist holds here (and why not), then the list.
fn network_report(args: &super::flags::NetworkArgs) -> String {
    let mut out = String::from("\nNetwork in workspace mode:\n");
    let Some(rules) = args.rules() else {
        out.push_str("  the whole network (--network full)\n");
        return out;
    };
    match sandbox::network_proxied_here(sandbox::Support::current()) {
        Ok(()) => {
            out.push_str(
                "  [holds]   only allowed hosts, through acp-bash's proxy (HTTP CONNECT, plain \
                 HTTP, SOCKS5) on the command's own loopback; no direct connect, DNS, UDP, ICMP, \
                 IPv6 or raw socket; a TLS server name (SNI) in a tunnel must be the tunnel's \
                 host\n",
            );
            // SAFETY: plain getter.
            let bridge = if unsafe { libc::geteuid() } == 0 {
                "the agent (root) makes the proxy's listener inside each session's network \
                 namespace"
            } else {
                "the process that makes the network namespace (the session's zygote, or the \
                 command) makes the proxy's listener there and passes it to the agent"
            };
            let _ = writeln!(out, "            ({bridge})");
        }
        Err(why) => {
            let _ = writeln!(
                out,
                "  [missing] the allowlist is not enforced here: {why}; workspace commands reach \
                 the whole network"
            );
        }
    }
    let list = |patterns: &[acp_bash::netproxy::HostPattern]| {
        patterns
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(out, "  allowed: {}", list(rules.allowed()));
    if !rules.denied().is_empty() {
        let _ = writeln!(out, "  denied (wins): {}", list(rules.denied()));
    }
    for (name, to) in rules.mapped() {
        let _ = writeln!(out, "  mapped: {name} -> {to}");
    }
    out.push_str(
        "  (--allow-host HOST adds one, *.domain its subdomains; --deny-host HOST refuses one)\n",
    );
    out
}

/// What the user allowed always when asked (`acp_bash::permit::AlwaysFile`): each line, and
/// how to take one back.
fn always_report(file: Option<acp_bash::permit::AlwaysFile>) -> String {
    let mut out = String::from("\nAllowed always (answers to permission requests):\n");
    let Some(file) = file else {
        out.push_str("  none: neither XDG_CONFIG_HOME nor HOME is an absolute path\n");
        return out;
    };
    let (grants, bad) = file.read();
    let _ = writeln!(
        out,
        "  kept in {} (commands never see it)",
        file.path.display()
    );
    if grants.is_empty() {
        out.push_str("  nothing yet\n");
    }
    for grant in &grants {
        let _ = writeln!(out, "  {}", grant.line());
    }
    for why in bad {
        let _ = writeln!(out, "  [ignored] {why}");
    }
    if !grants.is_empty() {
        out.push_str(
            "  (delete a line of the file, type `/permissions remove HOST|PREFIX` in a session, or run `acp-bash permissions remove HOST|PREFIX`, to take it back)\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(n, v)| (OsString::from(n), OsString::from(v)))
            .collect()
    }

    #[test]
    fn the_scrub_report_names_what_goes_and_never_a_value() {
        let env = vars(&[
            ("PATH", "/usr/bin"),
            ("GH_TOKEN", "s3cr3t-value"),
            ("INNOCENT", "ghp_0123456789abcdefghijABCDEFGHIJ0123"),
            ("PAGER", "less"),
        ]);
        let text = scrub_report(&EnvArgs::default(), env.clone());
        assert!(text.contains("2 of 4 variables are removed"), "{text}");
        assert!(text.contains("GH_TOKEN  its name holds `token`"), "{text}");
        assert!(
            text.contains("INNOCENT  its value looks like a GitHub token"),
            "{text}"
        );
        assert!(text.contains("Replaced for every command"), "{text}");
        assert!(text.contains("PAGER"), "{text}");
        for value in ["s3cr3t", "ghp_0123", "/usr/bin", "less"] {
            assert!(!text.contains(value), "a value leaked: {value}\n{text}");
        }
        assert!(!text.contains("PATH"), "{text}");
        let kept = EnvArgs {
            keep_env: vec!["GH_TOKEN".into()],
            ..EnvArgs::default()
        };
        let text = scrub_report(&kept, env.clone());
        assert!(
            text.contains("1 of 4") && !text.contains("GH_TOKEN"),
            "{text}"
        );
        let off = EnvArgs {
            no_env_scrub: true,
            ..EnvArgs::default()
        };
        assert!(scrub_report(&off, env).contains("off (--no-env-scrub)"));
    }

    /// On a machine without any layer, each mode a client can pick is missing or weakened,
    /// the line says what is missing, and the exit status is 1.
    #[test]
    fn on_a_machine_without_a_sandbox_no_mode_holds_and_doctor_exits_1() {
        let report = DoctorReport::from_support(&acp_bash::sandbox::Support::none("no layer"));
        let text = verdicts(&report);
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(lines.len(), 3, "{text}");
        for (line, mode) in lines.iter().zip(["workspace", "read-only", "full"]) {
            let want = if mode == "full" {
                "weakened: "
            } else {
                "missing: "
            };
            assert!(line.contains(want), "{line}");
            assert!(!line.contains("run `acp-bash doctor`"), "{line}");
        }
        assert!(text.contains("any write restriction"), "{text}");
        let (last, status) = exit_status(&report, Mode::Workspace);
        assert_eq!(status, ExitCode::from(1));
        assert!(last.contains("(workspace) is missing here"), "{last}");
    }

    /// Without Landlock but with the view, workspace is weakened (not missing: the view keeps
    /// writes confined), and no line says writes are not restricted.
    #[cfg(target_os = "linux")]
    #[test]
    fn without_landlock_the_view_still_confines_writes() {
        let mut support = acp_bash::sandbox::Support::all(0);
        support.landlock = Err("this kernel has no Landlock".into());
        let report = DoctorReport::from_support(&support);
        let text = verdicts(&report);
        assert!(text.contains("workspace  weakened: "), "{text}");
        assert!(!text.contains("any write restriction"), "{text}");
        for (_, description) in &report.modes {
            assert!(!description.contains("NOT restricted"), "{description}");
        }
        let all = DoctorReport::from_support(&acp_bash::sandbox::Support::all(9));
        assert!(verdicts(&all).contains("workspace  holds: "));
        assert_eq!(exit_status(&all, Mode::Workspace).1, ExitCode::SUCCESS);
    }
}
