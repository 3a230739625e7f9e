//! Shared helper for the sandbox tests: starts `bash -c` through the engine's own spawn path
//! (`sandbox::spawn`: own process group, stdin /dev/null, stdout+stderr on one pipe,
//! parent-death signal, the sandbox steps, only fds 0–2) with a small fixed environment.

// Elsewhere than Linux (macOS) only the portable helpers are used: the kernel sandbox's
// tests are Linux-only.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use acp_bash::sandbox::{self, Launch, Limits, Mode, Roots, Support};

// HANG_GUARD stays importable from here (new tests should wait with hang_guard()).
#[allow(unused_imports)]
pub use super::{hang_guard, HANG_GUARD};

pub fn bash() -> PathBuf {
    ["/bin/bash", "/usr/bin/bash"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("bash")
}

pub fn roots(workspace: &Path) -> Roots {
    let mut roots = Roots::new(workspace, std::env::temp_dir());
    roots.view_without_mount_setattr = WITHOUT_MOUNT_SETATTR.get();
    roots
}

/// A running confined command: the pid the engine would hold, and its output.
pub struct Running {
    pid: i32,
    pub output: mpsc::Receiver<String>,
    pub notices: Vec<String>,
}

pub fn spawn(script: &str, mode: Mode, workspace: &Path) -> Running {
    spawn_with(script, mode, workspace, Support::current())
}

/// Starts `script` confined by `mode` with `support`, or returns the error of the step that
/// failed.
pub fn try_spawn(
    script: &str,
    mode: Mode,
    workspace: &Path,
    support: &Support,
) -> std::io::Result<Running> {
    let launch = Launch::new(bash(), ["-c", script]);
    let confined =
        sandbox::confine_with(launch, mode, &roots(workspace), Limits::default(), support);
    let (read, write) = std::io::pipe().unwrap();
    let env = [
        (
            "PATH".into(),
            "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into(),
        ),
        ("HOME".into(), workspace.as_os_str().to_owned()),
    ];
    let request = sandbox::SpawnRequest::new(&env, workspace, write.as_fd());
    let pid = sandbox::spawn(&confined, &request)?;
    drop(write);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut file = read;
        let mut out = Vec::new();
        let _ = file.read_to_end(&mut out);
        let _ = tx.send(String::from_utf8_lossy(&out).into_owned());
    });
    Ok(Running {
        pid,
        output: rx,
        notices: confined.notices,
    })
}

pub fn spawn_with(script: &str, mode: Mode, workspace: &Path, support: &Support) -> Running {
    try_spawn(script, mode, workspace, support).expect("spawn")
}

/// The engine's wait for grandchildren holding the output pipe after the shell exits.
pub const PIPE_GRACE: Duration = Duration::from_secs(1);

impl Running {
    /// Ends the run the way the engine does: wait for the shell, read until the pipe closes
    /// (at most [`PIPE_GRACE`] after the shell exited), then SIGKILL the process group.
    pub fn finish(self) -> (ExitStatus, String) {
        self.finish_with(true)
    }

    /// [`Running::finish`] without the final SIGKILL of the group (an embedder that skips it,
    /// or an agent that died right after the shell exited).
    pub fn finish_without_group_kill(self) -> (ExitStatus, String) {
        self.finish_with(false)
    }

