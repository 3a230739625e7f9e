//! The `floor` case's Z-like process: a fresh exec of this bench binary (the hidden argument
//! [`ARG`]), single-threaded, which makes its user, mount, UTS and IPC namespaces once, builds a
//! view of a given number of mounts, then forks one command per request on its socket (fd 3)
//! with `floor_child` and answers with where the time went. No acp-bash code: the kernel's part
//! of a zygote command, alone.
//!
//! Protocol (`SOCK_SEQPACKET`): Z sends `u` once it has unshared; the bench writes its id maps
//! and answers `m`; Z builds the view and sends `R` + the mount count (u32) + the Landlock ABI
//! (i32, ≤ 0: none), or `E` + why. Then per request (4 bytes of `floor_child::flag`s): `S` +
//! the shell's wait status (from W, before the command's namespaces are torn down), then `D` +
//! Z's child's wait status (i32) + the slots (`floor_child::slot::COUNT` u64s) + what the
//! command's processes used ([`children_usage`]: CPU µs, voluntary and involuntary context
//! switches, u64 each). EOF: Z exits.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::RawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::floor_child::{self as child, slot, Prepared};

/// argv[1] of the Z-like process.
pub const ARG: &str = "__acp-bash-floor-zygote";
/// The request socket's fd in Z.
pub const SOCKET_FD: RawFd = 3;

/// What the bench asks of a Z (its argv after [`ARG`]).
pub struct Config {
    /// Mounts in Z's namespace after the view is built (`/proc/self/mountinfo` lines).
    pub mounts: usize,
    /// A host folder Z mounts its filler tmpfs on (in its own namespace).
    pub scratch: PathBuf,
    /// A host folder the filler's directory binds show.
    pub bind_source: PathBuf,
    /// The Landlock ruleset's writable folders (a workspace and a temp folder).
    pub writable: [PathBuf; 2],
    /// A cgroup v2 folder (its `cgroup.procs` and the folder itself for clone3).
    pub cgroup_v2: Option<PathBuf>,
    /// A cgroup v1 folder (its `tasks`).
    pub cgroup_v1: Option<PathBuf>,
}

impl Config {
    pub fn to_args(&self) -> Vec<OsString> {
        let opt = |p: &Option<PathBuf>| p.clone().map_or(OsString::from("-"), PathBuf::into);
        vec![
            ARG.into(),
            self.mounts.to_string().into(),
            self.scratch.clone().into(),
            self.bind_source.clone().into(),
            self.writable[0].clone().into(),
            self.writable[1].clone().into(),
            opt(&self.cgroup_v2),
            opt(&self.cgroup_v1),
        ]
    }

    fn from_args(args: &[OsString]) -> Option<Config> {
        let path = |i: usize| args.get(i).map(PathBuf::from);
        let opt = |i: usize| path(i).filter(|p| p.as_os_str() != "-");
        Some(Config {
            mounts: args.get(1)?.to_str()?.parse().ok()?,
            scratch: path(2)?,
            bind_source: path(3)?,
            writable: [path(4)?, path(5)?],
            cgroup_v2: opt(6),
            cgroup_v1: opt(7),
        })
    }
}

/// Runs the Z-like process and exits when this process was started as one.
pub fn main_if_asked() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().map(OsString::as_os_str) != Some(OsStr::new(ARG)) {
        return;
    }
    let code = match Config::from_args(&args) {
        Some(config) => serve(&config),
        None => {
            eprintln!("floor zygote: bad arguments {args:?}");
            2
        }
    };
    std::process::exit(code);
}

fn send(message: &[u8]) {
    // SAFETY: send on our socket.
    unsafe {
        libc::send(
            SOCKET_FD,
            message.as_ptr().cast(),
            message.len(),
            libc::MSG_NOSIGNAL,
        )
    };
}

