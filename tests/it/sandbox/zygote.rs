//! The per-session zygote (`src/sandbox/linux/zygote.rs`): a session's workspace and read-only
//! commands are forks of one process that holds the session's user, mount, UTS and IPC
//! namespaces and its built view; each command gets its own PID namespace and its own copy of
//! the mount namespace. Hostile checks that nothing one command does reaches the next one or Z,
//! through the library (`EngineConfig::zygote_program`) and through the built binary
//! (`acp-bash serve` over pipes), as root and as an ordinary user; and how Z ends (with its
//! session, with its agent, on SIGKILL of the agent).
#![cfg(target_os = "linux")]

use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use acp_bash::exec::{EngineConfig, Exit, Session};
use acp_bash::sandbox::Mode;

use super::view::{block_on, dir, engine, require_view};
use crate::support::acp::{binary, json_lines};
use crate::support::engine::{hang_guard, run};
use crate::support::sandbox::{
    as_root_and_nobody, marker, processes_with, start_escapees, wait_until_gone,
};

fn root() -> bool {
    // SAFETY: plain getter.
    unsafe { libc::geteuid() == 0 }
}

/// A session whose zygote is the built binary.
/// The tests of this file, one at a time. One of them makes a socket right in the host's `/run`
/// (as root), which every workspace and read-only view masks: a zygote planned while it is
/// there is not the one planned after, so a test running meanwhile that checks its commands
/// keep one zygote would see a second one. Held across both halves of `as_root_and_nobody`.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn session(home: &Path, ws: &Path, mode: Mode) -> Session {
    let engine = engine(home, EngineConfig::default().zygote_program(Some(binary())));
    let session = engine.session(ws).unwrap();
    session.set_mode(mode);
    session
}

fn run_ok(session: &Session, script: &str) -> String {
    let outcome = block_on(run(session, script));
    assert_eq!(
        outcome.status.exit,
        Exit::Code(0),
        "{script}: {}",
        outcome.output
    );
    outcome.output
}

/// The value after `name=` in `output`.
fn field<'a>(output: &'a str, name: &str) -> &'a str {
    output
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in {output}"))
}

/// Whether `pid` is gone (no process, or only its zombie).
fn pid_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z')),
    }
}

