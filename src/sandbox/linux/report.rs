//! What each mode enforces on this machine, in words: the mode descriptions and `doctor`'s table
//! of layers. Each claim here is one a test in `tests/it/sandbox/` proves (as root and as an
//! ordinary user) or a gap the probe found.

use std::fmt::Write as _;

use crate::sandbox::{LayerReport, Mode, Support};

/// What `mode` promises first (writes; read-only's network) and `support` can't enforce.
pub(crate) fn headline_gaps(mode: Mode, support: &Support) -> Vec<String> {
    let mut gaps = Vec::new();
    if mode == Mode::Off {
        return gaps;
    }
    let confined = mode != Mode::Full;
    // Where the read-only view works, it restricts writes without Landlock (EROFS): only
    // without both are writes unrestricted.
    let view = support.filesystem_view.is_ok() && support.user_namespace.is_ok();
    if let (true, false, Err(why)) = (confined, view, &support.landlock) {
        gaps.push(format!(
            "{} mode: writes are NOT restricted here ({why})",
            mode.name()
        ));
    }
    if mode == Mode::ReadOnly && !network_blocked(support) {
        gaps.push(format!(
            "Read-only mode: the network is NOT blocked here ({})",
            support
                .network_namespace
                .as_ref()
                .err()
                .map_or("", |s| s.as_str())
        ));
    }
    // Every other layer the mode promises and this machine lost: said in the first command's
    // output too, not only in the mode's description.
    let said = |gap: &String| {
        (confined && !view && support.landlock.is_err() && gap == NO_WRITE_RESTRICTION)
            || (!network_blocked(support) && gap == NO_NETWORK_BLOCK)
    };
    let rest: Vec<String> = self::gaps(mode, support)
        .into_iter()
        .filter(|gap| !said(gap))
        .collect();
    if !rest.is_empty() {
        gaps.push(format!(
            "{} mode: NOT enforced on this machine: {} (`acp-bash doctor` says why and what to do)",
            mode.name(),
            rest.join("; ")
        ));
    }
    gaps
}

fn network_blocked(support: &Support) -> bool {
    support.network_namespace.is_ok() || support.landlock_abi() >= 4
}

fn agent_is_root() -> bool {
    // SAFETY: plain getter.
    unsafe { libc::geteuid() == 0 }
}

/// How `--max-processes` is enforced here, or why not.
fn process_limit_support(support: &Support) -> Result<String, String> {
    super::process_limit_support(support.user_namespace.is_ok())
}

/// What the limits a command runs under became here, where a cgroup does not serve them:
/// `--max-memory` (when set) as RLIMIT_DATA per process, and what that does not bind. The first
/// command of a session in `mode` says it (as the mode's other gaps), `doctor` too ("resource
/// limits").
pub(crate) fn limit_notices(mode: Mode, limits: crate::sandbox::Limits) -> Vec<String> {
    if limits.max_memory.is_none() {
        return Vec::new();
    }
    limit_notices_with(mode, limits, super::memory_limit_support())
}

/// [`limit_notices`] with the machine's answer given (`memory`: the memory cgroup or why not).
fn limit_notices_with(
    mode: Mode,
    limits: crate::sandbox::Limits,
    memory: Result<String, String>,
) -> Vec<String> {
    let mut notices = Vec::new();
    if mode == Mode::Off {
        return notices;
    }
    // `--max-processes` without a pids cgroup: RLIMIT_NPROC in the command's user namespace
    // binds each command (`doctor` says so); where even that does not bind, the mode's gaps say
    // so and what it became ("--max-processes (…; RLIMIT_NPROC does not bind root or counts
    // every process of this user)").
    if let (Some(bytes), Err(why)) = (limits.max_memory, memory) {
        notices.push(format!(
            "{} mode: --max-memory {} is RLIMIT_DATA per process here: a command's processes together, and its files in /dev/shm or a tmpfs, may use more (no memory cgroup: {why})",
            mode.name(),
            crate::text::human_bytes(usize::try_from(bytes).unwrap_or(usize::MAX))
        ));
    }
    notices
}

/// Said when no write restriction works at all (also the headline notice's subject).
const NO_WRITE_RESTRICTION: &str = "any write restriction";
/// Said when read-only mode has no network isolation at all.
const NO_NETWORK_BLOCK: &str = "blocking the network";
/// Said when read-only mode blocks TCP only.
const NO_UDP_BLOCK: &str = "blocking UDP and other non-TCP traffic";

