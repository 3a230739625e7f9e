//! Kernel confinement for each command: what a command may write, whether it reaches the
//! network, and that nothing it starts outlives the run.
//!
//! Owns: the sandbox [`Mode`]s, turning a [`Launch`] into a confined one, and probing which
//! layers this machine enforces ([`Support`], [`doctor_report`], [`describe`]). Must not touch:
//! output handling, the environment scrub, ACP.
//!
//! Layers (Linux; see `notes/2026-11-29-sandbox-design.md`):
//! - **Landlock** (filesystem writes; TCP when a network namespace is unavailable; signal scope),
//!   applied in the child right before exec.
//! - **PID + mount namespaces**: the command runs under a tiny init (PID 1) that exits with the
//!   shell, so the kernel kills everything the command left behind; a fresh `/proc` shows only
//!   the command's own processes, so no other process's environment is readable.
//! - **Network namespace** in `read-only` mode: only a private loopback.
//! - **Subreaper** where namespaces don't work: kills what the command leaves running.
//!
//! Each layer degrades on its own: when the kernel or the host forbids it, commands still run and
//! [`describe`] / [`doctor_report`] say what is not enforced and why.
//!
//! For embedders: the process you spawn is not bash itself but a small waiter that exits with
//! bash's exit code or signal; signal the process group (as the engine does), not that pid,
//! and SIGKILL the group when the run is over.

#[cfg(target_os = "linux")]
mod linux;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::OnceLock;

/// How much a command may do. Offered to ACP clients as session modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Writes only under the session root, the temp dir and a few devices; network allowed.
    #[default]
    Workspace,
    /// No writes except the temp dir; no network.
    ReadOnly,
    /// No filesystem or network restriction (the environment scrub still applies); the PID
    /// namespace and the private /proc stay.
    Full,
    /// No kernel sandbox at all: no Landlock, no namespaces, no subreaper. Only the process
    /// group is killed when a run ends, and the environment scrub still applies. Chosen by
    /// whoever starts the agent (`--sandbox off`), never offered to a client that did not.
    Off,
}

impl Mode {
    /// The modes with a kernel sandbox: what a client may always choose between.
    pub const ALL: [Mode; 3] = [Mode::Workspace, Mode::ReadOnly, Mode::Full];

    /// The stable identifier used on the command line and as the ACP mode id.
    pub fn id(self) -> &'static str {
        match self {
            Mode::Workspace => "workspace",
            Mode::ReadOnly => "read-only",
            Mode::Full => "full",
            Mode::Off => "off",
        }
    }

    /// The modes a client may choose between: the sandboxed ones, and `off` when whoever started
    /// the agent chose it (`off_allowed`).
    pub fn offered(off_allowed: bool) -> Vec<Mode> {
        let off = off_allowed.then_some(Mode::Off);
        Mode::ALL.into_iter().chain(off).collect()
    }

    /// The mode with this [`Mode::id`], `off` included.
    pub fn from_id(id: &str) -> Option<Mode> {
        Mode::ALL
            .into_iter()
            .chain([Mode::Off])
            .find(|mode| mode.id() == id)
    }

    /// The human name shown in a mode picker.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Workspace => "Workspace",
            Mode::ReadOnly => "Read-only",
            Mode::Full => "Full access",
            Mode::Off => "Sandbox off",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// A program and its arguments, before the engine adds env, cwd and stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The program to execute.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// The directories a confined command is measured against.
#[derive(Debug, Clone)]
pub struct Roots {
    /// The session's root directory (writable in `workspace` mode).
    pub workspace: PathBuf,
    /// The temp dir (writable in every mode).
    pub temp: PathBuf,
}

/// Code run in the child between fork and exec (async-signal-safe only).
pub type PreExec = Box<dyn FnMut() -> std::io::Result<()> + Send + Sync>;

/// A launch with its confinement applied.
pub struct Confined {
    /// What to execute (possibly wrapped).
    pub launch: Launch,
    /// Run in the child after the engine's own pre-exec steps (it must be the last one). It
    /// may fork: the spawned process then waits and exits exactly like the shell, which runs
    /// as its grandchild (see the module docs).
    pub pre_exec: Option<PreExec>,
    /// What this mode promises but this launch does not enforce, in words a person can act on.
    /// Empty when everything the mode promises is enforced.
    pub notices: Vec<String>,
}