/// Waits (hang guard only) until every pid of `pids` is gone.
fn wait_until_pids_gone(pids: &[i32], what: &str) {
    let start = Instant::now();
    while !pids.iter().all(|&pid| pid_gone(pid)) {
        assert!(
            start.elapsed() < hang_guard(),
            "{what} still runs: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

const NS: &str =
    "for n in user mnt pid uts ipc net; do echo \"$n=$(readlink /proc/self/ns/$n)\"; done";

/// Bash lines that start a `sleep` tagged with `mark` (it has the command's namespaces) and
/// wait until `go` exists. The marker is assembled at run time, so only that `sleep` carries it.
fn hold(mark: &str, go: &Path) -> String {
    let (head, rest) = mark.split_at(4);
    format!(
        r#"P={head}; P="${{P}}{rest}"; ( exec -a "$P" sleep 1000 ) &
until [ -e {go} ]; do sleep 0.01; done"#,
        go = go.display()
    )
}

/// Waits for the process tagged `mark` (see [`hold`]), opens its namespaces and keeps them,
/// then creates `go`. A namespace's number is reused once it is gone: only namespaces held
/// alive can be told apart from the next command's by number.
fn keep_namespaces(mark: &str, go: &Path) -> Vec<std::fs::File> {
    let start = Instant::now();
    let pid = loop {
        if let Some(&pid) = processes_with(mark).first() {
            break pid;
        }
        assert!(start.elapsed() < hang_guard(), "{mark} never ran");
        std::thread::sleep(Duration::from_millis(5));
    };
    let held = ["user", "mnt", "pid"]
        .map(|name| std::fs::File::open(format!("/proc/{pid}/ns/{name}")).unwrap())
        .into();
    std::fs::write(go, "go\n").unwrap();
    held
}

fn host_ns(name: &str) -> String {
    std::fs::read_link(format!("/proc/self/ns/{name}"))
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_sessions_commands_share_its_zygotes_user_namespace_and_each_get_their_own_mounts_and_pids() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::a_sessions_commands_share_its_zygotes_user_namespace_and_each_get_their_own_mounts_and_pids",
        || {
            if !require_view() {
                return;
            }
            let (home, ws) = (dir("zyg-home"), dir("zyg-ws"));
            let session = session(home.path(), ws.path(), Mode::Workspace);
            let mut zygotes = Vec::new();
            for mode in [Mode::Workspace, Mode::ReadOnly] {
                session.set_mode(mode);
                let (mark, go) = (marker("zyg-ns"), ws.path().join(format!("go-{mode}")));
                let script = format!("{NS}; {}", hold(&mark, &go));
                let (first, _held) = block_on(async {
                    let keep = tokio::task::spawn_blocking(move || keep_namespaces(&mark, &go));
                    let (first, held) = tokio::join!(run(&session, &script), keep);
                    (first.output, held.unwrap())
                });
                let second = run_ok(&session, NS);
                for name in ["user", "uts", "ipc", "net"] {
                    assert_eq!(field(&first, name), field(&second, name), "{mode} {name}");
                }
                for name in ["mnt", "pid"] {
                    assert_ne!(field(&first, name), field(&second, name), "{mode} {name}");
                }
                for name in ["user", "mnt", "pid", "uts", "ipc"] {
                    assert_ne!(field(&first, name), host_ns(name), "{mode} {name}");
                }
                let pids = session.zygote_pids();
                let zygote = *pids.last().expect("a zygote for the session");
                assert!(!zygotes.contains(&zygote), "{mode}: one zygote per mode");
                zygotes.push(zygote);
                assert_eq!(pids.len(), zygotes.len(), "{pids:?}");
                if root() {
                    // Z holds exactly the user namespace its commands run in, and a mount
                    // namespace none of them shares.
                    let ns = |name: &str| {
                        std::fs::read_link(format!("/proc/{zygote}/ns/{name}"))
                            .unwrap()
                            .to_string_lossy()
                            .into_owned()
                    };
                    assert_eq!(ns("user"), field(&first, "user"));
                    assert_ne!(ns("mnt"), field(&first, "mnt"));
                    assert_ne!(ns("mnt"), field(&second, "mnt"));
                    assert_eq!(ns("pid"), host_ns("pid"));
                }
            }
            // Closing the session ends its zygotes.
            drop(session);
            wait_until_pids_gone(&zygotes, "a closed session's zygote");
        },
    );
}

#[test]
fn nothing_a_command_does_reaches_the_next_command_of_its_session_or_the_zygote() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::nothing_a_command_does_reaches_the_next_command_of_its_session_or_the_zygote",
        || {
            if !require_view() {
                return;
            }
            let (home, ws) = (dir("zyg-home"), dir("zyg-ws"));
            let session = session(home.path(), ws.path(), Mode::Workspace);
            for mode in [Mode::Workspace, Mode::ReadOnly] {
                session.set_mode(mode);
                let key = marker("zyg-key");
                let state = format!(
                    "echo fds=$(ls /proc/self/fd | sort -n | tr '\\n' ' '); \
                     echo nofile=$(ulimit -n); echo vmem=$(ulimit -v); \
                     echo mounts=$(awk '{{print $5}}' /proc/self/mountinfo | sort | md5sum); \
                     echo keys=$(grep -c {key} /proc/keys)"
                );
                let state = state.as_str();
                let before = run_ok(&session, state);
                let zygote = *session.zygote_pids().last().unwrap();
                let mark = marker("zygote-bg");
                let hostile = format!(
                    "{escapees}
                     mkdir -p /tmp/m
                     mount -t tmpfs none /tmp/m 2>/dev/null && echo MOUNTED-TMPFS
                     mount --bind / /tmp/m 2>/dev/null && echo MOUNTED-BIND
                     mount -o remount,rw / 2>/dev/null && echo REMOUNTED
                     unshare -rm sh -c 'mount -t tmpfs none /mnt && echo NESTED-MOUNT' 2>/dev/null
                     ulimit -n 10; ulimit -v 500000
                     exec 7>/tmp/seven 8<&0 9>&1
                     perl -e 'syscall(248, \"user\", \"{key}\", \"v\", 1, -3) > 0 and print \"ADDED-KEY\\n\"'
                     cat /proc/{zygote}/environ >/dev/null 2>&1 && echo READ-ENVIRON
                     cat /proc/{zygote}/mem >/dev/null 2>&1 && echo READ-MEM
                     echo x 2>/dev/null > /proc/{zygote}/mem && echo WROTE-MEM
                     kill -0 {zygote} 2>/dev/null && echo SIGNALLED
                     kill -0 -1 2>/dev/null; ls /proc | grep -qx {zygote} && echo SEES-ZYGOTE
                     timeout 10 strace -p {zygote} -o /dev/null 2>/dev/null && echo TRACED
                     true",
                    escapees = start_escapees(&mark)
                );
                let output = run_ok(&session, &hostile);
                for reached in [
                    "READ-ENVIRON",
                    "READ-MEM",
                    "WROTE-MEM",
                    "SIGNALLED",
                    "SEES-ZYGOTE",
                    "TRACED",
                ] {
                    assert!(!output.contains(reached), "{mode}: {reached}: {output}");
                }
                // Its background processes ended with it.
                wait_until_gone(&mark);
                let after = run_ok(&session, state);
                for name in ["fds", "nofile", "vmem", "mounts"] {
                    assert_eq!(
                        field(&before, name),
                        field(&after, name),
                        "{mode}: {name} leaked into the next command (the hostile one said {output})"
                    );
                }
                // A key the hostile command added (where seccomp let it) is not in the next
                // command's keyring: each has a fresh one of its own.
                assert_eq!(field(&after, "keys"), "0", "{mode}: {output}");
                assert_eq!(session.zygote_pids().last(), Some(&zygote), "{mode}: Z survived");
            }
            // Z's environment holds nothing of the agent's, and outside the sandbox only root
            // can read Z's files at all (it is not dumpable).
            let zygote = *session.zygote_pids().first().unwrap();
            match std::fs::read(format!("/proc/{zygote}/environ")) {
                Ok(environ) => {
                    assert!(root(), "an ordinary user read a zygote's environ");
                    assert!(environ.is_empty(), "{}", String::from_utf8_lossy(&environ));
                }
                Err(error) => {
                    assert!(!root(), "{error}");
                    assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied, "{error}");
                }
            }
        },
    );
}

/// `acp-bash serve` over pipes, spoken to line by line.
struct Served {
    agent: Child,
    stdin: Option<ChildStdin>,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
    next: u64,
    /// What came before the last answer.
    seen: Vec<serde_json::Value>,
}

impl Served {
    fn start(mode: &str) -> Served {
        Served::start_with(mode, |_| {})
    }