/// What `mode` promises and `support` does not enforce, each in a few words.
pub(crate) fn gaps(mode: Mode, support: &Support) -> Vec<String> {
    let root = agent_is_root();
    let abi = support.landlock_abi();
    let mut gaps: Vec<String> = Vec::new();
    let confined = matches!(mode, Mode::Workspace | Mode::ReadOnly);
    if confined {
        let view = support.filesystem_view.is_ok();
        match (view, support.landlock.is_ok()) {
            (false, false) => gaps.push(NO_WRITE_RESTRICTION.to_string()),
            (false, true) => {
                gaps.push("protecting metadata (chmod, chown, timestamps) outside".to_string());
                if abi < 3 {
                    gaps.push("blocking truncation outside".to_string());
                }
            }
            _ => {}
        }
        if !view && support.landlock.is_ok() {
            gaps.push(
                "hiding the host's terminals and daemons' sockets (no filesystem view; \
                 credential files stay unreadable through Landlock read rules)"
                    .to_string(),
            );
        } else if !view {
            gaps.push(
                "hiding the host's terminals, daemons' sockets and credential files (no \
                 filesystem view)"
                    .to_string(),
            );
            if mode == Mode::Workspace {
                gaps.push("keeping Git hooks and config read-only".to_string());
            }
        }
        if mode == Mode::Workspace && support.cache_layer.is_err() {
            gaps.push(
                "writable package caches (no overlayfs in a user namespace: they stay \
                 read-only)"
                    .to_string(),
            );
        }
        if abi < 6 {
            gaps.push("blocking the host's abstract Unix sockets (Landlock ABI < 6)".to_string());
        }
        if support.user_namespace.is_err() && root {
            gaps.push(
                "dropping root's capabilities (device nodes, host name, host network, IPC)"
                    .to_string(),
            );
        }
        if support.user_namespace.is_err() && !root {
            gaps.push("a user namespace (the command runs as this user on the host)".to_string());
        }
        if mode == Mode::ReadOnly {
            if support.network_namespace.is_err() {
                if abi >= 4 {
                    gaps.push(NO_UDP_BLOCK.to_string());
                } else {
                    gaps.push(NO_NETWORK_BLOCK.to_string());
                }
            }
            if abi < 9 && !view {
                gaps.push("blocking Unix sockets on disk (Docker's, D-Bus's)".to_string());
            }
        }
        if support.seccomp.is_err() {
            gaps.push("the seccomp filter (io_uring, keyrings, bpf, AF_VSOCK)".to_string());
        }
    }
    if mode != Mode::Off {
        if support.namespaces.is_err() {
            gaps.push(
                "containing daemons started through systemd or D-Bus (no PID namespace)"
                    .to_string(),
            );
        }
        if support.private_proc.is_err() {
            gaps.push("hiding other processes' environments (no private /proc)".to_string());
        }
        if let Err(why) = process_limit_support(support) {
            gaps.push(format!("--max-processes ({why})"));
        }
        // Where keyctl itself is refused (a container's seccomp filter), commands can't use
        // any keyring, the agent's included: nothing is lost.
        if let Err(why) = &support.session_keyring {
            if !why.ends_with(super::probe::KEYRING_REFUSED) {
                gaps.push("a fresh session keyring (commands share the agent's)".to_string());
            }
        }
    }
    gaps
}

/// Whether `mode` holds here, is weakened (its first promise holds: writes are confined, and
/// read-only's network is blocked; some other layer is missing) or is missing (that first
/// promise does not hold). See `notes/2026-12-06-doctor-causes.md` for what counts.
pub(crate) fn verdict(mode: Mode, support: &Support) -> crate::sandbox::Verdict {
    use crate::sandbox::Verdict;
    let gaps = gaps(mode, support);
    if gaps.is_empty() {
        return Verdict::Holds;
    }
    let first_promise_lost = gaps
        .iter()
        .any(|gap| gap == NO_WRITE_RESTRICTION || gap == NO_NETWORK_BLOCK);
    if first_promise_lost {
        Verdict::Missing(gaps)
    } else {
        Verdict::Weakened(gaps)
    }
}

