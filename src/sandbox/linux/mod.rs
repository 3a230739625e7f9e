//! Linux layers: Landlock rulesets built in the parent, namespaces entered in the child
//! ([`child`]), and real probes of what this kernel allows.

pub(crate) mod child;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

use super::{Mode, Roots, Support};
use child::ChildPlan;

/// The Landlock ABI whose rights we ask for (the crate drops what an older kernel lacks).
const TARGET_ABI: ABI = ABI::V6;

/// Devices every confined command may write (files), and device folders (beneath).
pub(crate) const WRITABLE_DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];
pub(crate) const WRITABLE_DEVICE_DIRS: [&str; 2] = ["/dev/pts", "/dev/shm"];

/// The kernel's Landlock ABI version, or why there is none.
pub(crate) fn landlock_abi() -> Result<u32, String> {
    // SAFETY: the documented version query: no attr, size 0, LANDLOCK_CREATE_RULESET_VERSION.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    if v > 0 {
        return Ok(v as u32);
    }
    let err = std::io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) => "the kernel has Landlock but it is not enabled at boot: add \
            `landlock` to the `lsm=` kernel parameter"
            .to_string(),
        Some(libc::ENOSYS) => "this kernel has no Landlock (it needs Linux 5.13 or newer built \
            with CONFIG_SECURITY_LANDLOCK)"
            .to_string(),
        _ => format!("the Landlock version query failed: {err}"),
    })
}

/// A Landlock ruleset for `mode`, as an fd the child applies; `Ok(None)` when `mode` handles
/// nothing. Errors say which path or step failed.
pub(crate) fn ruleset(
    mode: Mode,
    roots: &Roots,
    tcp_rules: bool,
) -> Result<Option<OwnedFd>, String> {
    let (writable, unix_sockets): (Vec<&Path>, bool) = match mode {
        Mode::Full | Mode::Off => return Ok(None),
        Mode::Workspace => (vec![roots.workspace.as_path(), roots.temp.as_path()], false),
        Mode::ReadOnly => (vec![roots.temp.as_path()], true),
    };
    let write = AccessFs::from_write(TARGET_ABI);
    let file_rights = write & AccessFs::from_file(TARGET_ABI);
    let err = |what: &str, e: &dyn std::fmt::Display| format!("Landlock: {what}: {e}");

    let mut handled = write;
    if unix_sockets {
        // Connecting to Unix sockets on disk (Docker, D-Bus): only kernels with ABI 9+.
        handled |= AccessFs::ResolveUnix;
    }
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled)
        .map_err(|e| err("handling write access", &e))?;
    if tcp_rules {
        rs = rs
            .handle_access(AccessNet::from_all(TARGET_ABI))
            .map_err(|e| err("handling TCP", &e))?;
    }
    let mut scopes: landlock::BitFlags<Scope> = Scope::Signal.into();
    if mode == Mode::ReadOnly {
        scopes |= Scope::AbstractUnixSocket;
    }
    rs = rs.scope(scopes).map_err(|e| err("scoping signals", &e))?;
    let mut created = rs.create().map_err(|e| err("creating the ruleset", &e))?;

    for dir in writable {
        let fd = PathFd::new(dir).map_err(|e| err(&format!("opening {}", dir.display()), &e))?;
        let mut rights = write;
        if unix_sockets {
            rights |= AccessFs::ResolveUnix;
        }
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| err(&format!("allowing {}", dir.display()), &e))?;
    }
    for dir in WRITABLE_DEVICE_DIRS {
        if let Ok(fd) = PathFd::new(dir) {
            created = created
                .add_rule(PathBeneath::new(fd, write))
                .map_err(|e| err(&format!("allowing {dir}"), &e))?;
        }
    }
    for file in WRITABLE_DEVICES {
        if let Ok(fd) = PathFd::new(file) {
            created = created
                .add_rule(PathBeneath::new(fd, file_rights))
                .map_err(|e| err(&format!("allowing {file}"), &e))?;
        }
    }
    Ok(Option::<OwnedFd>::from(created))
}

