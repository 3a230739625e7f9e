//! The seccomp filter and the fresh session keyring (issue 19, findings 5 and 6), tried through
//! the engine (`Session::run`) as root and as `nobody`: io_uring and `AF_VSOCK` sockets cannot be
//! made (the socket is never bound or connected), a key the agent's user keeps in its session
//! keyring is out of reach, and a key one command plants is not found by another session's
//! command. The families a build needs still work.
#![cfg(target_os = "linux")]

use std::path::Path;

use crate::support::acp::binary;
use crate::support::engine::run;
use crate::support::sandbox::{as_root_and_nobody, require_namespaces};
use acp_bash::exec::{Engine, EngineConfig};
use acp_bash::sandbox::{self, Mode};

/// The modes with the seccomp filter.
const FILTERED: [Mode; 2] = [Mode::Workspace, Mode::ReadOnly];

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

fn workspace() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("acpbash-syscalls-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

fn run_in(engine: &Engine, dir: &Path, mode: Mode, script: &str) -> String {
    let session = engine.session(dir).unwrap();
    session.set_mode(mode);
    block_on(run(&session, script)).output
}

/// A Python 3 program run by the command, with `libc` (ctypes) and the x86_64 numbers of the
/// calls it makes filled in from the test's own `libc`.
fn python(body: &str) -> String {
    format!(
        "python3 - <<'EOF'\nimport ctypes, os, socket\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         def err(): return os.strerror(ctypes.get_errno())\n\
         SYS_io_uring_setup, SYS_keyctl, SYS_add_key = {}, {}, {}\n{body}\nEOF",
        libc::SYS_io_uring_setup,
        libc::SYS_keyctl,
        libc::SYS_add_key
    )
}

#[test]
fn io_uring_and_vsock_sockets_cannot_be_made_and_builds_sockets_still_can() {
    as_root_and_nobody(
        "sandbox::syscalls::io_uring_and_vsock_sockets_cannot_be_made_and_builds_sockets_still_can",
        || {
            if !require_namespaces()
                || !crate::support::skip::skip_unless(
                    "seccomp filter",
                    sandbox::Support::current().seccomp.clone(),
                )
            {
                return;
            }
            // Markers are assembled when printed: the output must not hold them otherwise.
            let script = python(
                r#"params = ctypes.create_string_buffer(120)
fd = libc.syscall(SYS_io_uring_setup, 4, params)
print("IO_URING" + "-MADE" if fd >= 0 else "io_uring: " + err())
fd = libc.socket(socket.AF_VSOCK, socket.SOCK_STREAM, 0)
print("VSOCK" + "-MADE" if fd >= 0 else "vsock: " + err())
for name in ("AF_UNIX", "AF_INET", "AF_INET6"):
    s = socket.socket(getattr(socket, name), socket.SOCK_STREAM); s.close(); print(name, "ok")
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); s.close(); print("AF_NETLINK ok")
a, b = socket.socketpair(); print("socketpair ok")"#,
            );
            let engine = Engine::new(EngineConfig::default());
            for mode in FILTERED {
                let ws = workspace();
                let output = run_in(&engine, ws.path(), mode, &script);
                let lines: Vec<&str> = output.lines().collect();
                assert!(!lines.contains(&"IO_URING-MADE"), "{mode}: {output}");
                assert!(!lines.contains(&"VSOCK-MADE"), "{mode}: {output}");
                assert!(
                    lines.contains(&"io_uring: Function not implemented"),
                    "{mode}: {output}"
                );
                assert!(
                    lines.contains(&"vsock: Address family not supported by protocol"),
                    "{mode}: {output}"
                );
                for works in [
                    "AF_UNIX ok",
                    "AF_INET ok",
                    "AF_INET6 ok",
                    "AF_NETLINK ok",
                    "socketpair ok",
                ] {
                    assert!(lines.contains(&works), "{mode}: {output}");
                }
            }
        },
    );
}

/// The filter lets one `keyctl` through, the one each command makes before its shell starts
/// (from a zygote, the filter is in force by then): joining a new anonymous session keyring.
/// A named one, another operation, or `add_key` is still refused with `EPERM`.
#[test]
fn only_joining_an_anonymous_session_keyring_passes_the_filter() {
    as_root_and_nobody(
        "sandbox::syscalls::only_joining_an_anonymous_session_keyring_passes_the_filter",
        || {
            if !require_namespaces() {
                return;
            }
            let body = r#"
anon = libc.syscall(SYS_keyctl, 1, None)
print("anonymous", "joined" if anon > 0 else err())
named = libc.syscall(SYS_keyctl, 1, b"mine")
print("named", named, err())
other = libc.syscall(SYS_keyctl, 0, -3, 0)
print("get-id", other, err())
add = libc.syscall(SYS_add_key, b"user", b"k", b"v", 1, -3)
print("add_key", add, err())
"#;
            let ws = workspace();
            // Commands that build their own namespaces, and a zygote's (the built binary).
            let zygote = EngineConfig::default().zygote_program(Some(binary()));
            for (config, from_zygote) in [(EngineConfig::default(), false), (zygote, true)] {
                let engine = Engine::new(config);
                for mode in FILTERED {
                    let session = engine.session(ws.path()).unwrap();
                    session.set_mode(mode);
                    // Twice: a zygote's first command (which installs the filter on the
                    // zygote) and one that inherits it.
                    for _ in 0..2 {
                        let output = block_on(run(&session, &python(body))).output;
                        for line in [
                            "anonymous joined",
                            "named -1 Operation not permitted",
                            "get-id -1 Operation not permitted",
                            "add_key -1 Operation not permitted",
                        ] {
                            assert!(output.contains(line), "{mode}: {line:?} in {output}");
                        }
                    }
                    assert_eq!(!session.zygote_pids().is_empty(), from_zygote, "{mode}");
                }
            }
        },
    );
}