    /// [`Served::start`], with `configure` applied to the agent's command first.
    fn start_with(mode: &str, configure: impl FnOnce(&mut Command)) -> Served {
        let mut command = Command::new(binary());
        command
            .args(["--sandbox", mode, "serve", "--no-history"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        configure(&mut command);
        let mut agent = command.spawn().unwrap();
        let stdin = agent.stdin.take().unwrap();
        let stdout = agent.stdout.take().unwrap();
        let lines = json_lines(stdout);
        let mut served = Served {
            agent,
            stdin: Some(stdin),
            lines,
            next: 1,
            seen: Vec::new(),
        };
        served.request(
            "initialize",
            serde_json::json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        served
    }

    fn send(&mut self, method: &str, params: serde_json::Value) -> u64 {
        let id = self.next;
        self.next += 1;
        let line =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().expect("the agent's stdin is open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        id
    }

    fn answer(&mut self, id: u64) -> serde_json::Value {
        let mut seen = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(hang_guard())
                .expect("the agent answered");
            if line["id"] == id && line.get("method").is_none() {
                self.seen = seen;
                return line;
            }
            seen.push(line);
        }
    }

    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.send(method, params);
        self.answer(id)
    }

    fn new_session(&mut self, cwd: &Path) -> serde_json::Value {
        self.request(
            "session/new",
            serde_json::json!({"cwd": cwd, "mcpServers": []}),
        )["result"]["sessionId"]
            .clone()
    }

    fn start_prompt(&mut self, session: &serde_json::Value, text: &str) -> u64 {
        self.send(
            "session/prompt",
            serde_json::json!({"sessionId": session,
                               "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// Runs `text` as a prompt; returns the output the final update shows.
    fn prompt(&mut self, session: &serde_json::Value, text: &str) -> String {
        let id = self.start_prompt(session, text);
        let answer = self.answer(id);
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        self.seen
            .iter()
            .rev()
            .map(|line| &line["params"]["update"])
            .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
            .and_then(|u| u["content"][0]["content"]["text"].as_str())
            .unwrap_or_else(|| panic!("no final output: {:?}", self.seen))
            .to_string()
    }

    /// Starts a prompt whose command starts three escapees and then runs on in the foreground,
    /// all tagged `mark`; returns once all four run (the foreground one has written `ready`
    /// just before its exec). The prompt's id.
    fn start_running_command(
        &mut self,
        session: &serde_json::Value,
        mark: &str,
        ready: &Path,
    ) -> u64 {
        let id = self.start_prompt(
            session,
            &format!(
                "{}echo > {}; exec -a \"$P\"-fg sleep 1000",
                start_escapees(mark),
                ready.display()
            ),
        );
        crate::support::sandbox::wait_for_file(ready);
        // A poll on the condition; the deadline is only a hang guard.
        let start = Instant::now();
        while processes_with(mark).len() < 4 {
            assert!(start.elapsed() < hang_guard(), "{:?}", processes_with(mark));
            std::thread::sleep(Duration::from_millis(5));
        }
        id
    }

    /// The agent's children that are zygotes.
    fn zygotes(&self) -> Vec<i32> {
        zygotes_of(self.agent.id() as i32)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.agent.kill();
        let _ = self.agent.wait();
    }
}

/// The live children of `agent` that run as a zygote.
fn zygotes_of(agent: i32) -> Vec<i32> {
    children_of(agent)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .unwrap_or_default()
                .starts_with(b"__acp-bash-sandbox-zygote\0")
        })
        .collect()
}

fn served_workspace() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = dir("zyg-served");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

fn read_out(ws: &Path, name: &str) -> String {
    std::fs::read_to_string(ws.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn a_served_sessions_commands_leak_nothing_into_the_next_and_its_zygote_ends_with_it() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::a_served_sessions_commands_leak_nothing_into_the_next_and_its_zygote_ends_with_it",
        || {
            if !require_view() {
                return;
            }
            for mode in ["workspace", "read-only"] {
                let ws = served_workspace();
                let mut served = Served::start(mode);
                let session = served.new_session(ws.path());
                let state = "echo fds=$(ls /proc/self/fd | sort -n | tr '\\n' ' '); \
                             echo nofile=$(ulimit -n); echo vmem=$(ulimit -v); \
                             echo mounts=$(awk '{print $5}' /proc/self/mountinfo | sort | md5sum)";
                let before = served.prompt(&session, state);
                let zygotes = served.zygotes();
                assert_eq!(zygotes.len(), 1, "{mode}: {zygotes:?}");
                let zygote = zygotes[0];
                let mark = marker("served-bg");
                let hostile = served.prompt(
                    &session,
                    &format!(
                        "{escapees}
                         cat /proc/{zygote}/environ >/dev/null 2>&1 && echo READ-ENVIRON
                         kill -0 {zygote} 2>/dev/null && echo SIGNALLED
                         mount -t tmpfs none /tmp 2>/dev/null; ulimit -n 10; ulimit -v 500000
                         exec 7>/dev/null; true",
                        escapees = start_escapees(&mark)
                    ),
                );
                wait_until_gone(&mark);
                // Outputs hold the script's lines too (`$ …`): only a line of its own counts.
                for reached in ["READ-ENVIRON", "SIGNALLED"] {
                    assert!(!hostile.lines().any(|l| l == reached), "{mode}: {hostile}");
                }
                let after = served.prompt(&session, state);
                for name in ["fds", "nofile", "vmem", "mounts"] {
                    assert_eq!(field(&before, name), field(&after, name), "{mode}: {name}");
                }
                assert_eq!(served.zygotes(), vec![zygote], "{mode}");
                // Closing the agent's stdin ends it, its session and the zygote.
                drop(served.stdin.take());
                served.agent.wait().unwrap();
                wait_until_pids_gone(&[zygote], "a served session's zygote");
            }
        },
    );
}

#[test]
fn sigkill_of_a_served_agent_ends_its_zygote_and_every_command() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::sigkill_of_a_served_agent_ends_its_zygote_and_every_command",
        || {
            if !require_view() {
                return;
            }
            let ws = served_workspace();
            let mut served = Served::start("workspace");
            let first = served.new_session(ws.path());
            let second = served.new_session(ws.path());
            let mark = marker("served-kill");
            // A command of each session, each with escapees, still running when the agent dies.
            for (n, session) in [&first, &second].into_iter().enumerate() {
                let ready = ws.path().join(format!("ready{n}"));
                served.start_running_command(session, &format!("{mark}{n}"), &ready);
            }
            let zygotes = served.zygotes();
            assert_eq!(zygotes.len(), 2, "{zygotes:?}");
            // SAFETY: SIGKILL to the agent this test started.
            unsafe { libc::kill(served.agent.id() as i32, libc::SIGKILL) };
            served.agent.wait().unwrap();
            wait_until_pids_gone(&zygotes, "a killed agent's zygote");
            wait_until_gone(&mark);
        },
    );
}

/// `--sandbox off` has no zygote: the served binary forks each command on its runtime's own
/// thread (`EngineConfig::fork_bare_commands_in_place`), and the command's parent-death signal
/// still ends it with the agent. (What a bare command started off-thread does when its thread
/// ends is `exec::process`'s unit test; the escapees of an off command are not the agent's to
/// end: `sandbox::off`.)
#[test]
fn sigkill_of_a_served_off_agent_ends_its_command() {
    as_root_and_nobody(
        "sandbox::zygote::sigkill_of_a_served_off_agent_ends_its_command",
        || {
            let ws = served_workspace();
            let mut served = Served::start("off");
            let session = served.new_session(ws.path());
            let mark = marker("served-off-kill");
            served.start_prompt(&session, &format!("exec -a {mark}-fg sleep 1000"));
            let start = Instant::now();
            while processes_with(&mark).is_empty() {
                assert!(start.elapsed() < hang_guard(), "the command never ran");
                std::thread::sleep(Duration::from_millis(5));
            }
            assert!(served.zygotes().is_empty(), "{:?}", served.zygotes());
            // SAFETY: SIGKILL to the agent this test started.
            unsafe { libc::kill(served.agent.id() as i32, libc::SIGKILL) };
            served.agent.wait().unwrap();
            wait_until_gone(&mark);
        },
    );
}

/// A zygote killed while one of its commands runs takes the command with it: the command's
/// PID 1 is the zygote's child, with its parent-death signal on it (there is no W in between).
/// The prompt ends with the command killed, nothing of it is left, and the session's next
/// command runs.
#[test]
fn sigkill_of_a_zygote_ends_its_running_command_and_the_session_goes_on() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::sigkill_of_a_zygote_ends_its_running_command_and_the_session_goes_on",
        || {
            if !require_view() {
                return;
            }
            let ws = served_workspace();
            let mut served = Served::start("workspace");
            let session = served.new_session(ws.path());
            let mark = marker("zygote-kill");
            let id = served.start_running_command(&session, &mark, &ws.path().join("ready"));
            let zygotes = served.zygotes();
            assert_eq!(zygotes.len(), 1, "{zygotes:?}");
            // SAFETY: SIGKILL to the zygote of the agent this test started.
            unsafe { libc::kill(zygotes[0], libc::SIGKILL) };
            let answer = served.answer(id);
            assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
            let last = served
                .seen
                .iter()
                .rev()
                .map(|line| &line["params"]["update"])
                .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"].is_string())
                .cloned()
                .unwrap_or_default();
            assert_eq!(last["status"], "failed", "{last}");
            let text = last["content"][0]["content"]["text"].as_str().unwrap_or("");
            assert!(text.contains("killed"), "{text}");
            wait_until_gone(&mark);
            wait_until_pids_gone(&zygotes, "a killed zygote");
            let after = served.prompt(&session, "echo still-$((20 + 22))");
            assert!(after.contains("still-42"), "{after}");
        },
    );
}

