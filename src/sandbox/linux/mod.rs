//! Linux layers: Landlock rulesets built in the parent, namespaces and the filesystem view
//! entered in the child ([`child`], started by [`spawn`]), and real probes of what this kernel
//! allows.

mod cgroup;
pub(crate) mod child;
pub(crate) mod child_process;
pub(crate) mod confine;
pub(crate) mod report;
pub(crate) mod seccomp;
pub(crate) mod spawn;
pub mod step;
pub(crate) mod support;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

use super::{Confined, Limits, Mode, Roots, SpawnRequest, Support};
use child::view::View;
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

/// The write rights a ruleset built by [`ruleset`] handles on this kernel (what a rule the child
/// adds may allow).
pub(crate) fn handled_write_rights() -> u64 {
    let abi = landlock_abi().map_or(1, |v| v.min(TARGET_ABI as u32));
    AccessFs::from_write(ABI::from(abi as i32)).bits()
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
    child::sys::loopback_up();
    std::fs::File::open("/proc/thread-self/ns/net").map(OwnedFd::from)
}

/// Starts `confined` as [`crate::sandbox::spawn`] documents.
pub(crate) fn spawn_confined(confined: &Confined, request: &SpawnRequest) -> std::io::Result<i32> {
    let pass: Vec<(i32, i32)> = request
        .pass
        .iter()
        .map(|(fd, number)| (fd.as_raw_fd(), *number))
        .collect();
    let raw = spawn::Request {
        launch: &confined.launch,
        env: request.env,
        cwd: request.cwd,
        output: request.output.as_raw_fd(),
        pass: &pass,
    };
    spawn::spawn(&raw, confined.plan.as_ref().map(|p| &p.plan), false)
}

/// Runs `job` on the thread that starts commands.
pub(crate) fn on_spawner_thread(job: Box<dyn FnOnce() + Send>) {
    spawn::on_spawner_thread(job)
}

/// `PR_SET_DUMPABLE 0` for this process.
pub(crate) fn protect_agent_process() {
    // SAFETY: prctl on this process.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// The per-command plan the child runs, with the fds it refers to.
pub(crate) struct Prepared {
    pub(crate) plan: ChildPlan,
    /// Keeps the Landlock ruleset open until the command has started.
    _ruleset: Option<OwnedFd>,
    /// Keeps the prepared network namespace open until then too.
    _netns: Option<OwnedFd>,
    /// The command's pids and memory cgroups (their `cgroup.procs`), kept open until then too.
    _cgroups: [Option<OwnedFd>; 2],
}

/// How `--max-processes` is enforced here, or why it is not.
pub(crate) fn process_limit_support(user_namespace: bool) -> Result<String, String> {
    match (cgroup::available(cgroup::Controller::Pids), user_namespace) {
        (Ok(how), _) => Ok(how),
        (Err(_), true) if current_ids().0 != 0 => {
            Ok("RLIMIT_NPROC, counted per command inside its user namespace".to_string())
        }
        (Err(why), _) => Err(format!(
            "{why}; RLIMIT_NPROC does not bind root or counts every process of this user"
        )),
    }
}

/// How `--max-memory` is enforced here: `Ok` for the whole tree (a memory cgroup), `Err(why
/// not)` when only RLIMIT_DATA per process is left.
pub(crate) fn memory_limit_support() -> Result<String, String> {
    cgroup::available(cgroup::Controller::Memory)
}

/// Which layers a launch uses (decided by `confine_with` from the mode and the support).
pub(crate) struct Layers {
    pub namespaces: bool,
    pub user_namespace: bool,
    pub private_ipc_uts: bool,
    pub private_proc: bool,
    pub network_namespace: bool,
    pub view: bool,
    pub seccomp: bool,
    pub fresh_keyring: bool,
}

fn current_ids() -> (u32, u32) {
    // SAFETY: plain getters.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// The view for `mode`: what is writable, and the private temp dir of read-only mode.
pub(crate) fn view_for(mode: Mode, roots: &Roots) -> View {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).ok();
    let workspace = roots
        .workspace
        .canonicalize()
        .unwrap_or(roots.workspace.clone());
    let temp = roots.temp.canonicalize().unwrap_or(roots.temp.clone());
    let mut view = View {
        private_shm: Path::new("/dev/shm").is_dir(),
        ..View::default()
    };
    match mode {
        Mode::Workspace => {
            view.writable = [&workspace, &temp]
                .into_iter()
                .filter_map(|p| c(p))
                .collect();
        }
        Mode::ReadOnly => {
            view.private_temp = c(&temp);
            if workspace.starts_with(&temp) {
                view.keep_inside_temp = c(&workspace);
                view.keep_parents = workspace
                    .ancestors()
                    .skip(1)
                    .take_while(|p| p.starts_with(&temp) && *p != temp)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .filter_map(c)
                    .collect();
            }
        }
        Mode::Full | Mode::Off => {}
    }
    view
}

impl Prepared {
    pub(crate) fn new(
        mode: Mode,
        roots: &Roots,
        layers: Layers,
        ruleset: Option<OwnedFd>,
        limits: Limits,
    ) -> Self {
        let (uid, gid) = current_ids();
        let netns = if layers.network_namespace && layers.namespaces && uid == 0 {
            prepared_network_namespace()
        } else {
            None
        };
        let user_namespace = layers.namespaces && layers.user_namespace;
        let view = (layers.namespaces && layers.view).then(|| view_for(mode, roots));
        let pids = limits
            .max_processes
            .and_then(|max| cgroup::for_one_command(cgroup::Controller::Pids, max));
        let memory = limits
            .max_memory
            .and_then(|max| cgroup::for_one_command(cgroup::Controller::Memory, max));
        Prepared {
            plan: ChildPlan {
                namespaces: layers.namespaces,
                user_namespace,
                private_ipc_uts: layers.private_ipc_uts,
                parent_maps_ids: user_namespace && uid == 0,
                uid,
                gid,
                private_proc: layers.private_proc,
                network_namespace: layers.network_namespace,
                netns_fd: netns.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
                view,
                landlock_fd: ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
                landlock_write_rights: if ruleset.is_some() {
                    handled_write_rights()
                } else {
                    0
                },
                env_region: if layers.namespaces {
                    env_region()
                } else {
                    None
                },
                reaper: !layers.namespaces,
                drop_capabilities: user_namespace && uid == 0,
                // RLIMIT_NPROC counts per user namespace: per command only inside one.
                max_processes: if user_namespace {
                    limits.max_processes.unwrap_or(0)
                } else {
                    0
                },
                max_memory: limits.max_memory.unwrap_or(0),
                pids_cgroup_fd: pids.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
                memory_cgroup_fd: memory.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
                fresh_keyring: layers.fresh_keyring,
                seccomp: if layers.seccomp {
                    seccomp::programs().as_ref().ok()
                } else {
                    None
                },
            },
            _ruleset: ruleset,
            _netns: netns,
            _cgroups: [pids, memory],
        }
    }
}

/// Runs `plan` in a child (a probe: the would-be shell exits 0) and says whether every step
/// worked, or which step failed and why.
fn probe(plan: ChildPlan) -> Result<(), String> {
    let launch = super::Launch {
        program: "/bin/true".into(),
        args: Vec::new(),
    };
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("could not probe: {e}"))?;
    let request = spawn::Request {
        launch: &launch,
        env: &[],
        cwd: Path::new("/"),
        output: null.as_raw_fd(),
        pass: &[],
    };
    let pid = spawn::spawn(&request, Some(&plan), true).map_err(|e| {
        match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<step::StepError>())
        {
            Some(step) => format!(
                "{} failed: {} (errno {})",
                step.step.describe(),
                step.io_error(),
                step.errno
            ),
            None => format!("could not probe: {e}"),
        }
    })?;
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(format!("the probe ended with wait status {status}"))
    }
}