/// `[env_start, env_end)` of this process, from /proc/self/stat (fields 50 and 51); fixed for
/// the life of the process, so read once.
pub(crate) fn env_region() -> Option<(usize, usize)> {
    static REGION: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
    *REGION.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let after_comm = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = after_comm.split_whitespace().collect();
        // After the comm, the first field is field 3.
        let start = fields.get(50 - 3)?.parse::<usize>().ok()?;
        let end = fields.get(51 - 3)?.parse::<usize>().ok()?;
        (start != 0 && end > start).then_some((start, end))
    })
}

/// A fresh network namespace (loopback up) for one read-only command, made ahead of need:
/// creating one takes about a millisecond, which a command should not wait for. Each call takes
/// the spare and starts making the next one on a short-lived thread, so every command still gets
/// a namespace of its own. `None` when not root (the command then makes its own, inside its user
/// namespace) or when the kernel refuses.
fn prepared_network_namespace() -> Option<OwnedFd> {
    static SPARE: std::sync::Mutex<Option<OwnedFd>> = std::sync::Mutex::new(None);
    // SAFETY: plain getter.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let spare = SPARE.lock().unwrap().take();
    let netns = spare.or_else(|| new_network_namespace().ok());
    if netns.is_some() {
        let refill = std::thread::Builder::new()
            .name("acp-bash-netns".into())
            .spawn(|| {
                // Making a namespace costs about a millisecond of CPU: let the commands (and
                // the agent's other threads) have the cores first.
                // SAFETY: setpriority on this thread (Linux: a thread id is a process id).
                unsafe {
                    libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
                }
                if let Ok(next) = move_this_thread_to_a_new_network_namespace() {
                    SPARE.lock().unwrap().get_or_insert(next);
                }
            });
        if let Err(error) = refill {
            tracing::debug!(%error, "no thread to prepare the next network namespace");
        }
    }
    netns
}

/// A new network namespace with its loopback up, made on a thread of its own (see
/// [`move_this_thread_to_a_new_network_namespace`]).
fn new_network_namespace() -> std::io::Result<OwnedFd> {
    let made = std::thread::Builder::new()
        .name("acp-bash-netns".into())
        .spawn(move_this_thread_to_a_new_network_namespace)?
        .join();
    made.unwrap_or_else(|_| Err(std::io::Error::other("the namespace thread panicked")))
}

/// `unshare(CLONE_NEWNET)` moves the calling thread into a new network namespace; brings its `lo`
/// up and returns an fd that keeps the namespace alive. Only for a thread that ends right after.
fn move_this_thread_to_a_new_network_namespace() -> std::io::Result<OwnedFd> {
    // SAFETY: unshare has no memory-safety preconditions; it changes this thread only.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    child::loopback_up();
    std::fs::File::open("/proc/thread-self/ns/net").map(OwnedFd::from)
}

/// The per-command plan the pre-exec closure runs.
pub(crate) struct Prepared {
    plan: ChildPlan,
    /// Keeps the Landlock ruleset open until the closure is dropped (after spawn).
    _ruleset: Option<OwnedFd>,
    /// Keeps the prepared network namespace open until then too.
    _netns: Option<OwnedFd>,
}

impl Prepared {
    pub(crate) fn new(
        namespaces: bool,
        private_proc: bool,
        network_namespace: bool,
        ruleset: Option<OwnedFd>,
    ) -> Self {
        let netns = if network_namespace && namespaces {
            prepared_network_namespace()
        } else {
            None
        };
        let landlock_fd: RawFd = ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd());
        Prepared {
            plan: ChildPlan {
                namespaces,
                private_proc,
                network_namespace,
                netns_fd: netns.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
                landlock_fd,
                env_region: if namespaces { env_region() } else { None },
                message_fd: 2,
                probe: false,
                reaper: !namespaces,
            },
            _ruleset: ruleset,
            _netns: netns,
        }
    }

    pub(crate) fn is_noop(&self) -> bool {
        !self.plan.namespaces && !self.plan.reaper && self.plan.landlock_fd < 0
    }

    /// The pre-exec step: async-signal-safe.
    pub(crate) fn enter(&self) -> std::io::Result<()> {
        child::enter(&self.plan)
    }
}