/// What `mode` lets commands do, then what `support` does not enforce of it (if anything).
pub(crate) fn describe(mode: Mode, support: &Support) -> String {
    let root = agent_is_root();
    let temp = std::env::temp_dir();
    let allowlist = crate::sandbox::workspace_network_allowlist();
    let proxied = crate::sandbox::network_proxied_here(support);
    let network = match (allowlist, &proxied) {
        (true, Ok(())) => {
            "reach only the hosts on the network allowlist, through acp-bash's proxy (no \
             direct connection, DNS, UDP, ICMP or IPv6; `acp-bash doctor` lists the hosts)"
        }
        _ => "may use the whole network",
    };
    let allows = match mode {
        Mode::Workspace => format!(
            "Commands change files only in the session folder and {} (the session's own), and \
             {network}; writes to package caches (~/.cargo/registry, ~/.npm, ~/.cache, …) \
             land in a layer of the session's own that its later commands see, never in the \
             host's; Git hooks and config stay read-only. They see no host terminal, daemon \
             socket or credential file, and get no keyring, io_uring or VM socket of the \
             host's.",
            temp.display()
        ),
        Mode::ReadOnly => "Commands read everything but credential files, change nothing \
                           outside a private temp dir, with no network, no host terminal and \
                           no daemon socket, and get no keyring, io_uring or VM socket of the \
                           host's."
            .to_string(),
        Mode::Full => "Commands change any file the agent may and use the network; what they \
                       start still ends with them."
            .to_string(),
        Mode::Off => "Commands run with no kernel sandbox, chosen by whoever started the \
                      agent (`--sandbox off`)."
            .to_string(),
    };
    let mut gaps = gaps(mode, support);
    if let (Mode::Workspace, true, Err(why)) = (mode, allowlist, &proxied) {
        gaps.push(format!("the network allowlist ({why})"));
    }
    let gives_up = match (mode, root) {
        (Mode::Full, true) if support.root_needs_user_namespace => Some(
            "As root here (without CAP_SYS_ADMIN, as in a rootless container) they run in a \
             user namespace of their own with root's ids mapped to themselves: they change any \
             file root may, and keep every capability inside it but none over this machine's \
             namespaces (its host name, network and devices stay as they are).",
        ),
        (Mode::Full, true) => Some(
            "As root they keep every capability but CAP_SYS_PTRACE: they cannot read the \
             memory or environment of the agent and its helpers, but can make devices, change \
             the host's name and network, unmount /proc to read other root processes, and \
             change the host to get around all this (kernel modules, system files).",
        ),
        (Mode::Full, false) => {
            Some("Commands can change everything this user owns, the agent's own files included.")
        }
        (Mode::Off, true) => Some(
            "As root, commands can do anything root can: read and write any process's memory, \
             fds and environment (the agent's stdout too), make devices, change the host; what \
             they start in a new session can outlive them.",
        ),
        (Mode::Off, false) => Some(
            "Commands can change everything this user owns and read this user's other \
             processes' environments (not the agent's: it is non-dumpable); what they start in \
             a new session can outlive them.",
        ),
        _ => None,
    };
    let mut line = allows;
    if let Some(text) = gives_up {
        line.push(' ');
        line.push_str(text);
    }
    if !gaps.is_empty() {
        let _ = write!(
            line,
            " Not enforced on this machine: {} — run `acp-bash doctor`.",
            gaps.join("; ")
        );
    }
    line
}

/// What the seccomp filter denies (see `seccomp.rs`).
const SECCOMP_PURPOSE: &str = "workspace / read-only: io_uring (ENOSYS), keyctl / add_key / request_key, bpf, perf_event_open, userfaultfd, kexec (EPERM) fail, and so does a socket of any family but unix, inet, inet6 and netlink (AF_VSOCK included: EAFNOSUPPORT); a 32-bit system call kills the command";

