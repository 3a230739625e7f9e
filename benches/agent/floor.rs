//! `floor`: what the kernel alone charges for a confined command from a per-session zygote
//! (issue 24, points 2 and 4; `notes/2026-12-02-per-command-floor.md`). A Z-like process of
//! the bench's own (`floor_zygote.rs`: user, mount, UTS and IPC namespaces made once, a view of
//! as many mounts as acp-bash's real zygote holds here) forks `bash -c true` per request with
//! one more per-command step in each row (`floor_child.rs`), all raw system calls, no acp-bash
//! code; each row paired with a raw `bash -c true` spawned just before it in the same
//! iteration. acp-bash's own zygote command (`Session::run`, workspace) runs in the same loop
//! for comparison. Runs as whoever starts it (root or an ordinary user) and says which.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use acp_bash::exec::{Engine, EngineConfig, Exit, RunRequest, Session};
use acp_bash::sandbox::Mode;
use tokio_util::sync::CancellationToken;

use super::floor_child::{flag, slot, STEP_NAMES};
use super::floor_zygote::{children_usage, now_ns, Config, SOCKET_FD};
use super::raw;
use super::stats::{median, ms, spread, Row};
use super::Bench;

const CASE: &str = "floor";

/// One Z-like process and the bench's end of its socket.
struct Zygote {
    child: Child,
    socket: Option<OwnedFd>,
    mounts: usize,
    landlock_abi: i32,
}

/// One command as the bench saw it, with the children's stamps.
struct Measured {
    /// When the request was sent, the shell's status arrived, and Z's `D` arrived (ns).
    sent: u64,
    status_at: u64,
    done: u64,
    slots: [u64; slot::COUNT],
    /// The command's processes: CPU (µs), voluntary and involuntary context switches.
    usage: [u64; 3],
}

impl Measured {
    fn done_ms(&self) -> f64 {
        (self.done - self.sent) as f64 / 1e6
    }

    fn status_ms(&self) -> f64 {
        (self.status_at - self.sent) as f64 / 1e6
    }
}

fn socket_send(fd: &OwnedFd, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: send on our socket.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn socket_recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: recv into our buffer.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// The id maps of Z's user namespace, written from here (the namespace's parent): root maps
/// every id onto itself (as acp-bash does for root), an ordinary user only its own.
fn write_id_maps(pid: u32) -> io::Result<()> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    // SAFETY: no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid == 0 {
        std::fs::write(proc.join("uid_map"), "0 0 4294967295")?;
        std::fs::write(proc.join("gid_map"), "0 0 4294967295")
    } else {
        std::fs::write(proc.join("setgroups"), "deny")?;
        std::fs::write(proc.join("uid_map"), format!("{uid} {uid} 1"))?;
        std::fs::write(proc.join("gid_map"), format!("{gid} {gid} 1"))
    }
}