/// Runs `plan` in a forked child (as a probe: the would-be shell exits 0) and says whether
/// every step worked, or the message of the step that failed.
fn probe(mut plan: ChildPlan) -> Result<(), String> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2/fork/waitpid; the child only runs the async-signal-safe `child::enter`.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(format!(
                "could not probe: {}",
                std::io::Error::last_os_error()
            ));
        }
        plan.message_fd = fds[1];
        plan.probe = true;
        let pid = libc::fork();
        if pid == 0 {
            libc::close(fds[0]);
            let _ = child::enter(&plan);
            libc::_exit(0);
        }
        libc::close(fds[1]);
        if pid < 0 {
            libc::close(fds[0]);
            return Err(format!(
                "could not probe: {}",
                std::io::Error::last_os_error()
            ));
        }
        let mut message = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            let n = libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len());
            if n > 0 {
                message.extend_from_slice(&buf[..n as usize]);
            } else if n < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            } else {
                break;
            }
        }
        libc::close(fds[0]);
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0 {
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&message);
        let text = text
            .trim()
            .trim_start_matches("acp-bash sandbox: ")
            .split("; the command did not run")
            .next()
            .unwrap_or_default()
            .to_string();
        Err(if text.is_empty() {
            format!("the probe ended with wait status {status}")
        } else {
            text
        })
    }
}

fn plan(
    namespaces: bool,
    private_proc: bool,
    network_namespace: bool,
    landlock_fd: RawFd,
) -> ChildPlan {
    ChildPlan {
        namespaces,
        private_proc,
        network_namespace,
        netns_fd: -1,
        landlock_fd,
        env_region: None,
        message_fd: 2,
        probe: true,
        reaper: false,
    }
}

/// Why namespaces fail, in words a user can act on.
fn namespace_advice(step: String, user_ns: bool) -> String {
    if !user_ns {
        return format!(
            "{step} — root without CAP_SYS_ADMIN, or a seccomp profile that forbids unshare \
             (typical of containers: run it with --cap-add SYS_ADMIN, or as a normal user where \
             user namespaces are allowed)"
        );
    }
    let mut why = step;
    let apparmor =
        std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
            .map(|v| v.trim() == "1")
            .unwrap_or(false);
    let clone = std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone")
        .map(|v| v.trim() == "0")
        .unwrap_or(false);
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .map(|v| v.trim() == "0")
        .unwrap_or(false);
    if apparmor {
        why.push_str(
            " — AppArmor restricts unprivileged user namespaces here \
             (kernel.apparmor_restrict_unprivileged_userns=1); allow them with an AppArmor profile \
             for acp-bash or set that sysctl to 0",
        );
    } else if clone {
        why.push_str(
            " — unprivileged user namespaces are off (kernel.unprivileged_userns_clone=0)",
        );
    } else if max {
        why.push_str(" — user namespaces are off (user.max_user_namespaces=0)");
    } else {
        why.push_str(
            " — this process may not create user namespaces (a container's seccomp profile, or \
             it runs inside a chroot)",
        );
    }
    why
}

/// Probes each layer for real.
pub(crate) fn probe_support() -> Support {
    // SAFETY: plain getter.
    let user_namespace = unsafe { libc::geteuid() } != 0;
    let landlock = landlock_abi().and_then(|abi| {
        let roots = Roots {
            workspace: PathBuf::from("/"),
            temp: std::env::temp_dir(),
        };
        let fd = ruleset(Mode::ReadOnly, &roots, false)?
            .ok_or_else(|| "the ruleset came out empty".to_string())?;
        probe(plan(false, false, false, fd.as_raw_fd())).map(|()| abi)
    });
    let namespaces =
        probe(plan(true, false, false, -1)).map_err(|e| namespace_advice(e, user_namespace));
    let private_proc = match &namespaces {
        Err(_) => Err("needs the PID namespace, which does not work here".to_string()),
        Ok(()) => probe(plan(true, true, false, -1)).map_err(|e| {
            format!(
                "{e} — /proc is partly hidden here (as in many containers), so the kernel refuses \
                 a fresh one"
            )
        }),
    };
    let network_namespace = match &namespaces {
        Err(_) => Err("needs the namespaces, which do not work here".to_string()),
        Ok(()) => probe(plan(true, false, true, -1)),
    };
    Support {
        landlock,
        namespaces,
        private_proc,
        network_namespace,
        user_namespace,
    }
}
