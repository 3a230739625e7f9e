//! The Seatbelt profile of a workspace or read-only command: a value made from the mode and the
//! session's paths, run by `/usr/bin/sandbox-exec -p TEXT -D NAME=PATH… -- bash …`.
//!
//! Pure: it reads no file and asks no kernel (the backend canonicalises the paths first:
//! Seatbelt matches the real path, `/private/var/…` for `/var/…`), so the golden tests of its
//! text run on every platform. Paths never appear in the text: each is a parameter (`-D`),
//! so no path can break out of its string, and the text of a mode is the same for every
//! session. The design, and what Codex, sandbox-runtime and Zed chose:
//! `notes/2026-12-06-macos-seatbelt.md`.
//!
//! The shape: `(deny default)`, then what programs need (exec, fork, signals and process
//! information within the command's own sandbox, a list of sysctls and Mach services), every
//! read, writes only beneath the writable places, network by mode; then, last (Seatbelt takes
//! the last rule that matches), the denials that win over those allows: Git metadata, then
//! the masked paths.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::sandbox::Mode;

/// The sandbox-exec every profile runs under: the system's own, never one found on PATH.
pub(crate) const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// What a profile is made from. Every path canonical.
#[derive(Debug, Clone)]
pub(crate) struct Policy<'a> {
    /// `Workspace` or `ReadOnly` (the other modes run without Seatbelt).
    pub mode: Mode,
    /// The session folder: writable in workspace mode.
    pub workspace: &'a Path,
    /// The command's private temp dir (its `TMPDIR`): writable in both modes.
    pub temp: &'a Path,
    /// Neither readable nor writable: credential files, the agent's own folders, `--mask`.
    pub masked: &'a [PathBuf],
    /// Workspace mode: folders whose `.git` (a folder, or a worktree's file) stays read-only:
    /// its `hooks` and `config`, and the `.git` entry itself (no rename, no replacement).
    pub git_repos: &'a [PathBuf],
}

/// A generated profile: its text and the parameters it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Profile {
    /// The SBPL text (`sandbox-exec -p`).
    pub text: String,
    /// `(name, path)` for each `(param "name")` of the text (`sandbox-exec -D name=path`).
    pub params: Vec<(String, PathBuf)>,
}

impl Profile {
    /// sandbox-exec's arguments that run `program` with `args` under this profile.
    pub(crate) fn arguments(&self, program: &Path, args: &[OsString]) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec!["-p".into(), self.text.clone().into()];
        for (name, path) in &self.params {
            let mut define = OsString::from(format!("{name}="));
            define.push(path.as_os_str());
            out.push("-D".into());
            out.push(define);
        }
        out.push("--".into());
        out.push(program.as_os_str().to_owned());
        out.extend(args.iter().cloned());
        out
    }
}

/// sysctls a command may read: the hardware, the CPU, the system's name and version, limits,
/// the load and a process's own entry. Not `kern.procargs2` (another process's arguments and
/// environment) nor the process table (`kern.proc.all`).
const SYSCTL_NAMES: &[&str] = &[
    "kern.argmax",
    "kern.boottime",
    "kern.clockrate",
    "kern.hostname",
    "kern.maxfiles",
    "kern.maxfilesperproc",
    "kern.maxproc",
    "kern.ngroups",
    "kern.osproductversion",
    "kern.osrelease",
    "kern.osrevision",
    "kern.ostype",
    "kern.osvariant_status",
    "kern.osversion",
    "kern.secure_kernel",
    "kern.usrstack64",
    "kern.version",
    "sysctl.proc_cputype",
    "sysctl.proc_translated",
    "vm.loadavg",
    "vm.swapusage",
];
const SYSCTL_PREFIXES: &[&str] = &["hw.", "machdep.cpu.", "kern.proc.pid.", "kern.proc.pgrp."];