/// Whether the sandbox is built once per session, by a zygote per session and mode
/// (`notes/2026-12-01-session-zygote.md`), or why each sandboxed command builds its own.
pub(crate) fn per_session_sandbox(support: &Support) -> Result<String, String> {
    let per_command = "each sandboxed command builds its own namespaces and read-only view (about 2 ms per command)";
    if support.namespaces.is_err() {
        return Err(
            "there are no namespaces to keep here (see PID + mount namespaces above)".to_string(),
        );
    }
    if support.user_namespace.is_err() || support.filesystem_view.is_err() {
        return Err(format!(
            "{per_command}: the zygote holds a user namespace and the read-only view, and this \
             machine gives commands {} (see above)",
            if support.user_namespace.is_err() {
                "no user namespace"
            } else {
                "no read-only view"
            }
        ));
    }
    // The zygote's commands check, on a pidfd of the zygote, that it was alive when their
    // parent-death signal was armed; without pidfds the zygote's setup fails.
    if let Err(error) = super::zygote::own_pidfd() {
        return Err(format!(
            "{per_command}: pidfd_open fails here ({error}; Linux 5.3 has it), and a zygote's \
             commands need it to die with the zygote"
        ));
    }
    match super::zygote::program(None) {
        Ok(_) => Ok(
            "workspace and read-only: a zygote per session and mode holds the user, mount, UTS \
             and IPC namespaces (and read-only's network one) with the view built once; each \
             command gets its own PID namespace and its own copy of the mount view; full mode \
             builds per command. Only the sessions used most recently keep their zygotes \
             between commands (--max-warm-sessions, default 8), and only the two used last \
             also keep a spare PID 1: at most N + 2 helper processes in one mode"
                .to_string(),
        ),
        Err(why) => Err(format!("{per_command}: {why}")),
    }
}

