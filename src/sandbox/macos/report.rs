//! What each mode enforces on macOS, in words: the mode descriptions, the first command's
//! notices and `doctor`'s table. No macOS machine has run acp-bash's tests: every layer that
//! only the type-check has seen says `untested here` (README.md, "macOS").

use crate::sandbox::{LayerReport, Mode};

use super::support::Support;

/// Appended to what no test has run on a Mac.
pub(crate) const UNTESTED: &str =
    "untested here: no macOS machine has run acp-bash's tests (README.md, \"macOS\")";

/// Why a workspace or read-only command is refused where Seatbelt does not apply.
pub(crate) fn refusal(mode: Mode, why: &str) -> String {
    format!(
        "{} mode: commands are refused on this Mac, never run unconfined: Seatbelt does not \
         apply ({why}). Use full mode, or start acp-bash outside another sandbox.",
        mode.name()
    )
}

/// What the first command of `mode` says it does not get here.
pub(crate) fn notices(mode: Mode, support: &Support) -> Vec<String> {
    match (mode, &support.seatbelt) {
        (Mode::Off, _) => Vec::new(),
        (Mode::Workspace | Mode::ReadOnly, Err(why)) => vec![refusal(mode, why)],
        (Mode::Full, _) => vec![format!(
            "Full mode on macOS: a process a command starts in a new session without its \
             mark (`env -i setsid …`) outlives it; --max-processes and --max-memory are not \
             enforced ({UNTESTED})"
        )],
        (Mode::Workspace | Mode::ReadOnly, Ok(())) => vec![format!(
            "{} mode on macOS (Seatbelt): credential files fail to read (EPERM) instead of \
             reading as empty;{} a process started in a new session without the command's mark \
             outlives it; --max-processes and --max-memory are not enforced ({UNTESTED})",
            mode.name(),
            if mode == Mode::Workspace {
                " package caches (~/.cargo/registry, ~/.npm, …) are read-only, so installs \
                 that fill them fail (use full mode for them);"
            } else {
                ""
            }
        )],
    }
}

/// What `mode` lets commands do on this Mac, then what it does not enforce.
pub(crate) fn describe(mode: Mode, support: &Support) -> String {
    let cleanup = "What they start is killed when they end (its process group, and every \
                   process that carries the command's mark), unless it leaves the group and \
                   drops the mark.";
    let text = match mode {
        Mode::Workspace => format!(
            "Commands change files only in the session folder and a temp dir of the \
             session's own, and may use the network (Seatbelt); Unix sockets work only beneath \
             those (no Docker, ssh-agent or tmux of the host's); Git hooks and config stay \
             read-only; credential files and the agent's own files can't be read; package \
             caches are read-only. {cleanup}"
        ),
        Mode::ReadOnly => format!(
            "Commands read everything but credential files and change nothing outside a \
             private temp dir, with no network and no host daemon's socket (Seatbelt). \
             {cleanup}"
        ),
        Mode::Full => format!(
            "Commands change any file the agent may and use the network, with no Seatbelt \
             profile; they can read this user's other processes' environments. {cleanup}"
        ),
        Mode::Off => "Commands run with no sandbox, chosen by whoever started the agent \
                      (`--sandbox off`); only their process group is killed when they end, \
                      and what they start in a new session can outlive them."
            .to_string(),
    };
    // After " Not enforced on this machine: ", as on Linux: `doctor`'s verdict reads it.
    match (mode, &support.seatbelt) {
        (Mode::Workspace | Mode::ReadOnly, Err(why)) => format!(
            "{text} Not enforced on this machine: any of it, so commands are refused (Seatbelt \
             does not apply: {why}) — run `acp-bash doctor`."
        ),
        (Mode::Off, _) => format!(
            "{text} Not enforced on this machine: --max-processes, --max-memory; {UNTESTED} — \
             run `acp-bash doctor`."
        ),
        _ => format!(
            "{text} Not enforced on this machine: --max-processes, --max-memory, cleanup of a \
             process that leaves the group and drops the mark; {UNTESTED} — run `acp-bash \
             doctor`."
        ),
    }
}

