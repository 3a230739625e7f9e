//! `acp-bash doctor`: each sandbox layer on this machine, whether it works here and, if not, why
//! and what to do about it; then what commands do not see here (masked paths) with these flags, a
//! verdict per mode (what holds here, one line each) and which of this environment's variables
//! the env scrub would remove (names only, never values).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::process::ExitCode;

use acp_bash::exec::{env, Engine, EngineConfig};
use acp_bash::sandbox::{self, DoctorReport, Mode};

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
    print!("\n{}", verdicts(&report));
    print!("\n{}", scrub_report(&args.env, std::env::vars_os()));
    sandbox::release_cgroups();
    ExitCode::SUCCESS
}

/// One line per mode a client can pick (`off` is the starter's choice, not a protection): what
/// holds, or what of it does not.
fn verdicts(report: &DoctorReport) -> String {
    let mut out = String::from("Verdict on this machine:\n");
    for (mode, description) in &report.modes {
        if !Mode::ALL.contains(mode) {
            continue;
        }
        let (promise, gaps) = match description.split_once(GAPS) {
            Some((promise, gaps)) => (promise, Some(gaps)),
            None => (description.as_str(), None),
        };
        // The first sentence is what the mode allows; the rest (what full gives up) is above.
        let promise = promise.split_once(". ").map_or(promise, |(first, _)| first);
        let promise = promise.trim_end_matches('.');
        let line = match gaps {
            None => format!("holds: {promise}."),
            Some(gaps) => {
                let gaps = gaps
                    .trim_end_matches('.')
                    .trim_end_matches(" — run `acp-bash doctor`");
                format!("PARTLY: {promise}; NOT enforced here: {gaps} (see the layers above).")
            }
        };
        let _ = writeln!(out, "  {:<10} {line}", mode.id());
    }
    out
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

    /// The verdict reads the sandbox's own mode descriptions: on a machine without any layer,
    /// each mode a client can pick is only partly enforced, and the line says what is missing.
    #[test]
    fn on_a_machine_without_a_sandbox_every_mode_is_partly_enforced() {
        let report = DoctorReport::from_support(&acp_bash::sandbox::Support::none("no layer"));
        let text = verdicts(&report);
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(lines.len(), 3, "{text}");
        for line in lines {
            assert!(
                line.contains("PARTLY: ") && line.contains("NOT enforced here: "),
                "{line}"
            );
            assert!(!line.contains("run `acp-bash doctor`"), "{line}");
        }
    }

    #[test]
    fn a_mode_with_a_gap_is_partly_enforced() {
        let report = DoctorReport::probe();
        let mut report = report;
        report.modes = vec![
            (
                Mode::Workspace,
                "Commands change files only here. ".to_string(),
            ),
            (
                Mode::ReadOnly,
                format!(
                    "Commands change nothing.{GAPS}blocking the network — run `acp-bash doctor`."
                ),
            ),
            (
                Mode::Off,
                "Commands run with no kernel sandbox.".to_string(),
            ),
        ];
        let text = verdicts(&report);
        assert!(
            text.contains("workspace  holds: Commands change files only here."),
            "{text}"
        );
        assert!(
            text.contains("read-only  PARTLY: Commands change nothing; NOT enforced here: blocking the network (see"),
            "{text}"
        );
        assert!(!text.contains("off "), "{text}");
    }
}