fn plan(namespaces: bool, user_namespace: bool) -> ChildPlan {
    let (uid, gid) = current_ids();
    ChildPlan {
        namespaces,
        user_namespace,
        private_ipc_uts: user_namespace,
        parent_maps_ids: user_namespace && uid == 0,
        uid,
        gid,
        netns_fd: -1,
        landlock_fd: -1,
        pids_cgroup_fd: -1,
        memory_cgroup_fd: -1,
        drop_capabilities: user_namespace && uid == 0,
        ..ChildPlan::default()
    }
}

/// Why namespaces fail, in words a user can act on.
fn namespace_advice(step: String, root: bool) -> String {
    let mut why = step;
    if root {
        why.push_str(
            " — a seccomp profile or a container runtime that forbids unshare (run it with \
             --cap-add SYS_ADMIN, or where user namespaces are allowed)",
        );
        return why;
    }
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
    let root = current_ids().0 == 0;
    let landlock = landlock_abi().and_then(|abi| {
        let roots = Roots {
            workspace: PathBuf::from("/"),
            temp: std::env::temp_dir(),
        };
        let fd = ruleset(Mode::ReadOnly, &roots, false)?
            .ok_or_else(|| "the ruleset came out empty".to_string())?;
        let mut p = plan(false, false);
        p.landlock_fd = fd.as_raw_fd();
        probe(p).map(|()| abi)
    });
    let user_namespace = probe(plan(true, true)).map_err(|e| namespace_advice(e, root));
    let namespaces = match (&user_namespace, root) {
        (Ok(()), _) => Ok(()),
        (Err(why), false) => Err(why.clone()),
        // Root without user namespaces: PID + mount namespaces alone (root keeps its
        // capabilities; said in the descriptions).
        (Err(_), true) => probe(plan(true, false)).map_err(|e| namespace_advice(e, root)),
    };
    let with_userns = user_namespace.is_ok();
    let private_proc = match &namespaces {
        Err(_) => Err("needs the PID namespace, which does not work here".to_string()),
        Ok(()) => {
            let mut p = plan(true, with_userns);
            p.private_proc = true;
            probe(p).map_err(|e| {
                format!(
                    "{e} — /proc is partly hidden here (as in many containers), so the kernel \
                     refuses a fresh one"
                )
            })
        }
    };
    let network_namespace = match &namespaces {
        Err(_) => Err("needs the namespaces, which do not work here".to_string()),
        Ok(()) => {
            let mut p = plan(true, with_userns);
            p.network_namespace = true;
            probe(p)
        }
    };
    let filesystem_view = match &user_namespace {
        Err(_) => Err("needs a user namespace, which does not work here".to_string()),
        Ok(()) => {
            let roots = Roots {
                workspace: std::env::temp_dir(),
                temp: std::env::temp_dir(),
            };
            let mut p = plan(true, true);
            p.view = Some(view_for(Mode::Workspace, &roots));
            probe(p)
        }
    };
    let seccomp = seccomp::programs()
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|programs| {
            let mut p = plan(false, false);
            p.seccomp = Some(programs);
            probe(p)
        });
    let session_keyring = {
        let mut p = plan(false, false);
        p.fresh_keyring = true;
        probe(p)
    };
    Support {
        landlock,
        namespaces,
        user_namespace,
        private_proc,
        network_namespace,
        filesystem_view,
        seccomp,
        session_keyring,
    }
}