/// `doctor`'s per-session row against what two commands of one served session got: in use,
/// they share one user namespace (the zygote's) and each has its own mount namespace; not in
/// use, each has its own user namespace too.
#[test]
fn doctor_says_whether_a_served_sessions_commands_come_from_one_zygote() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::doctor_says_whether_a_served_sessions_commands_come_from_one_zygote",
        || {
            if !require_view() {
                return;
            }
            let doctor = Command::new(binary()).arg("doctor").output().unwrap();
            let report = String::from_utf8_lossy(&doctor.stdout);
            let row = report
                .lines()
                .find(|l| l.starts_with("Per-session sandbox: "))
                .unwrap_or_else(|| panic!("no per-session row: {report}"));
            let in_use = row.starts_with("Per-session sandbox: in use (");
            assert!(
                in_use || row.starts_with("Per-session sandbox: not in use: "),
                "{row}"
            );
            let ws = served_workspace();
            let mut served = Served::start("workspace");
            let session = served.new_session(ws.path());
            // The first command holds its namespaces until the test has them open.
            let (mark, go) = (marker("zyg-doctor"), ws.path().join("go"));
            let one = ws.path().join("one");
            let id = served.start_prompt(
                &session,
                &format!("{{ {NS}; }} > {}; {}", one.display(), hold(&mark, &go)),
            );
            let _held = keep_namespaces(&mark, &go);
            let answer = served.answer(id);
            assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
            let two = ws.path().join("two");
            served.prompt(&session, &format!("{{ {NS}; }} > {}", two.display()));
            let (one, two) = (read_out(ws.path(), "one"), read_out(ws.path(), "two"));
            assert_ne!(field(&one, "mnt"), field(&two, "mnt"), "{row}");
            assert_eq!(
                field(&one, "user") == field(&two, "user"),
                in_use,
                "doctor: {row}\nfirst: {one}\nsecond: {two}"
            );
            assert_eq!(served.zygotes().len(), usize::from(in_use), "{row}");
        },
    );
}

/// What a shell sees of its own signals and privileges (`/proc/self/status`, read by bash
/// itself): the signal dispositions and mask, the capability sets, `no_new_privs`, seccomp.
const OWN_STATUS: &str = r#"while read -r k v; do case $k in SigBlk:|SigIgn:|SigCgt:|Cap*|NoNewPrivs:|Seccomp:|Seccomp_filters:) echo "$k$v";; esac; done < /proc/self/status"#;

/// `name`'s value in a `/proc/<pid>/status` text (`None` when the kernel has no such field).
fn status_field(status: &str, name: &str) -> Option<String> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(|value| value.trim().to_string())
}