impl Zygote {
    fn start(config: &Config) -> Result<Zygote, String> {
        let mut pair = [-1; 2];
        // SAFETY: socketpair into a local array.
        if unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        } != 0
        {
            return Err(format!("socketpair: {}", io::Error::last_os_error()));
        }
        // SAFETY: two new fds we own.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let theirs_fd = theirs.as_raw_fd();
        let exe = std::env::current_exe().map_err(|e| format!("this bench's binary: {e}"))?;
        let mut command = Command::new(exe);
        command
            .arg0("acp-bash-floor-z")
            .args(config.to_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        // SAFETY: dup2/fcntl are async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                let r = if theirs_fd == SOCKET_FD {
                    libc::fcntl(SOCKET_FD, libc::F_SETFD, 0)
                } else {
                    libc::dup2(theirs_fd, SOCKET_FD)
                };
                if r < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| format!("starting the Z-like process: {e}"))?;
        drop(theirs);
        let timeout = libc::timeval {
            tv_sec: 30,
            tv_usec: 0,
        };
        // SAFETY: setsockopt with a timeval.
        unsafe {
            libc::setsockopt(
                ours.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&timeout as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        let mut zygote = Zygote {
            child,
            socket: Some(ours),
            mounts: 0,
            landlock_abi: 0,
        };
        let mut buf = [0u8; 4096];
        zygote.recv(&mut buf)?;
        if buf[0] != b'u' {
            return Err(format!("Z sent {:?} before its id maps", buf[0]));
        }
        write_id_maps(zygote.child.id()).map_err(|e| format!("Z's id maps: {e}"))?;
        socket_send(zygote.socket(), b"m").map_err(|e| e.to_string())?;
        zygote.recv(&mut buf)?;
        if buf[0] != b'R' {
            return Err(format!("Z sent {:?} instead of ready", buf[0]));
        }
        Ok(zygote)
    }

    fn socket(&self) -> &OwnedFd {
        self.socket.as_ref().expect("the socket until drop")
    }

    /// Receives one message; `E…` (Z refused) and EOF are errors; ready (`R`) is parsed here.
    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, String> {
        let n = socket_recv(self.socket(), buf).map_err(|e| format!("Z did not answer: {e}"))?;
        if n == 0 {
            return Err("Z ended".into());
        }
        match buf[0] {
            b'E' => Err(String::from_utf8_lossy(&buf[1..n]).into_owned()),
            b'R' if n >= 9 => {
                self.mounts = u32::from_ne_bytes(buf[1..5].try_into().unwrap()) as usize;
                self.landlock_abi = i32::from_ne_bytes(buf[5..9].try_into().unwrap());
                Ok(n)
            }
            _ => Ok(n),
        }
    }

    /// One command with `flags`.
    fn run(&self, flags: u32) -> Result<Measured, String> {
        let sent = now_ns();
        socket_send(self.socket(), &flags.to_ne_bytes()).map_err(|e| e.to_string())?;
        let mut buf = [0u8; 512];
        let mut status_at = 0;
        let mut shell_status = -1;
        loop {
            let n = socket_recv(self.socket(), &mut buf)
                .map_err(|e| format!("Z did not answer: {e}"))?;
            match buf[0] {
                _ if n == 0 => return Err("Z ended".into()),
                b'S' if n >= 5 => {
                    status_at = now_ns();
                    shell_status = i32::from_ne_bytes(buf[1..5].try_into().unwrap());
                }
                b'D' if n >= 5 + 8 * (slot::COUNT + 3) => break,
                other => return Err(format!("Z sent {other:?} ({n} bytes)")),
            }
        }
        let done = now_ns();
        let mut slots = [0u64; slot::COUNT];
        for (i, value) in slots.iter_mut().enumerate() {
            let at = 5 + 8 * i;
            *value = u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap());
        }
        let mut usage = [0u64; 3];
        for (i, value) in usage.iter_mut().enumerate() {
            let at = 5 + 8 * (slot::COUNT + i);
            *value = u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap());
        }
        let failed = slots[slot::FAILED];
        if failed != 0 {
            let step = STEP_NAMES.get((failed >> 32) as usize).unwrap_or(&"?");
            let error = io::Error::from_raw_os_error((failed & 0xffff_ffff) as i32);
            return Err(format!("{step} failed: {error}"));
        }
        if status_at == 0 || !libc::WIFEXITED(shell_status) || libc::WEXITSTATUS(shell_status) != 0
        {
            let z_child = i32::from_ne_bytes(buf[1..5].try_into().unwrap());
            return Err(format!(
                "`bash -c true` did not exit 0 (shell status {shell_status}, Z's child {z_child})"
            ));
        }
        Ok(Measured {
            sent,
            status_at,
            done,
            slots,
            usage,
        })
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        drop(self.socket.take()); // Z reads EOF and exits
        let _ = self.child.wait();
    }
}

/// A cgroup folder of the bench's own for the join rows, or why there is none; removed on drop.
struct CgroupDir(Result<PathBuf, String>);