/// Each layer on macOS and whether it works here.
pub(crate) fn layers(support: &Support) -> Vec<LayerReport> {
    let seatbelt = |what: &str| {
        support
            .seatbelt
            .clone()
            .map(|()| format!("{what}; {UNTESTED}"))
    };
    let works = |what: &str| Ok(format!("{what}; {UNTESTED}"));
    vec![
        LayerReport {
            name: "Seatbelt (sandbox-exec)",
            purpose: "workspace / read-only: each command runs under /usr/bin/sandbox-exec with a profile made for its session and mode; where it does not apply, those modes refuse commands",
            status: seatbelt("sandbox-exec applied both modes' profiles on this machine just now"),
        },
        LayerReport {
            name: "writes confined",
            purpose: "workspace: writes only in the session folder and the session's temp dir; read-only: only in a private temp dir of the command's own",
            status: seatbelt("(allow file-write* (subpath …)) under (deny default)"),
        },
        LayerReport {
            name: "credential files masked",
            purpose: "workspace / read-only: ~/.ssh private keys, ~/.aws, ~/.gnupg, ~/.netrc, cloud and registry logins, the agent's own folders can't be read or written (EPERM: Seatbelt cannot show them empty); the Keychain's service is out of reach",
            status: seatbelt("(deny file-read* file-write* …), last in the profile"),
        },
        LayerReport {
            name: "Git metadata read-only",
            purpose: "workspace: .git/hooks, .git/config and .git itself of the session folder and of repositories up to two levels below it (--allow-git-hooks-and-config-writes)",
            status: seatbelt("(deny file-write* …) after the write allows"),
        },
        LayerReport {
            name: "no host daemon's socket",
            purpose: "workspace / read-only: Unix sockets connect only beneath the writable places (not Docker's, ssh-agent's, tmux's), Mach services only from a short list (no launchd jobs, LaunchServices, Keychain or pasteboard)",
            status: seatbelt("network-outbound (remote unix-socket (subpath …)), mach-lookup list"),
        },
        LayerReport {
            name: "network off in read-only",
            purpose: "read-only: no IP traffic and no DNS",
            status: seatbelt("no network rule but Unix sockets in the private temp dir"),
        },
        LayerReport {
            name: "process group per command",
            purpose: "every mode: a command is killed as a group on cancel, timeout and end",
            status: works("posix_spawn with POSIX_SPAWN_SETPGROUP (SETSID with a terminal)"),
        },
        LayerReport {
            name: "marked-process sweep",
            purpose: "full / workspace / read-only: when a command's shell exits, and when its session ends, every process carrying its mark (__acp_bash_mark, inherited) is killed, also one that left the group",
            status: works("proc_listallpids and KERN_PROCARGS2"),
        },
        LayerReport {
            name: "PID namespace",
            purpose: "nothing a command starts outlives it",
            status: Err("macOS has none: a process that leaves the group (setsid) and drops the mark (env -i) outlives its command; `ps -E -o pid,command | grep __acp_bash_mark` finds the marked ones".to_string()),
        },
        LayerReport {
            name: "parent-death signal",
            purpose: "a command dies with the agent",
            status: Err("macOS has none: if the agent is killed (SIGKILL) its running commands go on".to_string()),
        },
        LayerReport {
            name: "private process table",
            purpose: "other processes' environments are out of sight",
            status: Err("macOS has no private /proc: full and off commands can read this user's processes' environments (ps -E); workspace and read-only ones cannot (no kern.procargs2 in the profile)".to_string()),
        },
        LayerReport {
            name: "resource limits",
            purpose: "--max-processes / --max-memory for each command",
            status: Err("not enforced on macOS: no cgroups, RLIMIT_NPROC counts every process of the user".to_string()),
        },
        LayerReport {
            name: "package caches copy-on-write",
            purpose: "workspace: writes to package caches land in a layer of the session's own",
            status: Err("no overlayfs on macOS: the caches are read-only in workspace mode".to_string()),
        },
    ]
}

/// macOS keeps nothing per session but its mark.
pub(crate) fn per_session_sandbox(_support: &Support) -> Result<String, String> {
    Err("macOS has no namespaces to keep: each command runs under its own sandbox-exec".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every layer that works says it is untested here; every mode says so or says it is
    /// refused; a refusal names the reason.
    #[test]
    fn doctor_and_the_modes_say_untested_here_and_refused_where_true() {
        let works = Support { seatbelt: Ok(()) };
        for layer in layers(&works) {
            if let Ok(details) = &layer.status {
                assert!(details.ends_with(UNTESTED), "{}: {details}", layer.name);
            }
        }
        assert!(layers(&works)
            .iter()
            .any(|l| l.name == "PID namespace" && l.status.is_err()));
        for mode in Mode::ALL.into_iter().chain([Mode::Off]) {
            let text = describe(mode, &works);
            assert!(text.contains(" Not enforced on this machine: "), "{text}");
            assert!(text.contains(UNTESTED), "{text}");
        }
        let nested = Support::none("sandbox_apply: Operation not permitted");
        for mode in [Mode::Workspace, Mode::ReadOnly] {
            let text = describe(mode, &nested);
            assert!(text.contains("commands are refused"), "{text}");
            assert!(text.contains("Operation not permitted"), "{text}");
            assert_eq!(
                notices(mode, &nested),
                [refusal(mode, "sandbox_apply: Operation not permitted")]
            );
        }
        for layer in layers(&nested)
            .iter()
            .filter(|l| l.name == "Seatbelt (sandbox-exec)")
        {
            assert_eq!(
                layer.status,
                Err("sandbox_apply: Operation not permitted".to_string())
            );
        }
        assert!(describe(Mode::Full, &nested).contains(UNTESTED));
        assert!(notices(Mode::Off, &works).is_empty());
    }
}