    fn finish_with(self, group_kill: bool) -> (ExitStatus, String) {
        let status = wait_guarded(self.pid);
        let early = self.output.recv_timeout(PIPE_GRACE).ok();
        if group_kill {
            self.signal_group(libc::SIGKILL);
        }
        let output = match early {
            Some(output) => output,
            None => self
                .output
                .recv_timeout(hang_guard())
                .expect("the output pipe never closed"),
        };
        (status, output)
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Signals the process group, as the engine does on timeout and cancel.
    pub fn signal_group(&self, sig: i32) {
        unsafe { libc::kill(-self.pid(), sig) };
    }
}

/// Waits for `pid` (our child) to end; kills its group and panics after [`hang_guard()`]. The
/// wait is for the event itself: a pidfd that becomes readable when the child exits (polling
/// `waitpid` only where the kernel has no pidfds).
pub fn wait_guarded(pid: i32) -> ExitStatus {
    // SAFETY: pidfd_open on our own child; the fd is ours and closed by `OwnedFd`.
    #[cfg(target_os = "linux")]
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    #[cfg(not(target_os = "linux"))]
    let pidfd: libc::c_long = -1;
    if pidfd >= 0 {
        let pidfd =
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd as i32) };
        let mut poll = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&pidfd),
            events: libc::POLLIN,
            revents: 0,
        };
        let deadline = Instant::now() + hang_guard();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // SAFETY: one pollfd on the stack.
            let ready = unsafe { libc::poll(&mut poll, 1, left.as_millis() as libc::c_int) };
            if ready > 0 {
                break;
            }
            let error = std::io::Error::last_os_error();
            if ready == 0 {
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                panic!("command hung");
            }
            assert_eq!(
                error.kind(),
                std::io::ErrorKind::Interrupted,
                "poll: {error}"
            );
        }
        let mut status = 0;
        loop {
            // SAFETY: reaping our own child, which has exited.
            let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
            if reaped == pid {
                return ExitStatus::from_raw(status);
            }
            let error = std::io::Error::last_os_error();
            assert_eq!(
                error.kind(),
                std::io::ErrorKind::Interrupted,
                "waitpid: {error}"
            );
        }
    }
    let start = Instant::now();
    loop {
        let mut status = 0;
        let reaped = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if reaped == pid {
            return ExitStatus::from_raw(status);
        }
        assert!(reaped == 0, "waitpid: {}", std::io::Error::last_os_error());
        if start.elapsed() > hang_guard() {
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            panic!("command hung");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits (hang guard only) until `sig` sent to `pid` has left its pending sets (`SigPnd`,
/// `ShdPnd` in `/proc/PID/status`): the process took it, so the same signal sent next is a
/// second one and not merged into the first.
pub fn wait_until_delivered(pid: i32, sig: i32) {
    let bit = 1u64 << (sig - 1);
    let pending = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status.lines().any(|line| {
            ["SigPnd:", "ShdPnd:"].iter().any(|field| {
                line.strip_prefix(field)
                    .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
                    .is_some_and(|mask| mask & bit != 0)
            })
        })
    };
    let start = Instant::now();
    while pending() {
        assert!(
            start.elapsed() < hang_guard(),
            "{pid} never took signal {sig}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits (hang guard only) until `path` exists with a complete last line.
pub fn wait_for_file(path: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text;
            }
        }
        assert!(
            start.elapsed() < hang_guard(),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Outer pids of live processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

/// Waits (hang guard only) until no live process carries `marker`.
pub fn wait_until_gone(marker: &str) {
    let start = Instant::now();
    while !processes_with(marker).is_empty() {
        assert!(
            start.elapsed() < hang_guard(),
            "escapees survive: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A unique marker for leftover-process checks.
pub fn marker(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    // The closing `z`: marker 1 must not be a prefix of marker 10.
    format!(
        "acpbash-{tag}-{}-{}z",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Bash lines that start three escapees tagged with `mark` (through `setsid`, a double fork and
/// `nohup … &`) and wait until all three run. The marker is assembled at run time so the
/// script's own command line doesn't hold it.
///
/// Ready means each escapee has made its last exec (its argv[0] starts with the marker): before
/// that, a launcher's command line holds the marker too, and a cmdline read during an exec can
/// come back empty, so a count taken then would be off.
pub fn start_escapees(mark: &str) -> String {
    let (head, rest) = mark.split_at(4);
    format!(
        r#"P={head}; P="${{P}}{rest}"
setsid bash -c "exec -a $P-setsid sleep 1000" &
( ( exec -a "$P-double" sleep 1000 ) & )
nohup bash -c "exec -a $P-nohup sleep 1000" >/dev/null 2>&1 &
until [ "$(grep -l "^$P-[sdn][eoo]" /proc/[0-9]*/cmdline 2>/dev/null | wc -l)" -ge 3 ]; do sleep 0.01; done
"#
    )
}

/// Whether this machine gives commands their namespaces; when not, says why on stderr (the
/// caller then skips its test). The one place sandbox tests decide to skip.
#[cfg(target_os = "linux")]
pub fn require_namespaces() -> bool {
    crate::support::skip::skip_unless(
        "PID + mount namespaces",
        Support::current().namespaces.clone(),
    )
}

/// Elsewhere (macOS) there are no namespaces: the test is skipped, and says so.
#[cfg(not(target_os = "linux"))]
pub fn require_namespaces() -> bool {
    crate::support::skip::skip_unless(
        "PID + mount namespaces",
        Err("Linux only: this platform has no PID namespace"),
    )
}

/// Set in the environment of a test binary re-run as an ordinary user by [`as_root_and_nobody`].
const AS_NOBODY: &str = "ACP_BASH_TEST_AS_NOBODY";

/// Whether this process is the ordinary-user half of [`as_root_and_nobody`].
pub fn running_as_nobody() -> bool {
    std::env::var_os(AS_NOBODY).is_some()
}

/// Runs `body` as this process's user; when that is root, runs the test named `test` (its full
/// path, e.g. `sandbox::hostile::mknod_fails`) once more in a copy of this test binary started as
/// `nobody` through `setpriv`, so every escape test holds for a root agent and for an ordinary
/// one. The copy's failure fails this test, with its output.
///
/// `ACPBASH_ONLY_AS_ROOT=1` leaves the copy out: the platform lab sets it where the ordinary user
/// is a setting of its own (a desktop user with a session, uid 1000 in a container), so that
/// under QEMU's TCG the same tests do not run twice as root (scripts/lab/guest/suite.sh).
pub fn as_root_and_nobody(test: &str, body: impl FnOnce()) {
    body();
    // setpriv is Linux's (util-linux); elsewhere the test runs once, as this user.
    if running_as_nobody() || unsafe { libc::geteuid() } != 0 || !cfg!(target_os = "linux") {
        return;
    }
    if std::env::var_os("ACPBASH_ONLY_AS_ROOT").is_some_and(|v| v == "1") {
        return;
    }
    let Ok(setpriv) = which("setpriv") else {
        panic!("setpriv (util-linux) is needed to run {test} as an ordinary user too");
    };
    let copies = copies_for_nobody();
    let output = Command::new(setpriv)
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--",
        ])
        .arg(&copies.test_binary)
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(AS_NOBODY, "1")
        .env(AGENT_BINARY, &copies.agent_binary)
        .env(SCHEMA_COPY, &copies.schema)
        .env("HOME", "/nonexistent")
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .expect("run the test binary as nobody");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && text.contains("1 passed"),
        "{test} as nobody ({}):\n{text}",
        output.status
    );
    for skipped in text.lines().filter_map(|l| l.strip_prefix("skipping ")) {
        crate::support::skip::record(&format!("{skipped} (as nobody)"));
    }
}

/// Set in the ordinary-user half's environment: the copy of the built `acp-bash` it starts (see
/// [`crate::support::acp::binary`]); set by hand, the binary every test starts instead of the
/// built one (the platform lab's release build).
pub const AGENT_BINARY: &str = "ACP_BASH_TEST_AGENT_BINARY";
/// Set in the ordinary-user half's environment: the copy of the vendored ACP schema.
pub const SCHEMA_COPY: &str = "ACP_BASH_TEST_SCHEMA";

/// The copy of the built `acp-bash` that `nobody` can reach (for tests that start the agent as
/// `nobody` themselves).
pub fn agent_binary_for_nobody() -> PathBuf {
    copies_for_nobody().agent_binary.clone()
}

/// What the ordinary-user half runs, where `nobody` can reach it.
struct Copies {
    test_binary: PathBuf,
    agent_binary: PathBuf,
    schema: PathBuf,
}

/// The test binary, the built `acp-bash` and the vendored ACP schema, linked (or copied) once per process into a
/// directory `nobody` may enter: the clone itself may sit under a 0700 directory (root's home),
/// where `nobody` cannot reach `target/`. Removed with the process's other leftovers by the
/// next run (a folder per pid, cleared when that pid is gone).
fn copies_for_nobody() -> &'static Copies {
    static COPIES: std::sync::OnceLock<Copies> = std::sync::OnceLock::new();
    COPIES.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir();
        for entry in std::fs::read_dir(&base).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("acpbash-nobody-bin-") {
                if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = base.join(format!("acpbash-nobody-bin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("a folder for the ordinary user's copies");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let place = |from: &Path, name: &str| {
            let to = dir.join(name);
            if std::fs::hard_link(from, &to).is_err() {
                // A copy keeps the mode (0755 for the binaries, 0644 for the schema).
                std::fs::copy(from, &to).expect("copy a file for the ordinary user");
            }
            to
        };
        let exe = std::env::current_exe().expect("the test binary's path");
        // The v2 schema goes beside the v1 one: `schema_v2` reads it from there.
        let v1_schema = crate::support::schema::schema_path();
        place(
            &v1_schema.with_file_name("acp-schema.v2.json"),
            "acp-schema.v2.json",
        );
        Copies {
            test_binary: place(&exe, "it"),
            // The binary under test: the built one, or the one ACP_BASH_TEST_AGENT_BINARY names
            // (the platform lab serves the release build).
            agent_binary: place(&crate::support::acp::binary(), "acp-bash"),
            schema: place(&crate::support::schema::schema_path(), "acp-schema.v1.json"),
        }
    })
}

fn which(name: &str) -> Result<PathBuf, ()> {
    ["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.exists())
        .ok_or(())
}

/// The session folders (`session-*`) under a session temp root, without the agents' lock files
/// (`agent-<pid>.lock`) that sit beside them while an agent lives.
pub fn session_folders(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("session-"))
        })
        .collect()
}

thread_local! {
    /// See [`both_view_ways`].
    static WITHOUT_MOUNT_SETATTR: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `body` once for each way the view is built: with `mount_setattr` (where this kernel
/// has it: Linux 5.12), and the classic way of kernels without it (Linux 5.10, 5.11: a
/// `mount(MS_REMOUNT | MS_BIND)` per mount point), forced here by the engine's test-only
/// option. Engines made through [`view_way`] and roots made by [`roots`] on this thread
/// follow it. Where the kernel lacks `mount_setattr` both runs are the classic way.
pub fn both_view_ways(body: impl Fn()) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            WITHOUT_MOUNT_SETATTR.set(false);
        }
    }
    let _reset = Reset;
    for classic in [false, true] {
        eprintln!(
            "[the view built {}]",
            if classic {
                "without mount_setattr (a remount per mount point, as on Linux 5.10)"
            } else {
                "with mount_setattr where the kernel has it"
            }
        );
        WITHOUT_MOUNT_SETATTR.set(classic);
        body();
    }
}

/// `output` without the engine's notices (`[acp-bash: …]` lines: what a mode does not enforce
/// on this kernel, said at a session's first command), for tests that check what a command
/// printed: on a kernel without Landlock or overlayfs in a user namespace (Linux 5.10) they
/// say so, and the command's own output is the same.
pub fn without_notices(output: &str) -> String {
    output
        .split_inclusive('\n')
        .filter(|line| !line.starts_with("[acp-bash: "))
        .collect()
}

/// [`as_root_and_nobody`], [`both_view_ways`] in each.
pub fn as_root_and_nobody_both_views(test: &str, body: impl Fn()) {
    as_root_and_nobody(test, || both_view_ways(body));
}

/// `config` building the view the way [`both_view_ways`] runs now on this thread.
pub fn view_way(config: acp_bash::exec::EngineConfig) -> acp_bash::exec::EngineConfig {
    config.view_without_mount_setattr(WITHOUT_MOUNT_SETATTR.get())
}

/// Four processes of 30 MiB each, every one under a 64 MiB per-process limit, 120 MiB together.
/// A poller prints `HELD 4` when all four hold their memory at once; `wait -n` ends the script
/// at that or when a tail is killed (each tail's end is printed as `tail N ended: STATUS`).
pub const MEMORY_HOGS: &str = r#"for i in 1 2 3 4; do
  ( tail -c 30M < <(head -c 30M /dev/zero; exec sleep 1000) >/dev/null; echo "tail $i ended: $?" ) &
done
(
  while :; do
    held=0
    for s in /proc/[0-9]*/status; do
      { grep -q '^Name:.tail$' "$s" && awk '/^VmRSS/ { exit !($2 >= 30000) }' "$s"; } 2>/dev/null && held=$((held + 1))
    done
    [ "$held" -ge 4 ] && { echo "HELD 4"; exit; }
  done
) &
wait -n"#;
