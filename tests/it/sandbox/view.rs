//! The view of sandbox v3 (issue 19, points 2, 3, 6 and 7), through the real engine
//! (`Session::run`), as root and as `nobody`: a minimal `/dev` of the command's own, no host
//! daemon's socket (a private temp dir per session, masked socket folders, the abstract-socket
//! scope), Git metadata read-only in workspace mode, credential files masked.
#![cfg(target_os = "linux")]

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::engine::{hang_guard, run};
use crate::support::sandbox::{
    as_root_and_nobody_both_views, marker, require_namespaces, session_folders, view_way,
    without_notices,
};
use crate::support::skip::skip_unless;
use acp_bash::exec::{Engine, EngineConfig, Exit, Session};
use acp_bash::sandbox::{Mode, Protection, Support, HOME_CREDENTIALS};

/// The confined modes the view must hold in.
const CONFINED: [Mode; 2] = [Mode::Workspace, Mode::ReadOnly];

const PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

/// Whether commands get the filesystem view here (skips, recorded, when not).
pub fn require_view() -> bool {
    require_namespaces()
        && skip_unless(
            "read-only filesystem view",
            Support::current().filesystem_view.clone(),
        )
}

/// A folder this process's user owns, outside the temp dir (which the view replaces).
pub(super) fn dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("acpbash-view-{tag}-"))
        .tempdir_in("/var/tmp")
        .unwrap()
}

pub(super) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// An engine whose commands' environment has `HOME=home` (what the engine masks credentials
/// of), with `config`'s protection.
pub(super) fn engine(home: &Path, config: EngineConfig) -> Engine {
    Engine::with_environment(
        view_way(config)
            .kill_grace(Duration::from_millis(300))
            .pipe_grace(Duration::from_millis(300)),
        [
            ("PATH".into(), PATH.into()),
            ("HOME".into(), home.as_os_str().to_owned()),
        ],
    )
}

fn session(engine: &Engine, dir: &Path, mode: Mode) -> Session {
    let session = engine.session(dir).unwrap();
    session.set_mode(mode);
    session
}

fn run_in(session: &Session, script: &str) -> (Exit, String) {
    let outcome = block_on(run(session, script));
    (outcome.status.exit, without_notices(&outcome.output))
}

/// The names a command's own /dev holds, sorted.
const DEV: &str = "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero";

#[test]
fn commands_see_a_minimal_dev_of_their_own_where_ptys_still_work() {
    as_root_and_nobody_both_views(
        "sandbox::view::commands_see_a_minimal_dev_of_their_own_where_ptys_still_work",
        || {
            if !require_view() {
                return;
            }
            // A terminal of the host's, as another of the user's terminals would be.
            let host_pty = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/ptmx")
                .unwrap();
            let mut number: libc::c_uint = 0;
            assert_eq!(
                unsafe {
                    libc::ioctl(
                        std::os::fd::AsRawFd::as_raw_fd(&host_pty),
                        libc::TIOCGPTN,
                        &mut number,
                    )
                },
                0
            );
            let host_pts = format!("/dev/pts/{number}");
            assert!(Path::new(&host_pts).exists());
            let ws = dir("dev");
            let engine = engine(ws.path(), EngineConfig::default());
            for mode in CONFINED {
                let script = format!(
                    r#"echo $(ls /dev | sort)
ls /dev/pts
[ -e {host_pts} ] && echo "host terminal {host_pts} visible"
for disk in /dev/sda /dev/vda /dev/nvme0n1 /dev/mem /dev/kmsg /dev/console; do [ -e $disk ] && echo "$disk visible"; done
echo hi > /dev/null && head -c 3 /dev/zero | wc -c && head -c 5 /dev/urandom | wc -c
echo shm > /dev/shm/own && cat /dev/shm/own
echo fd > /dev/stdout
script -qec tty /dev/null </dev/null | tr -d '\r'
python3 -c 'import os, pty; m, s = pty.openpty(); os.write(s, b"ok\n"); print("pty", os.ttyname(s), os.read(m, 3))'
"#
                );
                let (exit, output) = run_in(&session(&engine, ws.path(), mode), &script);
                let expected =
                    format!("{DEV}\nptmx\n3\n5\nshm\nfd\n/dev/pts/0\npty /dev/pts/0 b'ok\\r'\n");
                assert_eq!(
                    (exit, output.as_str()),
                    (Exit::Code(0), expected.as_str()),
                    "{mode}"
                );
            }
        },
    );
}

/// A listener of the test's (the "host") at `path`, accepting nothing by itself.
fn listen(path: &Path) -> UnixListener {
    let listener = UnixListener::bind(path).unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

/// A Python line that connects to each address (`@name` for an abstract one) and prints
/// `connected` or the error.
fn connect_script(addresses: &[String]) -> String {
    let list = addresses
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"python3 -c '
import socket
for a in [{list}]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("\0" + a[1:] if a.startswith("@") else a)
        print(a, "connected")
    except OSError as e:
        print(a, type(e).__name__)
'"#
    )
}