/// Which sandbox layers work on this machine: each `Ok`, or `Err(why not, with what to do)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// Landlock, with the kernel's ABI version.
    pub landlock: Result<u32, String>,
    /// PID + mount namespaces: nothing a command starts outlives it.
    pub namespaces: Result<(), String>,
    /// A fresh /proc in the PID namespace: other processes' environments are out of sight.
    pub private_proc: Result<(), String>,
    /// A network namespace (read-only mode's "no network").
    pub network_namespace: Result<(), String>,
    /// The namespaces need a user namespace (the agent is not root): setuid programs such as
    /// `sudo` don't gain privileges inside.
    pub user_namespace: bool,
}

impl Support {
    /// Probes every layer for real (forks children that try each one). Takes a few
    /// milliseconds; [`Support::current`] caches it.
    pub fn probe() -> Support {
        #[cfg(target_os = "linux")]
        {
            linux::probe_support()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Support::none(&format!(
                "the kernel sandbox is Linux-only and this is {}",
                std::env::consts::OS
            ))
        }
    }

    /// This machine's support, probed once per process.
    pub fn current() -> &'static Support {
        static SUPPORT: OnceLock<Support> = OnceLock::new();
        SUPPORT.get_or_init(Support::probe)
    }

    /// No layer works, for `reason` (non-Linux hosts; tests of the degraded paths).
    pub fn none(reason: &str) -> Support {
        Support {
            landlock: Err(reason.to_string()),
            namespaces: Err(reason.to_string()),
            private_proc: Err(reason.to_string()),
            network_namespace: Err(reason.to_string()),
            user_namespace: false,
        }
    }

    fn landlock_abi(&self) -> u32 {
        *self.landlock.as_ref().unwrap_or(&0)
    }
}

/// Applies `mode` to `launch` with what this machine supports ([`Support::current`]).
pub fn confine(launch: Launch, mode: Mode, roots: &Roots) -> Confined {
    confine_with(launch, mode, roots, Support::current())
}