fn recv(buf: &mut [u8]) -> isize {
    loop {
        // SAFETY: recv into our buffer.
        let n = unsafe { libc::recv(SOCKET_FD, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return n;
        }
    }
}

fn refuse(why: String) -> i32 {
    send(format!("E{why}").as_bytes());
    1
}

fn cstring(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("a path without NUL")
}

fn os_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn open(path: &Path, flags: libc::c_int) -> Result<RawFd, String> {
    // SAFETY: open with a valid path.
    let fd = unsafe { libc::open(cstring(path).as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(os_error(&format!("opening {}", path.display())));
    }
    Ok(fd)
}

fn mount_count() -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

fn mount(source: &Path, target: &Path, fstype: Option<&str>, flags: libc::c_ulong) -> i32 {
    let fstype = fstype.map(|t| CString::new(t).unwrap());
    // SAFETY: mount with valid strings.
    unsafe {
        libc::mount(
            cstring(source).as_ptr(),
            cstring(target).as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()),
            flags,
            std::ptr::null(),
        )
    }
}

/// Z's namespace to `target` mounts: a tmpfs on `scratch`, then, in it, files with `/dev/null`
/// bound over them (acp-bash's masks) and folders with `bind_source` bound on them (its
/// read-only and Git binds), alternating. Returns the count reached.
fn build_view(config: &Config) -> Result<usize, String> {
    if mount(
        Path::new("tmpfs"),
        &config.scratch,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
    ) != 0
    {
        return Err(os_error("the view's tmpfs"));
    }
    let mut count = mount_count();
    let mut i = 0;
    while count < config.mounts {
        if i % 2 == 0 {
            let file = config.scratch.join(format!("mask-{i}"));
            std::fs::File::create(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            if mount(Path::new("/dev/null"), &file, None, libc::MS_BIND) != 0 {
                return Err(os_error("a /dev/null bind"));
            }
        } else {
            let dir = config.scratch.join(format!("bind-{i}"));
            std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            if mount(&config.bind_source, &dir, None, libc::MS_BIND) != 0 {
                return Err(os_error("a folder bind"));
            }
        }
        count += 1;
        i += 1;
    }
    Ok(mount_count())
}

/// `struct landlock_ruleset_attr`.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed).
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

/// A ruleset like acp-bash's workspace one (`src/sandbox/linux/landlock.rs`): writes handled
/// (and TCP, abstract Unix sockets and signals where the ABI has them), allowed beneath the two
/// writable folders, `/dev/pts` and `/dev/shm`, and on seven device files. `(fd, abi)`; fd -1
/// without Landlock.
fn landlock_ruleset(writable: &[PathBuf; 2]) -> (RawFd, i32) {
    // SAFETY: the documented version query.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    } as i32;
    if abi <= 0 {
        return (-1, abi);
    }
    // WRITE_FILE, REMOVE_DIR … MAKE_SYM (v1), REFER (v2), TRUNCATE (v3), IOCTL_DEV (v5).
    let mut write: u64 = (1 << 1) | (0x1fff & !0xf);
    let mut file: u64 = 1 << 1;
    if abi >= 2 {
        write |= 1 << 13;
    }
    if abi >= 3 {
        write |= 1 << 14;
        file |= 1 << 14;
    }
    if abi >= 5 {
        write |= 1 << 15;
        file |= 1 << 15;
    }
    let attr = RulesetAttr {
        handled_access_fs: write,
        handled_access_net: if abi >= 4 { 0b11 } else { 0 },
        scoped: if abi >= 6 { 0b11 } else { 0 },
    };
    let size = match abi {
        1..=3 => 8,
        4 | 5 => 16,
        _ => 24,
    };
    // SAFETY: landlock_create_ruleset with a struct of at least `size` bytes.
    let ruleset = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            size as usize,
            0u32,
        )
    } as RawFd;
    if ruleset < 0 {
        return (-1, abi);
    }
    let mut rules: Vec<(PathBuf, u64)> = writable.iter().map(|d| (d.clone(), write)).collect();
    for dir in ["/dev/pts", "/dev/shm"] {
        rules.push((dir.into(), write));
    }
    for dev in [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
        "/dev/ptmx",
    ] {
        rules.push((dev.into(), file));
    }
    for (path, access) in rules {
        let Ok(fd) = open(&path, libc::O_PATH) else {
            continue;
        };
        let rule = PathBeneath {
            allowed_access: access,
            parent_fd: fd,
        };
        // SAFETY: landlock_add_rule with a valid rule; our fds.
        unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset,
                1u32,
                &rule as *const PathBeneath,
                0u32,
            );
            libc::close(fd);
        }
    }
    (ruleset, abi)
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: Option<u32> = None;