/// `keyctl(KEYCTL_SEARCH)` for `name` in the session keyring, then `KEYCTL_READ` of what it
/// found: prints `FOUND <payload>` or why not.
fn search_session_keyring(name: &str) -> String {
    python(&format!(
        r#"buf = ctypes.create_string_buffer(256)
key = libc.syscall(SYS_keyctl, 10, -3, b"user", b"{name}", 0)
if key < 0:
    print("search: " + err())
else:
    n = libc.syscall(SYS_keyctl, 11, key, buf, 256)
    print("FOUND" + " " + buf.raw[:max(n, 0)].decode())"#
    ))
}

/// Runs `job` on the thread that forks the commands (the keyring a command inherits is that
/// thread's), and waits for it.
fn on_spawner_thread(job: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    sandbox::on_spawner_thread(Box::new(move || {
        job();
        let _ = tx.send(());
    }));
    rx.recv().unwrap();
}

#[test]
fn a_key_in_the_agents_session_keyring_is_out_of_reach() {
    as_root_and_nobody(
        "sandbox::syscalls::a_key_in_the_agents_session_keyring_is_out_of_reach",
        || {
            if !require_namespaces() {
                return;
            }
            let name = format!("acpbash-agent-key-{}", std::process::id());
            let secret = format!("agent-secret-{}", std::process::id());
            let added = std::sync::Arc::new(std::sync::Mutex::new(0i64));
            let (n, s, a) = (name.clone(), secret.clone(), added.clone());
            on_spawner_thread(move || unsafe {
                // A keyring of this thread's own (the test process's stays as it is), holding
                // the agent's key.
                libc::syscall(libc::SYS_keyctl, 1, std::ptr::null::<u8>());
                let name = std::ffi::CString::new(n).unwrap();
                *a.lock().unwrap() = libc::syscall(
                    libc::SYS_add_key,
                    c"user".as_ptr(),
                    name.as_ptr(),
                    s.as_ptr(),
                    s.len(),
                    -3i32, // KEY_SPEC_SESSION_KEYRING
                );
            });
            let added = *added.lock().unwrap();
            if !crate::support::skip::skip_unless(
                "fresh session keyring",
                if added > 0 {
                    Ok(())
                } else {
                    Err(format!("add_key: {}", std::io::Error::last_os_error()))
                },
            ) {
                return;
            }
            let engine = Engine::new(EngineConfig::default());
            for mode in [Mode::Workspace, Mode::ReadOnly, Mode::Full] {
                let ws = workspace();
                let output = run_in(&engine, ws.path(), mode, &search_session_keyring(&name));
                assert!(!output.contains(&secret), "{mode}: {output}");
                assert!(
                    output.lines().any(|l| l.starts_with("search: ")),
                    "{mode}: {output}"
                );
            }
        },
    );
}

#[test]
fn a_key_one_command_plants_is_not_found_by_another_sessions_command() {
    as_root_and_nobody(
        "sandbox::syscalls::a_key_one_command_plants_is_not_found_by_another_sessions_command",
        || {
            if !require_namespaces() {
                return;
            }
            let name = format!("acpbash-planted-{}", std::process::id());
            // Full mode: no seccomp filter, so keyctl works and only the fresh keyring stands
            // between the two sessions; in the filtered modes keyctl fails outright.
            let plant = python(&format!(
                r#"r = libc.syscall(SYS_add_key, b"user", b"{name}", b"planted-value", 13, -3)
print("PLANTED" if r > 0 else "add_key: " + err())"#
            ));
            let engine = Engine::new(EngineConfig::default());
            for (planter, finder) in [
                (Mode::Full, Mode::Full),
                (Mode::Full, Mode::ReadOnly),
                (Mode::Workspace, Mode::Full),
            ] {
                let ws = workspace();
                let planted = run_in(&engine, ws.path(), planter, &plant);
                if planter == Mode::Workspace {
                    assert!(
                        planted
                            .lines()
                            .any(|l| l == "add_key: Operation not permitted"),
                        "{planted}"
                    );
                } else {
                    assert!(planted.lines().any(|l| l == "PLANTED"), "{planted}");
                }
                let other = workspace();
                let found = run_in(
                    &engine,
                    other.path(),
                    finder,
                    &search_session_keyring(&name),
                );
                assert!(
                    !found.contains("planted-value"),
                    "{planter} then {finder}: {found}"
                );
            }
        },
    );
}