/// Mach services every command may reach: user and group lookups, logging, preferences,
/// notifications, its own temp folder's name, file events. Not launchd's job submission,
/// LaunchServices (`open`), the Keychain (`com.apple.SecurityServer`) or the pasteboard.
const MACH_SERVICES: &[&str] = &[
    "com.apple.FSEvents",
    "com.apple.bsd.dirhelper",
    "com.apple.cfprefsd.agent",
    "com.apple.cfprefsd.daemon",
    "com.apple.logd",
    "com.apple.system.logger",
    "com.apple.system.notification_center",
    "com.apple.system.opendirectoryd.libinfo",
    "com.apple.system.opendirectoryd.membership",
];

/// Mach services for the network, workspace mode only: DNS, certificate trust, the network
/// configuration (proxies, reachability).
const NETWORK_MACH_SERVICES: &[&str] = &[
    "com.apple.SystemConfiguration.DNSConfiguration",
    "com.apple.SystemConfiguration.configd",
    "com.apple.dnssd.service",
    "com.apple.trustd",
    "com.apple.trustd.agent",
];

/// The profile for `policy`.
pub(crate) fn profile(policy: &Policy) -> Profile {
    let mut params: Vec<(String, PathBuf)> = Vec::new();
    let mut param = |name: String, path: &Path| {
        params.push((name.clone(), path.to_path_buf()));
        format!("(param \"{name}\")")
    };
    let workspace_mode = policy.mode == Mode::Workspace;
    let mut t = String::new();
    let _ = writeln!(t, "(version 1)");
    let _ = writeln!(
        t,
        "; acp-bash, {} mode: every path is a parameter (sandbox-exec -D)",
        policy.mode.id()
    );
    t.push_str("(deny default)\n");

    t.push_str("\n; processes: run and fork; signal and inspect only this command's own\n");
    t.push_str("(allow process-exec)\n(allow process-fork)\n");
    t.push_str("(allow signal (target same-sandbox))\n");
    t.push_str("(allow process-info* (target same-sandbox))\n");

    t.push_str("\n; system information and services programs need\n");
    t.push_str("(allow sysctl-read");
    for name in SYSCTL_NAMES {
        let _ = write!(t, "\n  (sysctl-name \"{name}\")");
    }
    for prefix in SYSCTL_PREFIXES {
        let _ = write!(t, "\n  (sysctl-name-prefix \"{prefix}\")");
    }
    t.push_str(")\n");
    let services = MACH_SERVICES
        .iter()
        .chain(if workspace_mode {
            NETWORK_MACH_SERVICES
        } else {
            &[]
        })
        .collect::<std::collections::BTreeSet<_>>();
    t.push_str("(allow mach-lookup");
    for service in services {
        let _ = write!(t, "\n  (global-name \"{service}\")");
    }
    t.push_str(")\n");
    t.push_str("(allow user-preference-read)\n(allow ipc-posix-sem)\n(allow ipc-posix-shm)\n");

    t.push_str("\n; reads: everything but the masked paths (at the end)\n");
    t.push_str("(allow file-read*)\n");

    let temp = param("TEMP".into(), policy.temp);
    if workspace_mode {
        let workspace = param("WORKSPACE".into(), policy.workspace);
        t.push_str("\n; writes: the session folder and the command's temp dir\n");
        let _ = writeln!(
            t,
            "(allow file-write* (subpath {workspace}) (subpath {temp}))"
        );
    } else {
        t.push_str("\n; writes: the command's private temp dir only\n");
        let _ = writeln!(t, "(allow file-write* (subpath {temp}))");
    }
    t.push_str(
        "(allow file-write-data file-ioctl\n  (literal \"/dev/null\")\n  (literal \"/dev/zero\")\n  \
         (literal \"/dev/dtracehelper\"))\n",
    );
    t.push_str("(allow file-write-data (regex #\"^/dev/fd/[0-9]+$\"))\n");
    t.push_str("; terminals: only those the command opens itself, none of the host's\n");
    t.push_str("(allow pseudo-tty)\n");
    t.push_str("(allow file-read* file-write* file-ioctl (literal \"/dev/ptmx\"))\n");
    t.push_str(
        "(allow file-read* file-write* file-ioctl\n  (require-all (regex #\"^/dev/ttys[0-9]+$\") \
         (extension \"com.apple.sandbox.pty\")))\n",
    );

    if workspace_mode {
        let workspace = "(param \"WORKSPACE\")";
        t.push_str(
            "\n; network: any IP traffic; Unix sockets only beneath the writable places (no host \
             daemon's: Docker, ssh-agent, tmux), and the system's DNS resolver\n",
        );
        t.push_str("(allow system-socket)\n");
        t.push_str("(allow network-outbound (remote ip \"*:*\"))\n");
        t.push_str("(allow network-inbound (local ip \"*:*\"))\n");
        t.push_str("(allow network-bind (local ip \"*:*\"))\n");
        let _ = writeln!(
            t,
            "(allow network-bind (local unix-socket (subpath {workspace})) (local unix-socket \
             (subpath {temp})))"
        );
        let _ = writeln!(
            t,
            "(allow network-outbound (remote unix-socket (subpath {workspace})) (remote \
             unix-socket (subpath {temp})))"
        );
        t.push_str("(allow network-outbound (literal \"/private/var/run/mDNSResponder\"))\n");
    } else {
        t.push_str(
            "\n; network: none; Unix sockets only beneath the private temp dir (no host \
             daemon's, no DNS)\n",
        );
        t.push_str("(allow system-socket (socket-domain AF_UNIX))\n");
        let _ = writeln!(
            t,
            "(allow network-bind (local unix-socket (subpath {temp})))"
        );
        let _ = writeln!(
            t,
            "(allow network-outbound (remote unix-socket (subpath {temp})))"
        );
    }

    if workspace_mode && !policy.git_repos.is_empty() {
        t.push_str("\n; Git metadata stays read-only: hooks, config, and .git itself\n");
        t.push_str("(deny file-write*");
        for (i, repo) in policy.git_repos.iter().enumerate() {
            let git = repo.join(".git");
            let entry = param(format!("GIT_{i}"), &git);
            let hooks = param(format!("GIT_{i}_HOOKS"), &git.join("hooks"));
            let config = param(format!("GIT_{i}_CONFIG"), &git.join("config"));
            let _ = write!(
                t,
                "\n  (literal {entry}) (subpath {hooks}) (literal {config})"
            );
        }
        t.push_str(")\n");
    }
    if !policy.masked.is_empty() {
        t.push_str(
            "\n; masked: credential files, the agent's own folders, --mask (last: wins over \
             every allow above)\n",
        );
        t.push_str("(deny file-read* file-write*");
        for (i, path) in policy.masked.iter().enumerate() {
            let _ = write!(t, "\n  (subpath {})", param(format!("MASK_{i}"), path));
        }
        t.push_str(")\n");
    }
    Profile { text: t, params }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The profile and its parameters as one reviewable text.
    fn golden(policy: &Policy) -> String {
        let profile = profile(policy);
        let mut out = profile.text.clone();
        out.push_str("\n;; parameters\n");
        for (name, path) in &profile.params {
            let _ = writeln!(out, ";; {name}={}", path.display());
        }
        out
    }

    fn masked() -> Vec<PathBuf> {
        vec![
            "/Users/ada/.aws".into(),
            "/Users/ada/.ssh/id_ed25519".into(),
            "/Users/ada/Library/Application Support/acp-bash".into(),
        ]
    }

    #[test]
    fn workspace_profile() {
        let masked = masked();
        let repos = vec![
            PathBuf::from("/Users/ada/src/app"),
            PathBuf::from("/Users/ada/src/app/vendor/lib"),
        ];
        insta::assert_snapshot!(golden(&Policy {
            mode: Mode::Workspace,
            workspace: Path::new("/Users/ada/src/app"),
            temp: Path::new("/private/var/folders/xy/T/acp-bash-tmp-501/session-1-0-ab/tmp"),
            masked: &masked,
            git_repos: &repos,
        }));
    }

    #[test]
    fn workspace_profile_with_git_metadata_writable_and_nothing_masked() {
        insta::assert_snapshot!(golden(&Policy {
            mode: Mode::Workspace,
            workspace: Path::new("/Users/ada/src/app"),
            temp: Path::new("/private/var/folders/xy/T/acp-bash-tmp-501/session-1-0-ab/tmp"),
            masked: &[],
            git_repos: &[],
        }));
    }

    #[test]
    fn read_only_profile() {
        let masked = masked();
        insta::assert_snapshot!(golden(&Policy {
            mode: Mode::ReadOnly,
            workspace: Path::new("/Users/ada/src/app"),
            temp: Path::new("/private/var/folders/xy/T/acp-bash-ro-501/run-1-0-cd"),
            masked: &masked,
            // Ignored in read-only mode: nothing there is writable anyway.
            git_repos: &[PathBuf::from("/Users/ada/src/app")],
        }));
    }

    /// The properties the golden files show, checked on their own so that a snapshot accepted
    /// by mistake still fails here: paths only as parameters, balanced parentheses, every
    /// parameter named in the text, the denials after the allows, no network in read-only.
    #[test]
    fn every_path_is_a_parameter_and_the_denials_come_last() {
        let masked = vec![PathBuf::from("/Users/a \"quoted\" (path)/.netrc")];
        let repos = vec![PathBuf::from("/Users/ada/src/app")];
        for mode in [Mode::Workspace, Mode::ReadOnly] {
            let profile = profile(&Policy {
                mode,
                workspace: Path::new("/Users/ada/src/app"),
                temp: Path::new("/private/tmp/t"),
                masked: &masked,
                git_repos: &repos,
            });
            let text = &profile.text;
            assert!(!text.contains("/Users/"), "{text}");
            assert!(!text.contains("quoted"), "{text}");
            let depth = text.chars().try_fold(0i32, |depth, c| {
                let depth = depth + i32::from(c == '(') - i32::from(c == ')');
                (depth >= 0).then_some(depth)
            });
            assert_eq!(depth, Some(0), "{text}");
            for (name, _) in &profile.params {
                assert!(text.contains(&format!("(param \"{name}\")")), "{name}");
            }
            let last_allow = text.rfind("(allow").unwrap();
            let mask = text.find("(deny file-read* file-write*").unwrap();
            assert!(mask > last_allow, "a mask comes before an allow:\n{text}");
            assert!(text.starts_with("(version 1)\n"));
            assert!(text.contains("(deny default)"));
            if mode == Mode::ReadOnly {
                assert!(!text.contains("remote ip"), "{text}");
                assert!(!text.contains("mDNSResponder"), "{text}");
                assert!(!text.contains("dnssd"), "{text}");
                assert!(!text.contains("WORKSPACE"), "{text}");
                assert!(!text.contains("GIT_"), "{text}");
            } else {
                let git = text.find("(deny file-write*").unwrap();
                assert!(git > text.find("(allow file-write* (subpath").unwrap());
            }
        }
    }

    #[test]
    fn the_arguments_run_the_program_after_the_definitions() {
        let profile = Profile {
            text: "(version 1)".into(),
            params: vec![("TEMP".into(), PathBuf::from("/private/tmp/x y"))],
        };
        let args = profile.arguments(Path::new("/bin/bash"), &["-c".into(), "true".into()]);
        let args: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "-p",
                "(version 1)",
                "-D",
                "TEMP=/private/tmp/x y",
                "--",
                "/bin/bash",
                "-c",
                "true"
            ]
        );
    }
}