/// Applies `mode` to `launch`, using only the layers `support` says work.
pub fn confine_with(launch: Launch, mode: Mode, roots: &Roots, support: &Support) -> Confined {
    if mode == Mode::Off {
        return Confined {
            launch,
            pre_exec: None,
            notices: Vec::new(),
        };
    }
    let notices = headline_gaps(mode, support);
    #[cfg(target_os = "linux")]
    {
        let mut notices = notices;
        let namespaces = support.namespaces.is_ok();
        let net_ns = mode == Mode::ReadOnly && support.network_namespace.is_ok();
        let tcp_rules = mode == Mode::ReadOnly && !net_ns;
        let ruleset = match (mode, &support.landlock) {
            (Mode::Full, _) | (_, Err(_)) => None,
            (_, Ok(_)) => match linux::ruleset(mode, roots, tcp_rules) {
                Ok(fd) => fd,
                Err(why) => {
                    notices.push(format!(
                        "{} mode: writes are not restricted for this command ({why})",
                        mode.name()
                    ));
                    None
                }
            },
        };
        let prepared =
            linux::Prepared::new(namespaces, support.private_proc.is_ok(), net_ns, ruleset);
        let pre_exec: Option<PreExec> = if prepared.is_noop() {
            None
        } else {
            Some(Box::new(move || prepared.enter()))
        };
        Confined {
            launch,
            pre_exec,
            notices,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = roots;
        Confined {
            launch,
            pre_exec: None,
            notices,
        }
    }
}

/// What `mode` promises first (writes; read-only's network) and `support` can't enforce.
fn headline_gaps(mode: Mode, support: &Support) -> Vec<String> {
    let mut gaps = Vec::new();
    if matches!(mode, Mode::Full | Mode::Off) {
        return gaps;
    }
    if let Err(why) = &support.landlock {
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
    gaps
}

fn network_blocked(support: &Support) -> bool {
    support.network_namespace.is_ok() || support.landlock_abi() >= 4
}

/// What `mode` enforces on this machine, and what it does not: one line for a mode picker.
pub fn describe(mode: Mode) -> String {
    describe_with(mode, Support::current())
}

/// [`describe`] for a given [`Support`].
pub fn describe_with(mode: Mode, support: &Support) -> String {
    if mode == Mode::Off {
        return OFF_DESCRIPTION.to_string();
    }
    let abi = support.landlock_abi();
    let mut on = Vec::new();
    let mut off = Vec::new();
    let landlock = support.landlock.is_ok();
    match mode {
        Mode::Workspace | Mode::ReadOnly => {
            let temp = std::env::temp_dir();
            let what = if mode == Mode::Workspace {
                format!(
                    "writes only in the session folder, the temp dir ({}) and /dev/null-like devices; reads anywhere",
                    temp.display()
                )
            } else {
                format!(
                    "no writes except the temp dir ({}) and /dev/null-like devices; reads anywhere",
                    temp.display()
                )
            };
            if landlock {
                on.push(what);
                if abi < 3 {
                    off.push("truncating files outside (needs Landlock ABI 3)".to_string());
                }
                if abi < 5 {
                    off.push("ioctls on devices (needs Landlock ABI 5)".to_string());
                }
            } else {
                off.push("write restrictions (no Landlock)".to_string());
            }
        }
        Mode::Full | Mode::Off => on.push("no filesystem or network restriction".to_string()),
    }
    match mode {
        Mode::Workspace => on.push("network on".to_string()),
        Mode::Full | Mode::Off => {}
        Mode::ReadOnly => {
            if support.network_namespace.is_ok() {
                on.push("no network (a private loopback only)".to_string());
            } else if abi >= 4 {
                on.push("no TCP (Landlock)".to_string());
                off.push(
                    "blocking UDP and other non-TCP traffic (no network namespace)".to_string(),
                );
            } else {
                off.push(
                    "blocking the network (no network namespace, Landlock < ABI 4)".to_string(),
                );
            }
            if abi < 9 {
                off.push("blocking Unix sockets on disk (Docker's, D-Bus's)".to_string());
            }
        }
    }
    if support.namespaces.is_ok() {
        on.push("nothing a command starts outlives it".to_string());
    } else if cfg!(target_os = "linux") {
        on.push("what a command leaves running is killed when it ends (a subreaper)".to_string());
        off.push(
            "containing daemons started through systemd or D-Bus, or surviving an agent killed \
             with SIGKILL mid-run (no PID namespace)"
                .to_string(),
        );
    } else {
        off.push(
            "killing background processes a command leaves behind (no PID namespace)".to_string(),
        );
    }
    // SAFETY (Unix): plain getter.
    #[cfg(unix)]
    let root = unsafe { libc::geteuid() } == 0;
    #[cfg(not(unix))]
    let root = false;
    if support.private_proc.is_ok() {
        if mode == Mode::Full && root {
            on.push("other processes' environments hidden (a root command could unmount the private /proc)".to_string());
        } else {
            on.push("other processes' environments hidden".to_string());
        }
    } else {
        off.push("hiding other processes' environments from /proc (no private /proc)".to_string());
    }
    if (landlock && mode != Mode::Full) || (support.user_namespace && support.namespaces.is_ok()) {
        on.push("sudo and other setuid programs don't gain privileges".to_string());
    }
    let mut line = format!("{}: {}.", mode.name(), on.join("; "));
    if !off.is_empty() {
        let _ = write!(
            line,
            " Not enforced on this machine: {} — run `acp-bash doctor`.",
            off.join("; ")
        );
    }
    line
}

/// What `off` means, on any machine.
const OFF_DESCRIPTION: &str = "Sandbox off: no kernel sandbox (offered only when the agent is \
started with `--sandbox off`). Commands can write wherever the agent can, use the network and read other processes' environments in /proc; what a command \
starts in a new session (setsid, daemons) can outlive it, while the rest of its process group is \
killed when it ends. The environment scrub still applies.";

/// One layer of the sandbox and whether it works here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerReport {
    /// The layer's name.
    pub name: &'static str,
    /// What it gives when it works.
    pub purpose: &'static str,
    /// `Ok(details)` or `Err(why not and what to do)`.
    pub status: Result<String, String>,
}

/// Every layer, probed for real, plus each mode's description on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoctorReport {
    /// Each kernel layer and whether it works here.
    pub layers: Vec<LayerReport>,
    /// Each mode and what it enforces here.
    pub modes: Vec<(Mode, String)>,
}