/// Where the test puts a socket in a folder the view masks: the run-time folders of users
/// (`/run/user/…`, the session bus and systemd's user sockets live there). Root makes a
/// world-writable one for both halves; an ordinary user uses its own if it has one.
fn run_like_dir() -> Result<PathBuf, String> {
    let uid = unsafe { libc::geteuid() };
    let shared = PathBuf::from("/run/user/acp-bash-test");
    if uid == 0 {
        std::fs::create_dir_all(&shared).map_err(|e| format!("/run/user: {e}"))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        return Ok(shared);
    }
    if shared.is_dir() {
        return Ok(shared);
    }
    let own = PathBuf::from(format!("/run/user/{uid}"));
    if own.is_dir() {
        Ok(own)
    } else {
        Err("no /run/user folder this user may bind a socket in".to_string())
    }
}

#[test]
fn no_command_reaches_a_socket_a_host_process_listens_on() {
    as_root_and_nobody_both_views(
        "sandbox::view::no_command_reaches_a_socket_a_host_process_listens_on",
        || {
            if !require_view() {
                return;
            }
            let tag = marker("sock");
            let temp = tempfile::Builder::new()
                .prefix("acpbash-sock-")
                .tempdir()
                .unwrap();
            let mut listeners = Vec::new();
            let mut addresses = Vec::new();
            let in_temp = temp.path().join("host.sock");
            listeners.push(listen(&in_temp));
            addresses.push(in_temp.display().to_string());
            let abstract_name = format!("{tag}-abstract");
            {
                use std::os::linux::net::SocketAddrExt;
                let addr =
                    std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
                        .unwrap();
                let listener = UnixListener::bind_addr(&addr).unwrap();
                listener.set_nonblocking(true).unwrap();
                listeners.push(listener);
                addresses.push(format!("@{abstract_name}"));
            }
            let run_dir = run_like_dir();
            let in_run = run_dir.as_ref().ok().map(|d| d.join(format!("{tag}.sock")));
            if let Some(path) = &in_run {
                listeners.push(listen(path));
                addresses.push(path.display().to_string());
            } else if let Err(why) = &run_dir {
                crate::support::skip::record(&format!(
                    "{}: the /run socket part ({why})",
                    std::thread::current().name().unwrap_or("view test")
                ));
            }
            let ws = dir("sock");
            let engine = engine(ws.path(), EngineConfig::default());
            let script = connect_script(&addresses);
            // Without the sandbox every one of them answers (the test is not vacuous).
            let (_, open) = run_in(&session(&engine, ws.path(), Mode::Full), &script);
            for address in &addresses {
                assert!(open.contains(&format!("{address} connected")), "{open}");
            }
            for listener in &listeners {
                listener.accept().expect("the full-mode connection");
            }
            for mode in CONFINED {
                let (_, output) = run_in(&session(&engine, ws.path(), mode), &script);
                for address in &addresses {
                    assert!(output.contains(&format!("{address} ")), "{output}");
                    assert!(
                        !output.contains(&format!("{address} connected")),
                        "{mode}: {output}"
                    );
                }
                for listener in &listeners {
                    assert!(
                        listener.accept().is_err(),
                        "{mode}: a connection got through"
                    );
                }
                // Sockets a command makes itself work: in its temp dir, and in the session
                // folder where it may write.
                let own_dirs = if mode == Mode::Workspace {
                    "/tmp ."
                } else {
                    "/tmp"
                };
                let own = format!(
                    r#"for d in {own_dirs}; do python3 -c '
import socket, sys, os
p = os.path.join(sys.argv[1], "own.sock")
l = socket.socket(socket.AF_UNIX); l.bind(p); l.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect(p); c.send(b"hi")
print(sys.argv[1], l.accept()[0].recv(2).decode())
os.unlink(p)
' $d; done
python3 -c '
import socket
l = socket.socket(socket.AF_UNIX); l.bind("\0{tag}-own"); l.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect("\0{tag}-own"); print("abstract own", "ok")
'"#
                );
                let (exit, output) = run_in(&session(&engine, ws.path(), mode), &own);
                let expected = if mode == Mode::Workspace {
                    "/tmp hi\n. hi\nabstract own ok\n"
                } else {
                    "/tmp hi\nabstract own ok\n"
                };
                assert_eq!((exit, output.as_str()), (Exit::Code(0), expected), "{mode}");
            }
            if let Some(path) = in_run {
                let _ = std::fs::remove_file(path);
            }
        },
    );
}