impl Drop for CgroupDir {
    fn drop(&mut self) {
        if let Ok(dir) = &self.0 {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// `acp-bash-floor-<pid>` under this process's cgroup in the hierarchy `fstype` (`cgroup2`, or
/// `cgroup` with the `pids` controller), checked writable.
fn make_cgroup(v2: bool) -> CgroupDir {
    let what = if v2 { "cgroup v2" } else { "cgroup v1 pids" };
    let made = (|| {
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let path = own
            .lines()
            .find_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                let wanted = if v2 {
                    id == "0" && controllers.is_empty()
                } else {
                    controllers.split(',').any(|c| c == "pids")
                };
                wanted.then(|| path.to_string())
            })
            .ok_or(format!("this process is in no {what} hierarchy"))?;
        let mountinfo =
            std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
        let mount = mountinfo
            .lines()
            .find_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                let mut fields = right.split(' ');
                let (fstype, _, options) = (fields.next()?, fields.next()?, fields.next()?);
                let wanted = if v2 {
                    fstype == "cgroup2"
                } else {
                    fstype == "cgroup" && options.split(',').any(|o| o == "pids")
                };
                wanted.then(|| left.split(' ').nth(4).map(PathBuf::from))?
            })
            .ok_or(format!("no {what} hierarchy is mounted"))?;
        let dir = mount
            .join(path.trim_start_matches('/'))
            .join(format!("acp-bash-floor-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let join_file = dir.join(if v2 { "cgroup.procs" } else { "tasks" });
        if let Err(e) = std::fs::OpenOptions::new().write(true).open(&join_file) {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!("{} is not writable: {e}", join_file.display()));
        }
        Ok(dir)
    })();
    CgroupDir(made.map_err(|e: String| format!("{what}: {e}")))
}

/// The mounts of the process `pid` (`/proc/<pid>/mountinfo` lines) and their types.
fn mounts_of(pid: &str) -> Option<(usize, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).ok()?;
    let mut types: Vec<(String, usize)> = Vec::new();
    for line in text.lines() {
        let fstype = line
            .split_once(" - ")
            .and_then(|(_, r)| r.split(' ').next())
            .unwrap_or("?");
        match types.iter_mut().find(|(t, _)| t == fstype) {
            Some((_, n)) => *n += 1,
            None => types.push((fstype.to_string(), 1)),
        }
    }
    types.sort_by_key(|t| std::cmp::Reverse(t.1));
    let kinds: Vec<String> = types.iter().map(|(t, n)| format!("{t} {n}")).collect();
    Some((text.lines().count(), kinds.join(", ")))
}

/// acp-bash's zygotes that this process started (comm `acp-bash-zygote`, parent us).
fn our_acp_bash_zygotes() -> Vec<String> {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().into_string().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (comm, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
            let ppid = rest.split(' ').nth(1)?;
            (comm == "acp-bash-zygote" && ppid == me).then_some(pid)
        })
        .collect()
}

/// acp-bash's engine in workspace mode, with its zygote (this bench's `acp-bash` binary).
struct RealSession {
    rt: tokio::runtime::Runtime,
    session: Arc<Session>,
}

impl RealSession {
    fn new(bench: &Bench) -> Result<RealSession, String> {
        let config = EngineConfig::default()
            .sandbox_mode(Mode::Workspace)
            .log_dir(bench.engine_log_dir())
            .zygote_program(Some(bench.bin.clone()));
        let session = Engine::new(config)
            .session(bench.session_dir())
            .map_err(|e| format!("a workspace session: {e}"))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(RealSession {
            rt,
            session: Arc::new(session),
        })
    }

    /// `true` through `Session::run` on a runtime worker, as the agent runs it; its time (ms).
    fn run_true(&self) -> Result<f64, String> {
        let session = self.session.clone();
        let (elapsed, exit) = self.rt.block_on(async move {
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let outcome = session
                    .run(
                        RunRequest::new("true"),
                        &mut |_: &str| {},
                        &CancellationToken::new(),
                    )
                    .await;
                (started.elapsed(), outcome.status.exit)
            })
            .await
            .expect("the run's task")
        });
        if exit != Exit::Code(0) {
            return Err(format!("`true` ended {exit:?}"));
        }
        Ok(ms(elapsed))
    }
}

/// What a row is measured against.
#[derive(Clone, Copy)]
enum Against {
    Raw,
    Row(usize),
}

/// What a row runs.
enum Work {
    Floor { zygote: usize, flags: u32 },
    AcpBashZygote,
    AcpBashPerCommand,
}