#[test]
fn a_zygote_commands_signals_and_capabilities_are_those_of_a_command_that_built_its_own_namespaces()
{
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::a_zygote_commands_signals_and_capabilities_are_those_of_a_command_that_built_its_own_namespaces",
        || {
            if !require_view() {
                return;
            }
            let (home, ws) = (dir("zyg-sig-home"), dir("zyg-sig-ws"));
            let from_zygote = session(home.path(), ws.path(), Mode::Workspace);
            // The test binary does not serve as a zygote: this session's commands each build
            // their own namespaces.
            let per_command = engine(home.path(), EngineConfig::default())
                .session(ws.path())
                .unwrap();
            for mode in [Mode::Workspace, Mode::ReadOnly] {
                from_zygote.set_mode(mode);
                per_command.set_mode(mode);
                // Twice: Z's first fork and a later one (Z has served a command since).
                for _ in 0..2 {
                    let zygote = run_ok(&from_zygote, OWN_STATUS);
                    let own = run_ok(&per_command, OWN_STATUS);
                    assert!(!from_zygote.zygote_pids().is_empty(), "{mode}");
                    assert!(per_command.zygote_pids().is_empty(), "{mode}");
                    assert_eq!(zygote, own, "{mode}");
                    // Nothing blocked (what is ignored, SIGQUIT and 32, bash ignores itself:
                    // the same in both).
                    assert!(zygote.lines().any(|l| l == "SigBlk:0000000000000000"), "{mode}: {zygote}");
                    if root() {
                        // Root in the user namespace keeps only capabilities 0 to 4.
                        assert!(zygote.lines().any(|l| l == "CapBnd:000000000000001f"), "{zygote}");
                    }
                    // Z installed the filter on itself once (its first command), with
                    // no_new_privs: the command has as many programs as one that installed
                    // them itself, not twice as many, and so has Z. Likewise Z's bounding set
                    // is its commands'.
                    let filters = zygote
                        .lines()
                        .find_map(|l| l.strip_prefix("Seccomp_filters:"))
                        .map(str::to_string);
                    assert!(zygote.lines().any(|l| l == "Seccomp:2"), "{mode}: {zygote}");
                    for z in from_zygote.zygote_pids() {
                        let status =
                            std::fs::read_to_string(format!("/proc/{z}/status")).unwrap();
                        assert_eq!(status_field(&status, "Seccomp").as_deref(), Some("2"), "{status}");
                        assert_eq!(status_field(&status, "NoNewPrivs").as_deref(), Some("1"));
                        assert_eq!(status_field(&status, "Seccomp_filters"), filters, "{status}");
                        if root() {
                            // Z dropped its bounding set once for its commands, and kept the
                            // effective capabilities it mounts and clones with.
                            assert_eq!(
                                status_field(&status, "CapBnd").as_deref(),
                                Some("000000000000001f"),
                                "{status}"
                            );
                        }
                    }
                }
            }
        },
    );
}

/// The session's plan is made once and reused (`src/sandbox/linux/plan_cache.rs`); what it
/// depends on still reaches the next command: a credential file that appears in the home
/// after a command (right in it, and under folders that did not exist) is masked for the
/// next one, and as root a socket that appears right in `/run` is hidden too.
#[test]
fn what_appears_on_the_host_after_a_command_is_masked_for_the_next_one_of_its_zygote() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::what_appears_on_the_host_after_a_command_is_masked_for_the_next_one_of_its_zygote",
        || {
            if !require_view() {
                return;
            }
            for mode in [Mode::Workspace, Mode::ReadOnly] {
                let (home, ws) = (dir("zyg-plan-home"), dir("zyg-plan-ws"));
                let session = session(home.path(), ws.path(), mode);
                let netrc = home.path().join(".netrc");
                let hosts = home.path().join(".config/gh/hosts.yml");
                let socket = format!("/run/acpbash-plan-{}-{mode}.sock", std::process::id());
                let script = format!(
                    "cat {} {} 2>&1; test -S {socket} && echo SOCKET-SEEN; echo end",
                    netrc.display(),
                    hosts.display()
                );
                // Twice: the second command is the first to find the session's plan kept.
                for _ in 0..2 {
                    let before = run_ok(&session, &script);
                    assert!(before.ends_with("end\n"), "{mode}: {before}");
                }
                let zygote = session.zygote_pids();
                std::fs::write(&netrc, "machine x password SECRET-NETRC\n").unwrap();
                std::fs::create_dir_all(hosts.parent().unwrap()).unwrap();
                std::fs::write(&hosts, "oauth_token: SECRET-GH\n").unwrap();
                let _listener = root().then(|| std::os::unix::net::UnixListener::bind(&socket).unwrap());
                let after = run_ok(&session, &script);
                if root() {
                    std::fs::remove_file(&socket).unwrap();
                }
                for secret in ["SECRET-NETRC", "SECRET-GH", "SOCKET-SEEN"] {
                    assert!(!after.contains(secret), "{mode}: {after}");
                }
                assert!(after.ends_with("end\n"), "{mode}: {after}");
                assert_ne!(session.zygote_pids(), zygote, "{mode}: a new view, a new zygote");
            }
        },
    );
}

/// The netns file descriptors `pid` holds (`net:[inode]`).
fn network_namespaces_held(pid: u32) -> Vec<String> {
    let mut held: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .map(|link| link.to_string_lossy().into_owned())
        .filter(|link| link.starts_with("net:["))
        .collect();
    held.sort();
    held
}

/// Read-only commands that a zygote serves join its network namespace: the agent makes none
/// for them. As root the agent keeps one spare namespace for whoever joins one next (a new
/// zygote, a command on the per-command path); commands from the zygote leave it untouched.
/// (An ordinary user's agent keeps no pool, and its fds are not readable: not dumpable.)
#[test]
fn read_only_commands_from_a_zygote_take_no_network_namespace_of_their_own() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::read_only_commands_from_a_zygote_take_no_network_namespace_of_their_own",
        || {
            if !require_view() {
                return;
            }
            let ws = served_workspace();
            let mut served = Served::start("read-only");
            let session = served.new_session(ws.path());
            let agent = served.agent.id();
            let net = served.prompt(&session, "readlink /proc/self/ns/net");
            assert_eq!(served.zygotes().len(), 1, "{net}");
            // As root the zygote's start took the pool's namespace and the pool makes the
            // next one on a thread of its own: wait for it to be held.
            let spare = if root() {
                let deadline = Instant::now() + hang_guard();
                loop {
                    let held = network_namespaces_held(agent);
                    if !held.is_empty() {
                        break held;
                    }
                    assert!(Instant::now() < deadline, "no spare network namespace");
                    std::thread::yield_now();
                }
            } else {
                Vec::new()
            };
            // After each command: a namespace taken (and closed) by a command would leave
            // none held or a new one (whose inode the kernel may recycle only later).
            for round in 0..4 {
                let again = served.prompt(&session, "readlink /proc/self/ns/net");
                assert_eq!(
                    field_line(&again),
                    field_line(&net),
                    "the zygote's namespace"
                );
                if root() {
                    let held = network_namespaces_held(agent);
                    assert_eq!(held, spare, "round {round}: the spare was taken");
                }
            }
        },
    );
}