impl DoctorReport {
    /// Probes now (not the cached [`Support::current`]).
    pub fn probe() -> DoctorReport {
        DoctorReport::from_support(&Support::probe())
    }

    /// The report for `support`.
    pub fn from_support(support: &Support) -> DoctorReport {
        let abi = support.landlock_abi();
        let landlock = |min: u32, what: &str| {
            match &support.landlock {
            Ok(v) if *v >= min => Ok(format!("Landlock ABI {v}")),
            Ok(v) => Err(format!("this kernel has Landlock ABI {v}; {what} needs ABI {min} or newer (a newer kernel)")),
            Err(why) => Err(why.clone()),
        }
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
        let how = if support.user_namespace {
            "in a user namespace (not root)"
        } else {
            "as root"
        };
        let layers = vec![
            LayerReport {
                name: "Landlock filesystem rules",
                purpose: "workspace / read-only: writes outside the allowed folders fail with EACCES",
                status: fs,
            },
            LayerReport {
                name: "Landlock TCP rules",
                purpose: "read-only: blocks TCP when there is no network namespace",
                status: landlock(4, "blocking TCP"),
            },
            LayerReport {
                name: "Landlock Unix-socket rules",
                purpose: "read-only: blocks connecting to Unix sockets on disk (Docker, D-Bus)",
                status: landlock(9, "blocking Unix sockets"),
            },
            LayerReport {
                name: "Landlock signal scope",
                purpose: "workspace / read-only: commands can't signal processes outside their sandbox",
                status: landlock(6, "the signal scope"),
            },
            LayerReport {
                name: "PID + mount namespaces",
                purpose: "every mode: nothing a command starts (setsid, double fork, nohup) outlives it",
                status: ok(&support.namespaces, how),
            },
            LayerReport {
                name: "subreaper fallback",
                purpose: "every mode, when the namespaces don't work: kills what a command leaves running",
                status: if cfg!(target_os = "linux") {
                    Ok(if support.namespaces.is_ok() {
                        "available; not needed here".to_string()
                    } else {
                        "in use instead of the PID namespace".to_string()
                    })
                } else {
                    Err("Linux only".to_string())
                },
            },
            LayerReport {
                name: "private /proc",
                purpose: "every mode: other processes' environments (/proc/<pid>/environ) are out of sight",
                status: ok(&support.private_proc, "fresh /proc for the command's PID namespace"),
            },
            LayerReport {
                name: "network namespace",
                purpose: "read-only: no network at all, only a private loopback",
                status: ok(&support.network_namespace, how),
            },
        ];
        let modes = Mode::ALL
            .into_iter()
            .chain([Mode::Off])
            .map(|m| (m, describe_with(m, support)))
            .collect();
        DoctorReport { layers, modes }
    }
}

impl std::fmt::Display for DoctorReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "acp-bash sandbox layers on this machine:")?;
        for layer in &self.layers {
            match &layer.status {
                Ok(details) => writeln!(f, "  [works]   {} ({details})", layer.name)?,
                Err(why) => writeln!(f, "  [missing] {}: {why}", layer.name)?,
            }
            writeln!(f, "            {}", layer.purpose)?;
        }
        writeln!(f, "\nModes:")?;
        for (mode, line) in &self.modes {
            writeln!(f, "  {:<10} {line}", mode.id())?;
        }
        Ok(())
    }
}

/// What `acp-bash doctor` prints: each layer, whether it works here, and why not.
pub fn doctor_report() -> String {
    DoctorReport::probe().to_string()
}