struct Variant {
    label: String,
    work: Work,
    against: Against,
    /// Paired with the raw spawn just before it (ms): until all gone, until the status.
    done: Vec<f64>,
    status: Vec<f64>,
    raw: Vec<f64>,
    /// This row's own time per iteration (ms), for the step against another row.
    own_done: Vec<f64>,
    own_status: Vec<f64>,
    segments: Vec<(&'static str, Vec<f64>)>,
    /// CPU (µs) and voluntary context switches of the command's processes, and of the raw
    /// spawn's bash (floor rows only).
    cpu: Vec<f64>,
    raw_cpu: Vec<f64>,
    switches: Vec<f64>,
    raw_switches: Vec<f64>,
    failed: Option<String>,
}

impl Variant {
    fn new(label: impl Into<String>, work: Work, against: Against) -> Variant {
        Variant {
            label: label.into(),
            work,
            against,
            done: Vec::new(),
            status: Vec::new(),
            raw: Vec::new(),
            own_done: Vec::new(),
            own_status: Vec::new(),
            segments: Vec::new(),
            cpu: Vec::new(),
            raw_cpu: Vec::new(),
            switches: Vec::new(),
            raw_switches: Vec::new(),
            failed: None,
        }
    }

    fn unavailable(label: impl Into<String>, why: String) -> Variant {
        let mut v = Variant::new(label, Work::AcpBashPerCommand, Against::Raw);
        v.failed = Some(why);
        v
    }
}

/// Where the time of one command went (µs), in the order the steps happen.
fn segments(m: &Measured) -> Vec<(&'static str, f64)> {
    let s = &m.slots;
    let us = |a: u64, b: u64| (b as f64 - a as f64) / 1e3;
    let mut out = vec![("request to Z", us(m.sent, s[slot::RECV]))];
    let has_w = s[slot::W_START] != 0;
    let has_i = s[slot::I_START] != 0;
    if has_w {
        out.push(("fork W", us(s[slot::RECV], s[slot::W_START])));
        out.push(("setsid + cgroup", us(s[slot::W_START], s[slot::W_CGROUP])));
        out.push(("unshare", us(s[slot::W_CGROUP], s[slot::W_UNSHARED])));
        out.push(("W's mounts", us(s[slot::W_UNSHARED], s[slot::W_VIEW])));
    }
    if has_i {
        if has_w {
            out.push(("fork I", us(s[slot::W_VIEW], s[slot::I_START])));
        } else {
            out.push((
                "clone3 I with the namespaces",
                us(s[slot::RECV], s[slot::I_START]),
            ));
        }
        out.push((
            "I's mounts (/proc, W's)",
            us(s[slot::I_START], s[slot::I_PROC]),
        ));
        out.push(("fork B", us(s[slot::I_PROC], s[slot::B_START])));
    } else if has_w {
        out.push(("fork B", us(s[slot::W_VIEW], s[slot::B_START])));
    } else {
        out.push(("fork B", us(s[slot::RECV], s[slot::B_START])));
    }
    out.push(("confinement", us(s[slot::B_START], s[slot::B_EXEC])));
    let reaped = if s[slot::SHELL_REAPED] != 0 {
        s[slot::SHELL_REAPED]
    } else {
        s[slot::Z_REAPED]
    };
    out.push(("exec, bash, its exit, reaped", us(s[slot::B_EXEC], reaped)));
    if s[slot::STATUS_SENT] != 0 {
        out.push(("status to the bench", us(s[slot::STATUS_SENT], m.status_at)));
    }
    if has_w && has_i {
        out.push((
            "I's _exit → W's wait returns",
            us(s[slot::I_EXIT], s[slot::W_REAPED_I]),
        ));
    }
    if has_w {
        out.push((
            "W's _exit → Z's wait returns",
            us(s[slot::W_EXIT], s[slot::Z_REAPED]),
        ));
    } else if has_i {
        out.push((
            "I's _exit → Z's wait returns",
            us(s[slot::I_EXIT], s[slot::Z_REAPED]),
        ));
    }
    out.push(("Z's answer to the bench", us(s[slot::Z_REAPED], m.done)));
    out
}

fn record_segments(into: &mut Vec<(&'static str, Vec<f64>)>, m: &Measured) {
    for (i, (label, value)) in segments(m).into_iter().enumerate() {
        match into.get_mut(i) {
            Some((l, values)) if *l == label => values.push(value),
            _ => into.insert(i, (label, vec![value])),
        }
    }
}

fn segment_median(v: &Variant, label: &str) -> Option<f64> {
    v.segments
        .iter()
        .find(|(l, _)| *l == label)
        .map(|(_, values)| median(values))
}

/// Least squares `y = a + b x`.
fn fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(sx, sy), (x, y)| (sx + x, sy + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx == 0.0 {
        return None;
    }
    let b = sxy / sxx;
    Some((my - b * mx, b))
}

pub fn floor(bench: &Bench) -> Vec<Row> {
    let mut rows = Vec::new();
    let iterations = if bench.quick { 40 } else { 200 };
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    let who = if euid == 0 {
        "root".to_string()
    } else {
        format!("an ordinary user (uid {euid})")
    };
    let host_mounts = mounts_of("self").map_or(0, |(n, _)| n);

    // acp-bash's own zygote: its mount count is the view the floor's Z copies.
    let real = RealSession::new(bench).and_then(|real| {
        for _ in 0..3 {
            real.run_true()?;
        }
        Ok(real)
    });
    let real_z = real.as_ref().ok().and_then(|_| {
        let pids = our_acp_bash_zygotes();
        pids.first().and_then(|pid| mounts_of(pid))
    });
    let (mounts, mount_source) = match (&real, &real_z) {
        (Ok(_), Some((n, kinds))) => (*n, format!("acp-bash's zygote here: {n} mounts ({kinds})")),
        (Ok(_), None) => (
            host_mounts + 40,
            "no acp-bash zygote found after a workspace command (it fell back to the \
             per-command path?): the host's mounts + 40"
                .to_string(),
        ),
        (Err(e), _) => (
            host_mounts + 40,
            format!("no acp-bash session ({e}): the host's mounts + 40"),
        ),
    };

    let base = bench.work.path().join("floor");
    let (scratch, bind_source, temp) = (
        base.join("scratch"),
        base.join("bind-source"),
        base.join("tmp"),
    );
    for dir in [&bind_source, &temp] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let cgroup_v2 = make_cgroup(true);
    let cgroup_v1 = make_cgroup(false);
    let counts = [mounts, host_mounts + 1, 2 * mounts, 4 * mounts];
    let zygotes: Vec<Result<Zygote, String>> = counts
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let scratch = scratch.with_extension(i.to_string());
            std::fs::create_dir_all(&scratch).unwrap();
            Zygote::start(&Config {
                mounts: count,
                scratch,
                bind_source: bind_source.clone(),
                writable: [bench.session_dir().to_path_buf(), temp.clone()],
                cgroup_v2: cgroup_v2.0.clone().ok(),
                cgroup_v1: cgroup_v1.0.clone().ok(),
            })
        })
        .collect();
    let main_z = match &zygotes[0] {
        Ok(z) => z,
        Err(e) => {
            rows.push(Row::unavailable(CASE, "the Z-like process", e));
            return rows;
        }
    };
    let n = main_z.mounts;
    let landlock = if main_z.landlock_abi > 0 {
        format!("Landlock ABI {}", main_z.landlock_abi)
    } else {
        "no Landlock".to_string()
    };
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    rows.push(Row {
        case: CASE.into(),
        metric: format!(
            "setup: measured as {who}, Linux {}; host {host_mounts} mounts; {mount_source}; {landlock}; {}; {}",
            kernel.trim(),
            cgroup_v2.0.as_ref().map_or_else(|e| e.clone(), |d| format!("cgroup v2 {}", d.display())),
            cgroup_v1.0.as_ref().map_or_else(|e| e.clone(), |d| format!("cgroup v1 {}", d.display())),
        ),
        median: "-".into(),
        baseline: format!("{iterations} iterations, raw spawn before each row"),
        ratio: "-".into(),
        target: "(context)".into(),
        met: None,
    });