/// A small filter in the spirit of acp-bash's (`src/sandbox/linux/seccomp.rs`): the
/// architecture checked, x32 refused, eight calls denied with EPERM and io_uring with ENOSYS;
/// everything else allowed. Empty on another architecture.
fn seccomp_filter() -> Vec<libc::sock_filter> {
    let Some(arch) = AUDIT_ARCH else {
        return Vec::new();
    };
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    const KILL_PROCESS: u32 = 0x8000_0000;
    const ERRNO: u32 = 0x0005_0000;
    const ALLOW: u32 = 0x7fff_0000;
    let mut program = vec![
        op(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        op(JEQ_K, 1, 0, arch),
        op(RET_K, 0, 0, KILL_PROCESS),
        op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
    ];
    if cfg!(target_arch = "x86_64") {
        program.push(op(JGE_K, 0, 1, 0x4000_0000)); // x32
        program.push(op(RET_K, 0, 0, ERRNO | libc::ENOSYS as u32));
    }
    let denied: [(libc::c_long, i32); 11] = [
        (libc::SYS_keyctl, libc::EPERM),
        (libc::SYS_add_key, libc::EPERM),
        (libc::SYS_request_key, libc::EPERM),
        (libc::SYS_bpf, libc::EPERM),
        (libc::SYS_perf_event_open, libc::EPERM),
        (libc::SYS_userfaultfd, libc::EPERM),
        (libc::SYS_kexec_load, libc::EPERM),
        (libc::SYS_kexec_file_load, libc::EPERM),
        (libc::SYS_io_uring_setup, libc::ENOSYS),
        (libc::SYS_io_uring_enter, libc::ENOSYS),
        (libc::SYS_io_uring_register, libc::ENOSYS),
    ];
    for (nr, errno) in denied {
        program.push(op(JEQ_K, 0, 1, nr as u32));
        program.push(op(RET_K, 0, 0, ERRNO | errno as u32));
    }
    program.push(op(RET_K, 0, 0, ALLOW));
    program
}

/// Z's life: namespaces, view, then one command per request until EOF.
fn serve(config: &Config) -> i32 {
    // SAFETY: fd 3 is the socket the bench put there; our fds are close-on-exec.
    unsafe {
        if libc::fcntl(SOCKET_FD, libc::F_SETFD, libc::FD_CLOEXEC) < 0 {
            eprintln!("floor zygote: no socket on fd 3");
            return 2;
        }
    }
    // A session of its own, as acp-bash's Z makes: no controlling terminal for any command.
    // SAFETY: setsid has no preconditions.
    unsafe { libc::setsid() };
    // The cgroup files are opened before the user namespace, with the bench's credentials
    // (the kernel checks the opener's for a join through them).
    let (mut cgroup_v2_procs, mut cgroup_v2_dir, mut cgroup_v1_tasks) = (-1, -1, -1);
    if let Some(dir) = &config.cgroup_v2 {
        match (
            open(&dir.join("cgroup.procs"), libc::O_WRONLY),
            open(dir, libc::O_RDONLY | libc::O_DIRECTORY),
        ) {
            (Ok(procs), Ok(folder)) => (cgroup_v2_procs, cgroup_v2_dir) = (procs, folder),
            (Err(e), _) | (_, Err(e)) => return refuse(e),
        }
    }
    if let Some(dir) = &config.cgroup_v1 {
        match open(&dir.join("tasks"), libc::O_WRONLY) {
            Ok(tasks) => cgroup_v1_tasks = tasks,
            Err(e) => return refuse(e),
        }
    }
    // SAFETY: a fresh shared anonymous page.
    let slots = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if slots == libc::MAP_FAILED {
        return refuse(os_error("mmap"));
    }
    let slots = slots.cast::<u64>();
    let namespaces =
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC;
    // SAFETY: unshare of this single-threaded process.
    if unsafe { libc::unshare(namespaces) } != 0 {
        return refuse(os_error("unshare(USER|NS|UTS|IPC)"));
    }
    send(b"u");
    let mut buf = [0u8; 64];
    if recv(&mut buf) != 1 || buf[0] != b'm' {
        return refuse("the bench did not write the id maps".into());
    }
    if mount(
        Path::new("none"),
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
    ) != 0
    {
        return refuse(os_error("--make-rprivate /"));
    }
    let mounts = match build_view(config) {
        Ok(mounts) => mounts,
        Err(e) => return refuse(e),
    };
    let (landlock, abi) = landlock_ruleset(&config.writable);
    let filter = seccomp_filter();
    let bash = CString::new(super::raw::BASH).unwrap();
    let (dash_c, script) = (CString::new("-c").unwrap(), CString::new("true").unwrap());
    let argv = [
        bash.as_ptr(),
        dash_c.as_ptr(),
        script.as_ptr(),
        std::ptr::null(),
    ];
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut pair = k.into_vec();
            pair.push(b'=');
            pair.extend(v.into_vec());
            CString::new(pair).ok()
        })
        .collect();
    let envp: Vec<*const libc::c_char> = env
        .iter()
        .map(|e| e.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let prepared = Prepared {
        bash: bash.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        socket: SOCKET_FD,
        slots,
        cgroup_v2_procs,
        cgroup_v2_dir,
        cgroup_v1_tasks,
        landlock,
        seccomp: libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr() as *mut libc::sock_filter,
        },
        // SAFETY: geteuid has no preconditions.
        drop_capabilities: unsafe { libc::geteuid() } == 0,
    };
    let mut ready = vec![b'R'];
    ready.extend((mounts as u32).to_ne_bytes());
    ready.extend(abi.to_ne_bytes());
    send(&ready);
    loop {
        let n = recv(&mut buf);
        if n < 4 {
            return 0; // EOF: the bench is done
        }
        let flags = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
        for i in 0..slot::COUNT {
            // SAFETY: the shared page holds slot::COUNT u64s.
            unsafe { std::ptr::write_volatile(slots.add(i), 0) };
        }
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(slots.add(slot::RECV), now_ns()) };
        let before = children_usage();
        let pid = child::spawn(&prepared, flags);
        let mut status: libc::c_int = -1;
        if pid < 0 {
            let code =
                (1u64 << 32) | std::io::Error::last_os_error().raw_os_error().unwrap_or(0) as u64;
            // SAFETY: as above.
            unsafe { std::ptr::write_volatile(slots.add(slot::FAILED), code) };
        }
        if pid > 0 {
            // SAFETY: waitpid on our child.
            while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
        }
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(slots.add(slot::Z_REAPED), now_ns()) };
        let plain =
            flags & (child::flag::PID_NS | child::flag::MNT_NS | child::flag::PID1_BY_CLONE3) == 0;
        if plain || pid <= 0 {
            let mut message = vec![b'S'];
            message.extend(status.to_ne_bytes());
            send(&message);
        }
        let after = children_usage();
        let mut done = vec![b'D'];
        done.extend(status.to_ne_bytes());
        for i in 0..slot::COUNT {
            // SAFETY: as above.
            done.extend(unsafe { std::ptr::read_volatile(slots.add(i)) }.to_ne_bytes());
        }
        for (a, b) in after.iter().zip(before) {
            done.extend((a - b).to_ne_bytes());
        }
        send(&done);
    }
}

/// What the reaped descendants of this process used so far: CPU (user + system, µs), voluntary
/// and involuntary context switches (`getrusage(RUSAGE_CHILDREN)`).
pub fn children_usage() -> [u64; 3] {
    // SAFETY: getrusage into a zeroed struct.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    [
        us(usage.ru_utime) + us(usage.ru_stime),
        usage.ru_nvcsw as u64,
        usage.ru_nivcsw as u64,
    ]
}

/// `CLOCK_MONOTONIC` in ns (the clock the children stamp).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime into a local struct.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