/// The `net:[…]` line of an output.
fn field_line(output: &str) -> &str {
    output
        .lines()
        .find(|l| l.starts_with("net:["))
        .unwrap_or_else(|| panic!("no net:[…] in {output}"))
}

/// A file the host replaces by a rename (an editor's atomic save, `git config`) is a new
/// inode: the kernel detaches the mounts on the old one in every other mount namespace, so a
/// zygote whose view masked `~/.netrc` or bound `.git/config` read-only would serve the next
/// command the host's new file, readable and writable. The next command must still find the
/// credential masked and the Git config read-only (from a new zygote).
#[test]
fn a_file_the_host_replaces_by_rename_stays_masked_and_read_only_for_the_next_command() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::a_file_the_host_replaces_by_rename_stays_masked_and_read_only_for_the_next_command",
        || {
            if !require_view() {
                return;
            }
            for mode in [Mode::Workspace, Mode::ReadOnly] {
                let (home, ws) = (dir("zyg-rename-home"), dir("zyg-rename-ws"));
                let netrc = home.path().join(".netrc");
                std::fs::write(&netrc, "machine old password OLD-NETRC\n").unwrap();
                let git = ws.path().join(".git");
                std::fs::create_dir_all(git.join("hooks")).unwrap();
                std::fs::write(git.join("config"), "[core]\n").unwrap();
                let session = session(home.path(), ws.path(), mode);
                let script = format!(
                    "cat {} 2>&1; echo '[core] pager = evil' >> .git/config 2>/dev/null && echo CONFIG-WRITTEN; echo end",
                    netrc.display()
                );
                // Twice: the second command is served by the zygote with the kept plan.
                for _ in 0..2 {
                    let before = run_ok(&session, &script);
                    assert!(!before.contains("OLD-NETRC"), "{mode}: {before}");
                    assert!(!before.contains("CONFIG-WRITTEN"), "{mode}: {before}");
                }
                let zygote = session.zygote_pids();
                assert!(!zygote.is_empty(), "{mode}: no zygote served the commands");
                let replace = |path: &Path, text: &str| {
                    let new = path.with_extension("acpbash-new");
                    std::fs::write(&new, text).unwrap();
                    std::fs::rename(&new, path).unwrap();
                };
                replace(&netrc, "machine x password SECRET-RENAMED\n");
                replace(&git.join("config"), "[core]\n\tbare = false\n");
                let after = run_ok(&session, &script);
                assert!(!after.contains("SECRET-RENAMED"), "{mode}: {after}");
                assert!(!after.contains("CONFIG-WRITTEN"), "{mode}: {after}");
                assert!(after.ends_with("end\n"), "{mode}: {after}");
                let config = std::fs::read_to_string(git.join("config")).unwrap();
                assert!(!config.contains("evil"), "{mode}: {config}");
                assert_ne!(session.zygote_pids(), zygote, "{mode}: a new view, a new zygote");
            }
        },
    );
}

/// Waits (hang guard only) until `served` has exactly `count` zygotes; returns them.
fn wait_for_zygotes(served: &Served, count: usize, what: &str) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let zygotes = served.zygotes();
        if zygotes.len() == count {
            return zygotes;
        }
        assert!(
            start.elapsed() < hang_guard(),
            "{what}: {} zygotes, not {count}: {zygotes:?}",
            zygotes.len()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `session/new` starts the session's zygote before any prompt
/// (`notes/2026-12-02-zygote-first-command.md`), one per session: two sessions of one agent
/// get two zygotes, their first commands come from them (no third is started), and each
/// command has its own session's view, not the other's (each workspace is writable only from
/// its own session).
#[test]
fn a_served_sessions_zygote_is_started_before_its_first_prompt_and_serves_only_that_session() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::a_served_sessions_zygote_is_started_before_its_first_prompt_and_serves_only_that_session",
        || {
            if !require_view() {
                return;
            }
            let (one, two) = (served_workspace(), served_workspace());
            let mut served = Served::start("workspace");
            let first = served.new_session(one.path());
            let zygotes = wait_for_zygotes(&served, 1, "after the first session/new");
            let second = served.new_session(two.path());
            let zygotes = {
                let both = wait_for_zygotes(&served, 2, "after the second session/new");
                assert!(both.contains(&zygotes[0]), "{both:?}");
                both
            };
            let probe = |own: &Path, other: &Path| {
                format!(
                    "readlink /proc/self/ns/user; touch {}/mine && echo WROTE-OWN; touch {}/theirs 2>/dev/null && echo WROTE-OTHER; true",
                    own.display(),
                    other.display()
                )
            };
            let out_first = served.prompt(&first, &probe(one.path(), two.path()));
            let out_second = served.prompt(&second, &probe(two.path(), one.path()));
            for out in [&out_first, &out_second] {
                assert!(out.lines().any(|l| l == "WROTE-OWN"), "{out}");
                assert!(!out.lines().any(|l| l == "WROTE-OTHER"), "{out}");
            }
            assert!(!one.path().join("theirs").exists() && !two.path().join("theirs").exists());
            let user = |out: &str| {
                out.lines()
                    .find(|l| l.starts_with("user:["))
                    .unwrap_or_else(|| panic!("no user:[…] in {out}"))
                    .to_string()
            };
            assert_ne!(user(&out_first), user(&out_second), "one zygote served both sessions");
            // The commands came from the zygotes started at session/new: no other was started.
            let mut now = served.zygotes();
            now.sort();
            let mut before = zygotes.clone();
            before.sort();
            assert_eq!(now, before, "the first commands started zygotes of their own");
            if root() {
                // Each session's command runs in the user namespace of one of those zygotes.
                let ns = |pid: i32| {
                    std::fs::read_link(format!("/proc/{pid}/ns/user"))
                        .unwrap()
                        .to_string_lossy()
                        .into_owned()
                };
                let held: Vec<String> = zygotes.iter().map(|&z| ns(z)).collect();
                assert!(held.contains(&user(&out_first)), "{held:?} {out_first}");
                assert!(held.contains(&user(&out_second)), "{held:?} {out_second}");
            }
        },
    );
}