/// Waits (hang guard only) until `path` is gone.
fn wait_until_removed(path: &Path) {
    let start = Instant::now();
    while path.exists() {
        assert!(start.elapsed() < hang_guard(), "{} stays", path.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_sessions_temp_dir_is_its_own_kept_across_its_commands_and_removed_with_it() {
    as_root_and_nobody_both_views(
        "sandbox::view::a_sessions_temp_dir_is_its_own_kept_across_its_commands_and_removed_with_it",
        || {
            if !require_view() {
                return;
            }
            let ws = dir("tmp");
            let temps = dir("temps");
            let engine = engine(
                ws.path(),
                EngineConfig::default().session_temp_root(Some(temps.path().join("root"))),
            );
            let name = marker("tmpfile");
            let first = session(&engine, ws.path(), Mode::Workspace);
            let write = format!("echo kept > /tmp/{name} && echo kept > \"${{TMPDIR:-/tmp}}/{name}\"");
            assert_eq!(run_in(&first, &write).0, Exit::Code(0));
            let read = format!("cat /tmp/{name} 2>&1");
            assert_eq!(run_in(&first, &read), (Exit::Code(0), "kept\n".to_string()));
            // Not the host's temp dir, not another session's.
            assert!(!std::env::temp_dir().join(&name).exists());
            let other = session(&engine, ws.path(), Mode::Workspace);
            let (_, output) = run_in(&other, &read);
            assert!(output.contains("No such file"), "{output}");
            let folders = session_folders(&temps.path().join("root"));
            assert_eq!(folders.len(), 2, "{folders:?}");
            let holder = folders
                .iter()
                .find(|f| f.join("tmp").join(&name).exists())
                .expect("the first session's folder holds the file")
                .clone();
            drop(first);
            wait_until_removed(&holder);
        },
    );
}

/// `git` with an identity, as the commands run it.
const GIT: &str = "git -c user.name=t -c user.email=t@example.com";

/// A repository at `path` with one commit.
fn git_repo(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    let script = format!(
        "cd '{}' && git init -q -b main && echo a > a && git add a && {GIT} commit -qm one",
        path.display()
    );
    let status = std::process::Command::new("bash")
        .args(["-c", &script])
        .env("HOME", path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn git_hooks_and_config_stay_read_only_in_workspace_mode() {
    as_root_and_nobody_both_views(
        "sandbox::view::git_hooks_and_config_stay_read_only_in_workspace_mode",
        || {
            if !require_view() {
                return;
            }
            let ws = dir("git");
            let root = ws.path();
            git_repo(root);
            git_repo(&root.join("libs/inner"));
            // A repository without `.git/hooks` (some tools make none): it must not be made.
            std::fs::remove_dir_all(root.join("libs/inner/.git/hooks")).unwrap();
            git_repo(&root.join("upstream"));
            let worktree = format!(
                "cd '{}' && git worktree add -q ../wt -b wt",
                root.join("upstream").display()
            );
            assert!(std::process::Command::new("bash")
                .args(["-c", &worktree])
                .env("HOME", root)
                .status()
                .unwrap()
                .success());
            let engine = engine(root, EngineConfig::default());
            let ws_session = session(&engine, root, Mode::Workspace);
            // What git does day to day keeps working.
            let daily = format!(
                "set -e; echo b > b; git add b; {GIT} commit -qm two; git checkout -qb topic; \
                 git branch -q other; echo c > a; git stash -q; git stash pop -q; \
                 git fetch -q ./upstream main; git checkout -q main; echo daily ok"
            );
            let (exit, output) = run_in(&ws_session, &daily);
            assert_eq!((exit, output.as_str()), (Exit::Code(0), "daily ok\n"));
            let before: Vec<(PathBuf, Vec<u8>)> = [
                root.join(".git/config"),
                root.join("libs/inner/.git/config"),
                root.join("wt/.git"),
            ]
            .into_iter()
            .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
            .collect();
            let attacks = [
                "echo 'touch /tmp/pwned' > .git/hooks/pre-commit",
                "git config core.fsmonitor 'touch /tmp/pwned'",
                "printf '[core]\\n\\tpager = touch /tmp/pwned\\n' >> .git/config",
                "mv .git/config .git/config.old",
                "rm -f .git/config",
                "mv .git/hooks .git/hooks.old",
                "mv .git .git.old",
                "rm -rf .git; mkdir -p .git/hooks && echo x > .git/hooks/post-checkout",
                "echo x > libs/inner/.git/hooks/pre-commit",
                "git -C libs/inner config core.hooksPath /tmp",
                "mv libs/inner libs/moved",
                "mv libs libs2",
                "echo 'gitdir: /tmp/evil' > wt/.git",
                "mv wt/.git wt/.git.old",
            ];
            for attack in attacks {
                let (exit, output) = run_in(&ws_session, &format!("{attack} 2>&1"));
                assert_ne!(exit, Exit::Code(0), "{attack}: {output}");
            }
            for (path, content) in &before {
                assert_eq!(&std::fs::read(path).unwrap(), content, "{}", path.display());
            }
            for hook in [
                ".git/hooks/pre-commit",
                ".git/hooks/post-checkout",
                "libs/inner/.git/hooks/pre-commit",
            ] {
                assert!(!root.join(hook).exists(), "{hook}");
            }
            // The explicit flag gives it back.
            let mut protection = Protection::default();
            protection.git_metadata_writable = true;
            let open = engine_with_protection(root, protection);
            let (exit, output) = run_in(
                &session(&open, root, Mode::Workspace),
                "echo '#!/bin/sh' > libs/inner/.git/hooks/pre-commit && git -C libs/inner config core.pager cat && echo written",
            );
            assert_eq!((exit, output.as_str()), (Exit::Code(0), "written\n"));
        },
    );
}

fn engine_with_protection(home: &Path, protection: Protection) -> Engine {
    engine(home, EngineConfig::default().protection(protection))
}

/// The credential folders among [`HOME_CREDENTIALS`] (the rest are files).
const CREDENTIAL_DIRS: [&str; 12] = [
    ".aws",
    ".azure",
    ".config/doctl",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/op",
    ".gnupg",
    ".kube",
    ".local/share/keyrings",
    ".oci",
    ".password-store",
];

/// A fake home holding every credential file with `SECRET` in it, plus what stays readable.
fn fake_home(home: &Path) -> Vec<PathBuf> {
    let mut secrets = Vec::new();
    for rel in HOME_CREDENTIALS {
        let path = home.join(rel);
        let file = if CREDENTIAL_DIRS.contains(&rel) {
            std::fs::create_dir_all(&path).unwrap();
            path.join("credentials")
        } else {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            path.clone()
        };
        std::fs::write(&file, "SECRET\n").unwrap();
        secrets.push(file);
    }
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    for key in ["id_ed25519", "id_rsa", "deploy.pem"] {
        std::fs::write(ssh.join(key), "SECRET\n").unwrap();
        secrets.push(ssh.join(key));
    }
    for open in ["known_hosts", "config", "id_ed25519.pub"] {
        std::fs::write(ssh.join(open), "public\n").unwrap();
    }
    secrets
}

#[test]
fn credential_files_read_as_empty_or_absent_and_the_flags_change_that() {
    as_root_and_nobody_both_views(
        "sandbox::view::credential_files_read_as_empty_or_absent_and_the_flags_change_that",
        || {
            if !require_view() {
                return;
            }
            let ws = dir("creds");
            // The home inside the session folder: masks hold even where commands may write.
            let home = ws.path().join("home");
            let secrets = fake_home(&home);
            let state = ws.path().join("state");
            std::fs::create_dir_all(state.join("sessions")).unwrap();
            std::fs::write(state.join("sessions/other.json"), "SECRET\n").unwrap();
            let extra = ws.path().join("extra.txt");
            std::fs::write(&extra, "SECRET\n").unwrap();
            let cat_all: String = secrets
                .iter()
                .chain([&state.join("sessions/other.json"), &extra])
                .map(|p| format!("cat '{}' 2>/dev/null; ", p.display()))
                .collect();
            let script = format!(
                "{cat_all} cat ~/.ssh/known_hosts ~/.ssh/config ~/.ssh/id_ed25519.pub; \
                 ls -A ~/.aws; {{ echo > ~/.aws/planted; }} 2>/dev/null && echo planted; echo done"
            );
            // Without the masks every secret is readable (the test is not vacuous).
            let (_, open) = run_in(
                &session(
                    &engine(&home, EngineConfig::default()),
                    ws.path(),
                    Mode::Full,
                ),
                &script,
            );
            assert_eq!(open.matches("SECRET").count(), secrets.len() + 2, "{open}");
            let mut protection = Protection::default();
            protection.agent_dirs = vec![state.clone()];
            protection.mask = vec![extra.clone()];
            let masked = engine_with_protection(&home, protection.clone());
            for mode in CONFINED {
                let (exit, output) = run_in(&session(&masked, ws.path(), mode), &script);
                assert_eq!(
                    (exit, output.as_str()),
                    (Exit::Code(0), "public\npublic\npublic\ndone\n"),
                    "{mode}"
                );
            }
            // --allow-read unmasks one (and what is under it).
            protection.allow_read = vec![home.join(".aws"), home.join(".ssh/id_rsa")];
            let allowed = engine_with_protection(&home, protection);
            for mode in CONFINED {
                let (_, output) = run_in(
                    &session(&allowed, ws.path(), mode),
                    "cat ~/.aws/credentials ~/.ssh/id_rsa ~/.ssh/id_ed25519 ~/.netrc; echo done",
                );
                assert_eq!(output, "SECRET\nSECRET\ndone\n", "{mode}");
            }
        },
    );
}