    let b = flag::PID_NS | flag::MNT_NS;
    let c = b | flag::PROC | flag::SHM;
    let z_work = |zygote: usize, flags: u32| Work::Floor { zygote, flags };
    let mut variants = vec![
        Variant::new(
            format!("(a) fork + exec `bash -c true` from a Z-like process (user, mount [{n} mounts], UTS, IPC namespaces made once)"),
            z_work(0, 0),
            Against::Raw,
        ),
        Variant::new("(a) + an own PID namespace and its PID 1 (no mount copy)", z_work(0, flag::PID_NS), Against::Row(0)),
        Variant::new(format!("(a) + an own copy of the {n} mounts (no PID namespace)"), z_work(0, flag::MNT_NS), Against::Row(0)),
        Variant::new(
            format!("(b) + `unshare(CLONE_NEWPID|CLONE_NEWNS)` per command: own PID namespace, own copy of the {n} mounts; PID 1 forks bash"),
            z_work(0, b),
            Against::Row(0),
        ),
    ];
    for (i, label) in [
        (1, "the host's mounts only"),
        (2, "2× acp-bash's"),
        (3, "4× acp-bash's"),
    ] {
        match &zygotes[i] {
            Ok(z) => variants.push(Variant::new(
                format!("(b) with Z at {} mounts ({label})", z.mounts),
                z_work(i, b),
                Against::Row(3),
            )),
            Err(e) => variants.push(Variant::unavailable(
                format!("(b) with Z at {} mounts", counts[i]),
                e.clone(),
            )),
        }
    }
    let b_rows = [4usize, 3, 5, 6]; // by mount count
    variants.push(Variant::new(
        "(b) + `mount --make-rprivate /` in the copy (acp-bash's W does it)",
        z_work(0, b | flag::RPRIVATE),
        Against::Row(3),
    ));
    variants.push(Variant::new(
        "(c) + a fresh /proc, mounted by PID 1",
        z_work(0, b | flag::PROC),
        Against::Row(3),
    ));
    variants.push(Variant::new(
        "(c) + a fresh tmpfs on /dev/shm, mounted by W (acp-bash's per-command refresh)",
        z_work(0, c),
        Against::Row(8),
    ));
    let c_row = 9;
    let cgroup_row = |label: &str, dir: &CgroupDir, flags: u32| match &dir.0 {
        Ok(_) => Variant::new(label, z_work(0, flags), Against::Row(c_row)),
        Err(e) => Variant::unavailable(label, e.clone()),
    };
    variants.push(cgroup_row(
        "(d) + a cgroup join: W writes 0 to a child cgroup's v2 `cgroup.procs`",
        &cgroup_v2,
        c | flag::CGROUP_V2_PROCS,
    ));
    variants.push(cgroup_row(
        "(d) + a cgroup join: W writes 0 to a child cgroup's v1 pids `tasks` (acp-bash's way)",
        &cgroup_v1,
        c | flag::CGROUP_V1_TASKS,
    ));
    variants.push(cgroup_row("(d) + a cgroup v2 child cgroup by `clone3(CLONE_INTO_CGROUP)` for W (born inside, no join)", &cgroup_v2, c | flag::INTO_CGROUP));
    // (e) on the join acp-bash makes where it can (v1 tasks), else the cheapest v2 one.
    let (cgroup_flag, cgroup_base, cgroup_said) = if cgroup_v1.0.is_ok() {
        (flag::CGROUP_V1_TASKS, 11, "the v1 `tasks` join")
    } else if cgroup_v2.0.is_ok() {
        (flag::INTO_CGROUP, 12, "clone3 into a v2 cgroup")
    } else {
        (0, c_row, "no cgroup (none writable)")
    };
    let with_session = c | cgroup_flag | flag::SETSID;
    variants.push(Variant::new(
        format!("(e1) + `setsid` in W (acp-bash's W does it; on {cgroup_said})"),
        z_work(0, with_session),
        Against::Row(cgroup_base),
    ));
    let session_row = variants.len() - 1;
    let e = with_session | flag::CONFINE;
    let caps = if euid == 0 {
        ", the capability bounding set dropped to 5 (root)"
    } else {
        ""
    };
    variants.push(Variant::new(
        format!("(e) + in B: a new session keyring, NO_NEW_PRIVS, Landlock restrict_self, a seccomp filter{caps}"),
        z_work(0, e),
        Against::Row(session_row),
    ));
    let e_row = variants.len() - 1;
    variants.push(Variant::new(
        "(e) with `setpgid(0, 0)` instead of `setsid` in W (Z has its own session, no terminal)",
        z_work(0, (e & !flag::SETSID) | flag::SETPGID),
        Against::Row(e_row),
    ));
    // The same guarantees with PID 1 started by Z itself: no W. With a cgroup: clone3 into a
    // v2 one where there is one, else I joins through v1 `tasks`.
    let merged_cgroup = if cgroup_v2.0.is_ok() {
        flag::INTO_CGROUP
    } else {
        cgroup_flag
    };
    let merged = (e & !cgroup_flag) | merged_cgroup | flag::PID1_BY_CLONE3;
    variants.push(Variant::new(
        "(e) with PID 1 cloned by Z: `clone3(CLONE_NEWPID|CLONE_NEWNS)` (no W: a fork and an exit fewer; status sent by PID 1)",
        z_work(0, merged),
        Against::Row(e_row),
    ));
    variants.push(Variant::new(
        "(e) with PID 1 cloned by Z and `setpgid` instead of `setsid`: the cheapest shape with every guarantee",
        z_work(0, (merged & !flag::SETSID) | flag::SETPGID),
        Against::Row(e_row),
    ));
    match &real {
        Ok(_) => {
            variants.push(Variant::new(
                "acp-bash: `true` through `Session::run`, workspace, from its zygote (the engine: prelude, shell-state report, pipes)",
                Work::AcpBashZygote,
                Against::Raw,
            ));
        }
        Err(e) => variants.push(Variant::unavailable(
            "acp-bash: `true` through `Session::run`, workspace",
            e.clone(),
        )),
    }
    variants.push(Variant::new(
        "acp-bash: `sandbox::spawn` workspace, the per-command path (every namespace and the view built per command; no prelude)",
        Work::AcpBashPerCommand,
        Against::Raw,
    ));