/// A mode change gets the session a zygote of that mode before its next prompt, and the
/// prompt's command comes from it: read-only's own network namespace, no further zygote.
/// SIGKILL of the agent then ends both zygotes, though neither ever ran a command of the
/// session's in that state.
#[test]
fn a_served_sessions_mode_change_starts_that_modes_zygote_and_sigkill_of_the_agent_ends_them() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::a_served_sessions_mode_change_starts_that_modes_zygote_and_sigkill_of_the_agent_ends_them",
        || {
            if !require_view() {
                return;
            }
            let ws = served_workspace();
            let mut served = Served::start("workspace");
            let session = served.new_session(ws.path());
            let workspace = wait_for_zygotes(&served, 1, "after session/new");
            let answer = served.request(
                "session/set_mode",
                serde_json::json!({"sessionId": session, "modeId": "read-only"}),
            );
            assert!(answer.get("error").is_none(), "{answer}");
            let both = wait_for_zygotes(&served, 2, "after session/set_mode read-only");
            assert!(both.contains(&workspace[0]), "{both:?}");
            let net = served.prompt(&session, "readlink /proc/self/ns/net; touch ./ro 2>/dev/null && echo WROTE; true");
            assert!(!net.lines().any(|l| l == "WROTE"), "read-only wrote: {net}");
            assert_ne!(field_line(&net), host_ns("net"), "{net}");
            let mut now = served.zygotes();
            now.sort();
            let mut before = both.clone();
            before.sort();
            assert_eq!(now, before, "the read-only command started a zygote of its own");
            if root() {
                let read_only = *both.iter().find(|&&z| z != workspace[0]).unwrap();
                let zygote_net = std::fs::read_link(format!("/proc/{read_only}/ns/net"))
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                assert_eq!(zygote_net, field_line(&net), "not the read-only zygote's namespace");
            }
            // SAFETY: SIGKILL to the agent this test started.
            unsafe { libc::kill(served.agent.id() as i32, libc::SIGKILL) };
            served.agent.wait().unwrap();
            wait_until_pids_gone(&both, "a killed agent's early zygotes");
        },
    );
}

/// `acp-bash` started with `pidfd_open` failing (ENOSYS, as on a kernel before 5.3, by a seccomp
/// filter the test installs), as root and as nobody: `doctor` says the per-session sandbox is
/// not in use and why, and workspace commands still run, in namespaces of their own (no zygote
/// can start), through `acp-bash run` and through `acp-bash serve` over pipes.
#[test]
fn without_pidfds_doctor_says_no_zygote_and_commands_build_their_own_namespaces() {
    use std::os::unix::process::CommandExt;
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::without_pidfds_doctor_says_no_zygote_and_commands_build_their_own_namespaces",
        || {
            if !require_view() {
                return;
            }
            let filter = seccompiler::SeccompFilter::new(
                [(libc::SYS_pidfd_open, Vec::new())].into_iter().collect(),
                seccompiler::SeccompAction::Allow,
                seccompiler::SeccompAction::Errno(libc::ENOSYS as u32),
                std::env::consts::ARCH.try_into().unwrap(),
            )
            .unwrap();
            let program: seccompiler::BpfProgram = filter.try_into().unwrap();
            let no_pidfds = |command: &mut Command| {
                let program = program.clone();
                // SAFETY: only prctl and seccomp between fork and exec, on a program compiled
                // before.
                unsafe {
                    command.pre_exec(move || {
                        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        seccompiler::apply_filter(&program).map_err(std::io::Error::other)
                    });
                }
            };
            let without_pidfds = |args: &[&str], cwd: &Path| {
                let mut command = Command::new(binary());
                command.args(args).current_dir(cwd).stdin(Stdio::null());
                no_pidfds(&mut command);
                let output = command.output().unwrap();
                assert!(output.status.success(), "{args:?}: {output:?}");
                (
                    String::from_utf8_lossy(&output.stdout).into_owned(),
                    String::from_utf8_lossy(&output.stderr).into_owned(),
                )
            };
            let ws = served_workspace();
            let (doctor, _) = without_pidfds(&["doctor"], ws.path());
            let row = doctor
                .lines()
                .find(|l| l.starts_with("Per-session sandbox:"))
                .unwrap_or_else(|| panic!("{doctor}"));
            assert!(row.starts_with("Per-session sandbox: not in use"), "{row}");
            assert!(row.contains("pidfd_open"), "{row}");
            let script = "echo pid-$$ ok-$((40 + 2)); readlink /proc/self/ns/user";
            let (out, log) = without_pidfds(
                &[
                    "--sandbox",
                    "workspace",
                    "--log-level",
                    "acp_bash::sandbox=debug",
                    "run",
                    "--plain",
                    "--",
                    script,
                ],
                ws.path(),
            );
            // The shell is PID 2 of its own PID namespace (PID 1 is its init) either way.
            assert!(out.contains("pid-2 ok-42"), "{out}");
            assert!(log.contains("no zygote for this session"), "{log}");
            let host_user_ns = std::fs::read_link("/proc/self/ns/user").unwrap();
            let host_user_ns = host_user_ns.to_string_lossy().into_owned();
            assert!(
                !out.contains(&host_user_ns),
                "the command ran in the host's user namespace: {out}"
            );
            // The same through `serve`: two commands of one session, each in a user namespace
            // of its own (no zygote shares one), and no zygote among the agent's children.
            let mut served = Served::start_with("workspace", no_pidfds);
            let session = served.new_session(ws.path());
            let first = served.prompt(&session, script);
            let second = served.prompt(&session, script);
            assert!(first.contains("pid-2 ok-42"), "{first}");
            let user_ns = |out: &str| {
                out.lines()
                    .find(|l| l.starts_with("user:["))
                    .unwrap_or_else(|| panic!("{out}"))
                    .to_string()
            };
            assert_ne!(user_ns(&first), host_user_ns, "{first}");
            assert_ne!(user_ns(&first), user_ns(&second), "{first}\n{second}");
            assert!(served.zygotes().is_empty(), "{:?}", served.zygotes());
        },
    );
}