/// Each kernel layer, whether it works with `support`, and what it gives.
pub(crate) fn layers(support: &Support) -> Vec<LayerReport> {
    // `doctor` says what is, not what may be: where cgroup v1 does not serve the limits, the
    // cgroup v2 subtree is set up now (a D-Bus round trip to systemd).
    super::cgroup_v2_now();
    // Whether `--max-memory` binds a command's whole tree here (a memory cgroup), or why not.
    let memory_cgroup = super::memory_limit_support();
    let memory_limit = if memory_cgroup.is_ok() {
        "a memory cgroup for the whole tree, and RLIMIT_DATA per process"
    } else {
        "RLIMIT_DATA per process only (see the memory cgroup)"
    };
    let abi = support.landlock_abi();
    let landlock = |min: u32, what: &str| match &support.landlock {
        Ok(v) if *v >= min => Ok(format!("Landlock ABI {v}")),
        Ok(v) => Err(format!(
            "this kernel has Landlock ABI {v}; {what} needs ABI {min} or newer (a newer kernel)"
        )),
        Err(why) => Err(why.clone()),
    };
    let mut fs = landlock(1, "");
    if let Ok(details) = &mut fs {
        if abi < 3 {
            details.push_str(
                "; truncating files outside the allowed folders is not blocked (ABI < 3)",
            );
        }
        if abi < 5 {
            details.push_str("; device ioctls are not blocked (ABI < 5)");
        }
    }
    let ok = |r: &Result<(), String>, details: &str| r.clone().map(|()| details.to_string());
    let root = agent_is_root();
    let how = match (&support.user_namespace, root) {
        (Ok(()), true) => "in a user namespace (root's ids mapped to themselves)",
        (Ok(()), false) => "in a user namespace (this user's id mapped to itself)",
        (Err(_), _) => "without a user namespace",
    };
    vec![
            LayerReport {
                name: "Landlock filesystem rules",
                purpose: "workspace / read-only: writes outside the allowed folders fail (a second layer under the read-only view, which answers first with EROFS; alone, EACCES)",
                status: fs,
            },
            LayerReport {
                name: "Landlock TCP rules",
                purpose: "read-only: blocks TCP when there is no network namespace",
                status: landlock(4, "blocking TCP"),
            },
            LayerReport {
                name: "Landlock Unix-socket rules",
                purpose: "workspace / read-only: connecting to Unix sockets on disk works only beneath the writable places (a second layer under the masked socket folders)",
                status: landlock(9, "blocking Unix sockets"),
            },
            LayerReport {
                name: "Landlock signal and abstract-socket scope",
                purpose: "workspace / read-only: commands can't signal processes outside their sandbox, nor connect to the host's abstract Unix sockets (X11's, D-Bus's)",
                status: landlock(6, "the scopes"),
            },
            LayerReport {
                name: "PID + mount namespaces",
                purpose: "every mode: nothing a command starts (setsid, double fork, nohup) outlives it",
                status: ok(
                    &support.namespaces,
                    if root && support.root_needs_user_namespace {
                        "in a user namespace (root's ids mapped to themselves), in every mode: root lacks CAP_SYS_ADMIN here"
                    } else {
                        how
                    },
                ),
            },
            LayerReport {
                name: "user namespace",
                purpose: "workspace / read-only (and every mode when not root): commands hold no capability over the host: no device nodes, host name, host network or host IPC changes",
                status: ok(&support.user_namespace, how),
            },
            LayerReport {
                name: "read-only filesystem view",
                purpose: "workspace / read-only: everything read-only and nosuid except the writable places (nodev, nosuid), private IPC; metadata outside can't change",
                status: ok(
                    &support.filesystem_view,
                    if super::probe::mount_setattr_missing() {
                        "mount namespace: read-only bind of /, writable binds; a remount per mount point (this kernel has no mount_setattr: Linux < 5.12)"
                    } else {
                        "mount namespace: read-only bind of /, writable binds"
                    },
                ),
            },
            LayerReport {
                name: "command's own /dev",
                purpose: "workspace / read-only: only null, zero, full, random, urandom, tty, a fresh devpts (ptmx: programs make ptys) and a private shm; the host's terminals (/dev/pts/N), disks and other devices are not there",
                status: ok(&support.filesystem_view, "tmpfs with host nodes bound, devpts newinstance"),
            },
            LayerReport {
                name: "no host daemon's socket",
                purpose: "workspace / read-only: a private temp dir and /tmp (the session's own in workspace mode, kept across its commands), empty read-only mounts over /run/user, D-Bus, systemd, docker, containerd, podman, screen, tmux, $XDG_RUNTIME_DIR, $SSH_AUTH_SOCK's folder and the sockets in /run; abstract sockets: the Landlock scope",
                status: ok(&support.filesystem_view, "mount namespace: masks and a private temp dir"),
            },
            LayerReport {
                name: "credential files masked",
                purpose: "workspace / read-only: ~/.ssh private keys, ~/.aws, ~/.gnupg, ~/.netrc, cloud and registry logins, the agent's own state and log folders read as empty (listed below; --allow-read / --mask)",
                status: ok(&support.filesystem_view, "mount namespace: /dev/null or an empty tmpfs over each").map_err(|why| match &support.landlock {
                    Ok(_) => format!("{why}; instead, Landlock read rules keep them unreadable (EACCES; their names stay listable)"),
                    Err(_) => why,
                }),
            },
            LayerReport {
                name: "Git metadata read-only",
                purpose: "workspace: .git/hooks, .git/config (and a worktree's .git file) of the session folder and of repositories up to two levels below it are read-only, .git can't be renamed or replaced (--allow-git-hooks-and-config-writes)",
                status: ok(&support.filesystem_view, "mount namespace: read-only binds, .git a mount point"),
            },
            LayerReport {
                name: "package caches copy-on-write",
                purpose: "workspace: ~/.cargo/registry, ~/.cargo/git, ~/.rustup, ~/.npm, ~/.cache, pnpm, yarn, Maven, Gradle and Go caches (those that exist) take writes into a layer of the session's own, kept for its later commands; the host's caches never change (without it they are read-only)",
                status: ok(&support.cache_layer, "overlayfs in the user namespace, upper layer in the session's folder"),
            },
            LayerReport {
                name: "resource limits",
                purpose: "--max-processes / --max-memory for each command",
                status: match process_limit_support(support) {
                    Ok(how) => Ok(format!("--max-processes: {how}; --max-memory: {memory_limit}")),
                    Err(why) => Err(format!("--max-processes: {why}; --max-memory: {memory_limit}")),
                },
            },
            LayerReport {
                name: "memory cgroup",
                purpose: "--max-memory for a command's whole tree (tmpfs files count; over it the kernel kills one of its processes); without it, RLIMIT_DATA per process only",
                status: memory_cgroup,
            },
            LayerReport {
                name: "subreaper fallback",
                purpose: "every mode, when the namespaces don't work: kills what a command leaves running",
                status: Ok(if support.namespaces.is_ok() {
                    "available; not needed here".to_string()
                } else {
                    "in use instead of the PID namespace".to_string()
                }),
            },
            LayerReport {
                name: "private /proc",
                purpose: "every mode: other processes' environments (/proc/<pid>/environ) are out of sight",
                status: ok(&support.private_proc, "fresh /proc for the command's PID namespace"),
            },
            LayerReport {
                name: "seccomp filter",
                purpose: SECCOMP_PURPOSE,
                status: ok(&support.seccomp, "installed last, right before exec"),
            },
            LayerReport {
                name: "fresh session keyring",
                purpose: "every mode but off: each command starts with a new, empty session keyring, so keys in the agent's are out of reach and a key one command adds is not found by another session's",
                status: ok(&support.session_keyring, "keyctl(KEYCTL_JOIN_SESSION_KEYRING) before exec"),
            },
            LayerReport {
                name: "network namespace",
                purpose: "read-only: no network at all, only a private loopback",
                status: ok(&support.network_namespace, how),
            },
        ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The false alarm of issue 44: on a kernel without Landlock, the read-only view still
    /// confines writes (EROFS), so the first command's notice must not say they are not
    /// restricted; only where the view is missing too does it say so.
    #[test]
    fn without_landlock_writes_are_not_said_unrestricted_where_the_view_confines_them() {
        let mut support = Support::all(0);
        support.landlock = Err("this kernel has no Landlock".into());
        for mode in [Mode::Workspace, Mode::ReadOnly] {
            let notices = headline_gaps(mode, &support).join("\n");
            assert!(!notices.contains("NOT restricted"), "{notices}");
            assert!(notices.contains("abstract Unix sockets"), "{notices}");
            assert!(matches!(
                verdict(mode, &support),
                crate::sandbox::Verdict::Weakened(_)
            ));
        }
        support.filesystem_view = Err("needs a user namespace".into());
        support.user_namespace = Err("refused".into());
        let notices = headline_gaps(Mode::Workspace, &support).join("\n");
        assert!(
            notices.contains("writes are NOT restricted here"),
            "{notices}"
        );
        assert!(matches!(
            verdict(Mode::Workspace, &support),
            crate::sandbox::Verdict::Missing(_)
        ));
    }

    /// Issue 44, point 3: where no cgroup serves a limit, every mode's first notice says what
    /// it became (RLIMIT_NPROC in the user namespace; RLIMIT_DATA per process), and only for
    /// the limits set; where a cgroup serves them, nothing is said.
    #[test]
    fn every_mode_says_which_limit_became_what_where_no_cgroup_serves_it() {
        let limits = crate::sandbox::Limits::default()
            .max_processes(Some(64))
            .max_memory(Some(64 << 20));
        let no_memory = || Err("cgroup v2: the memory controller is not delegated".to_string());
        for mode in [Mode::Workspace, Mode::ReadOnly, Mode::Full] {
            let notices = limit_notices_with(mode, limits, no_memory()).join("\n");
            assert!(
                notices.contains(&format!(
                    "{} mode: --max-memory 64 MiB is RLIMIT_DATA per process here",
                    mode.name()
                )),
                "{notices}"
            );
            assert!(
                notices.contains("the memory controller is not delegated"),
                "{notices}"
            );
            // Only the limits that are set.
            let unset = limits.max_memory(None);
            assert!(limit_notices_with(mode, unset, no_memory()).is_empty());
            // A memory cgroup: nothing to say.
            let cgroup = Ok("cgroup v2 memory.max per command".to_string());
            assert!(limit_notices_with(mode, limits, cgroup).is_empty());
        }
        assert!(limit_notices_with(Mode::Off, limits, no_memory()).is_empty());
    }

    /// Where keyctl is refused for every process (a container's seccomp filter), commands
    /// cannot use the agent's keyring either: that is not a gap.
    #[test]
    fn a_keyring_refused_to_everyone_is_not_a_gap() {
        let mut support = Support::all(9);
        support.session_keyring = Err(format!(
            "joining a fresh session keyring failed{}",
            super::super::probe::KEYRING_REFUSED
        ));
        let keyring = |support: &Support| {
            gaps(Mode::Workspace, support)
                .iter()
                .any(|gap| gap.contains("keyring"))
        };
        assert!(!keyring(&support));
        support.session_keyring = Err("joining a fresh session keyring failed: EDQUOT".into());
        assert!(keyring(&support));
    }
}