    let roots = acp_bash::sandbox::Roots::new(bench.session_dir(), std::env::temp_dir());
    let run = |work: &Work| -> Result<(f64, f64, Option<Measured>), String> {
        match work {
            Work::Floor { zygote, flags } => {
                let z = zygotes[*zygote].as_ref().map_err(|e| e.clone())?;
                let m = z.run(*flags)?;
                Ok((m.done_ms(), m.status_ms(), Some(m)))
            }
            Work::AcpBashZygote => {
                let t = real.as_ref().map_err(|e| e.clone())?.run_true()?;
                Ok((t, t, None))
            }
            Work::AcpBashPerCommand => {
                let t = ms(raw::bash_true_confined(Mode::Workspace, &roots));
                Ok((t, t, None))
            }
        }
    };
    // Warm-up: every row a few times (and the first failure said once).
    for v in variants.iter_mut().filter(|v| v.failed.is_none()) {
        for _ in 0..5 {
            if let Err(e) = run(&v.work) {
                v.failed = Some(e);
                break;
            }
        }
    }
    for _ in 0..iterations {
        let mut took: Vec<Option<(f64, f64)>> = Vec::with_capacity(variants.len());
        for v in variants.iter_mut() {
            if v.failed.is_some() {
                took.push(None);
                continue;
            }
            let before = children_usage();
            let raw_ms = ms(raw::bash_to_devnull("true"));
            let raw_usage = children_usage();
            match run(&v.work) {
                Ok((done, status, measured)) => {
                    if let Some(m) = &measured {
                        v.cpu.push(m.usage[0] as f64);
                        v.switches.push(m.usage[1] as f64);
                        v.raw_cpu
                            .push(raw_usage[0].saturating_sub(before[0]) as f64);
                        v.raw_switches
                            .push(raw_usage[1].saturating_sub(before[1]) as f64);
                    }
                    v.raw.push(raw_ms);
                    v.done.push(done - raw_ms);
                    v.status.push(status - raw_ms);
                    if let Some(m) = &measured {
                        record_segments(&mut v.segments, m);
                    }
                    took.push(Some((done, status)));
                }
                Err(e) => {
                    v.failed = Some(e);
                    took.push(None);
                }
            }
        }
        for (i, v) in variants.iter_mut().enumerate() {
            if let (Against::Row(base), Some((done, status))) = (v.against, took[i]) {
                if let Some(Some((base_done, base_status))) = took.get(base) {
                    v.own_done.push(done - base_done);
                    v.own_status.push(status - base_status);
                }
            }
        }
    }
    bench.clean_engine_logs();