/// Through `acp-bash serve` over pipes, as root and as nobody: the served session's zygote has
/// the seccomp filter and `no_new_privs` in force on itself after its first command, every
/// command has the filter once (not twice) and still cannot `add_key`; and a command the scan
/// takes as stateless has no fd 63 while an export made before it still reaches the next one.
#[test]
fn a_served_zygote_filters_itself_once_and_stateless_commands_keep_the_state_around_them() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::a_served_zygote_filters_itself_once_and_stateless_commands_keep_the_state_around_them",
        || {
            if !require_view() {
                return;
            }
            let ws = served_workspace();
            let mut served = Served::start("workspace");
            let session = served.new_session(ws.path());
            let filters = "echo filters=$(awk '/^Seccomp_filters:/ {print $2}' /proc/self/status); \
                           python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); \
                           print(\"add_key\", l.syscall(248, b\"user\", b\"k\", b\"v\", 1, -3), ctypes.get_errno())'";
            let first = served.prompt(&session, filters);
            let second = served.prompt(&session, filters);
            assert_eq!(field(&first, "filters"), field(&second, "filters"), "{second}");
            assert!(second.contains(&format!("add_key -1 {}", libc::EPERM)), "{second}");
            let zygotes = served.zygotes();
            assert_eq!(zygotes.len(), 1, "{zygotes:?}");
            let status = std::fs::read_to_string(format!("/proc/{}/status", zygotes[0])).unwrap();
            assert_eq!(status_field(&status, "Seccomp").as_deref(), Some("2"), "{status}");
            assert_eq!(status_field(&status, "NoNewPrivs").as_deref(), Some("1"), "{status}");
            assert_eq!(
                status_field(&status, "Seccomp_filters").as_deref(),
                Some(field(&second, "filters")),
                "{status}"
            );

            served.prompt(&session, "export CARRIED=yes");
            let alone = served.prompt(&session, "ls /proc/self/fd");
            assert!(!alone.lines().any(|l| l == "63"), "{alone}");
            let seen = served.prompt(&session, "echo carried=$CARRIED");
            assert_eq!(field(&seen, "carried"), "yes", "{seen}");
        },
    );
}

/// The live (not zombie) children of `parent`.
fn children_of(parent: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() != Some(&"Z") && fields.get(1) == Some(&parent.to_string().as_str()) {
            found.push(pid);
        }
    }
    found.sort_unstable();
    found
}

/// Waits (hang guard only) until `parent` has exactly `count` live children; returns them.
fn wait_for_children(parent: i32, count: usize, what: &str) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let children = children_of(parent);
        if children.len() == count {
            return children;
        }
        assert!(
            start.elapsed() < hang_guard(),
            "{what}: {parent} has children {children:?}, not {count}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `pid` is PID 1 of a PID namespace of its own (its `NSpid` line ends in 1) and named as a
/// command's init.
fn assert_pid_1(pid: i32, what: &str) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let nspid = status_field(&status, "NSpid").unwrap_or_default();
    assert!(
        nspid.split_whitespace().count() >= 2 && nspid.split_whitespace().last() == Some("1"),
        "{what}: NSpid {nspid:?}"
    );
    assert_eq!(
        status_field(&status, "Name").as_deref(),
        Some("acp-bash-init"),
        "{what}"
    );
}

/// Between commands a served zygote holds one spare: the next command's PID 1, already in a
/// PID namespace of its own, with its mounts. The next command runs in it (its shell is the
/// spare's child), and a new spare is made while that command runs. A spare killed from
/// outside costs the session nothing: the command after it is cloned fresh, and the session's
/// zygote and spares end with the agent.
#[test]
fn a_served_zygote_keeps_the_next_commands_pid_1_ready_and_does_without_it_when_it_is_gone() {
    let _serial = one_at_a_time();
    as_root_and_nobody(
        "sandbox::zygote::a_served_zygote_keeps_the_next_commands_pid_1_ready_and_does_without_it_when_it_is_gone",
        || {
            if !require_view() {
                return;
            }
            let ws = served_workspace();
            let mut served = Served::start("workspace");
            let session = served.new_session(ws.path());
            served.prompt(&session, "true");
            let zygotes = served.zygotes();
            assert_eq!(zygotes.len(), 1, "{zygotes:?}");
            let zygote = zygotes[0];
            let spare = wait_for_children(zygote, 1, "after a command")[0];
            assert_pid_1(spare, "the spare");
            assert!(children_of(spare).is_empty(), "a spare runs nothing");

            let (ready, go) = (ws.path().join("ready"), ws.path().join("go"));
            let id = served.start_prompt(
                &session,
                &format!(
                    "echo > {ready}; until [ -e {go} ]; do sleep 0.01; done; echo done-$((40 + 2))",
                    ready = ready.display(),
                    go = go.display()
                ),
            );
            crate::support::sandbox::wait_for_file(&ready);
            let running = wait_for_children(zygote, 2, "while a command runs");
            assert!(running.contains(&spare), "{running:?} has no {spare}");
            assert!(!children_of(spare).is_empty(), "the command's shell is the spare's child");
            let next = running.into_iter().find(|&pid| pid != spare).unwrap();
            assert_pid_1(next, "the spare made while the command runs");
            std::fs::write(&go, "go\n").unwrap();
            let answer = served.answer(id);
            assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
            let seen = format!("{:?}", served.seen);
            assert!(seen.contains("done-42"), "{seen}");

            assert_eq!(wait_for_children(zygote, 1, "after the command"), vec![next]);
            // SAFETY: SIGKILL to the spare of the zygote of the agent this test started.
            unsafe { libc::kill(next, libc::SIGKILL) };
            wait_until_pids_gone(&[next], "a killed spare");
            let fresh = served.prompt(&session, "echo fresh-$((40 + 2))");
            assert!(fresh.contains("fresh-42"), "{fresh}");
            let after = wait_for_children(zygote, 1, "after the fresh command");
            assert_pid_1(after[0], "the spare made after it");

            drop(served.stdin.take());
            served.agent.wait().unwrap();
            wait_until_pids_gone(&[zygote, after[0]], "a served session's zygote and spare");
        },
    );
}