    for (i, v) in variants.iter().enumerate() {
        if let Some(why) = &v.failed {
            rows.push(Row::unavailable(CASE, &v.label, why));
            continue;
        }
        if v.done.is_empty() {
            continue;
        }
        let step = match v.against {
            Against::Raw => "vs raw".to_string(),
            Against::Row(base) if v.own_done.is_empty() => format!("vs row {base}: -"),
            Against::Row(base) => format!(
                "this step vs row {base}: {:+.2} ms (status: {:+.2})",
                median(&v.own_done),
                median(&v.own_status)
            ),
        };
        rows.push(Row {
            case: CASE.into(),
            metric: format!("{i}: {}", v.label),
            median: format!("paired Δ {:+.2} ms until all gone", median(&v.done)),
            baseline: format!(
                "raw `bash -c true` {}; status known at Δ {:+.2} ms{}",
                spread(&v.raw, "ms", 2),
                median(&v.status),
                if v.cpu.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; CPU of its processes {:.0} µs (raw bash {:.0}), voluntary switches {:.0} (raw {:.0})",
                        median(&v.cpu),
                        median(&v.raw_cpu),
                        median(&v.switches),
                        median(&v.raw_switches)
                    )
                }
            ),
            ratio: step,
            target: "(context)".into(),
            met: None,
        });
        if !v.segments.is_empty() {
            let parts: Vec<String> = v
                .segments
                .iter()
                .map(|(label, values)| format!("{label} {:.0}", median(values)))
                .collect();
            rows.push(Row {
                case: CASE.into(),
                metric: format!("{i}: where the time goes (median µs per step)"),
                median: parts.join(" · "),
                baseline: "-".into(),
                ratio: "-".into(),
                target: "(context)".into(),
                met: None,
            });
        }
    }
    // How the mount copy and its teardown scale with the view.
    let scaled: Vec<(f64, f64, f64)> = b_rows
        .iter()
        .filter_map(|&row| {
            let v = variants.get(row)?;
            let Work::Floor { zygote, .. } = v.work else {
                return None;
            };
            let mounts = zygotes[zygote].as_ref().ok()?.mounts as f64;
            Some((
                mounts,
                segment_median(v, "unshare")?,
                segment_median(v, "W's _exit → Z's wait returns")?,
            ))
        })
        .collect();
    if !scaled.is_empty() {
        let copy: Vec<(f64, f64)> = scaled.iter().map(|&(m, c, _)| (m, c)).collect();
        let teardown: Vec<(f64, f64)> = scaled.iter().map(|&(m, _, t)| (m, t)).collect();
        let points: Vec<String> = scaled
            .iter()
            .map(|(m, c, t)| format!("{m:.0} mounts: unshare {c:.0} µs, W's exit {t:.0} µs"))
            .collect();
        let line = |what: &str, f: Option<(f64, f64)>| {
            f.map_or(String::new(), |(a, b)| {
                format!("{what} ≈ {a:.0} µs + {b:.1} µs/mount")
            })
        };
        rows.push(Row {
            case: CASE.into(),
            metric: "(b) by mount count: the copy (`unshare`) and the teardown (W's `_exit` until Z's `waitpid` returns)".into(),
            median: points.join("; "),
            baseline: format!("{}; {}", line("copy", fit(&copy)), line("teardown", fit(&teardown))),
            ratio: "-".into(),
            target: "(context)".into(),
            met: None,
        });
    }
    drop(zygotes);
    drop(cgroup_v2);
    drop(cgroup_v1);
    rows
}
