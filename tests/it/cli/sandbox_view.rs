//! The view of sandbox v3 through the built binary, as a user runs it (`acp-bash run --sandbox
//! MODE -- SCRIPT`, which starts `acp-bash serve` over pipes), as root and as `nobody`: no host
//! terminal (ptys still work), no host daemon's socket, Git metadata read-only, credential files
//! masked (with `--allow-read`, `--mask` and `--allow-git-hooks-and-config-writes`).
#![cfg(target_os = "linux")]

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Output};

use crate::support::acp::binary;
use crate::support::sandbox::{as_root_and_nobody, marker, require_namespaces};

/// A folder of this process's user outside the temp dir (which the view replaces).
fn dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("acpbash-cli-view-{tag}-"))
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// `acp-bash [flags] run --sandbox MODE -- SCRIPT` in `cwd` with `HOME=home`.
fn acp_run(cwd: &Path, home: &Path, mode: &str, flags: &[&str], script: &str) -> Output {
    Command::new(binary())
        .args(flags)
        .args(["--sandbox", mode, "run", "--", script])
        .current_dir(cwd)
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .output()
        .expect("run acp-bash")
}

/// What the command printed: `acp-bash run`'s stdout, which carries the command's bytes only
/// (the mode's own notices, where a layer these tests do not check is missing, go to stderr).
fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Whether doctor says package caches are copy-on-write here (Linux 5.11+: overlayfs in a
/// user namespace); where it says they are missing (Debian 11's 5.10), the tests of that layer
/// record a skip that quotes doctor instead of failing on a layer doctor already says is missing.
fn caches_are_copy_on_write() -> bool {
    let doctor = Command::new(binary()).arg("doctor").output().unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout).into_owned();
    let line = report
        .lines()
        .find(|l| l.contains("package caches copy-on-write"))
        .unwrap_or("doctor names no package-cache layer")
        .trim()
        .to_string();
    let works = match line.starts_with("[works]") {
        true => Ok(()),
        false => Err(line),
    };
    crate::support::skip::skip_unless("package caches copy-on-write", works)
}

/// Whether the served binary gives this user's commands their own mount namespace. As an
/// ordinary user it does not yet on this branch (issue 19 point 1: `serve` turns non-dumpable
/// before it probes; fixed by the process-state work): the test then records a skip that says
/// so, and runs in full once that fix is in.
fn served_commands_get_a_view(cwd: &Path) -> bool {
    if !require_namespaces() {
        return false;
    }
    let own = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    let output = acp_run(cwd, cwd, "workspace", &[], "readlink /proc/self/ns/mnt");
    let theirs = stdout(&output);
    if theirs.trim() == own.to_string_lossy() || !output.status.success() {
        let line = format!(
            "{}: the served binary's commands share this process's mount namespace (issue 19 \
             point 1, the non-dumpable serve; helper A's branch): {}",
            std::thread::current().name().unwrap_or("a cli view test"),
            theirs.trim()
        );
        eprintln!("skipping {line}");
        crate::support::skip::record(&line);
        return false;
    }
    true
}

#[test]
fn a_run_command_sees_no_host_terminal_and_still_makes_ptys() {
    as_root_and_nobody(
        "cli::sandbox_view::a_run_command_sees_no_host_terminal_and_still_makes_ptys",
        || {
            let ws = dir("dev");
            if !served_commands_get_a_view(ws.path()) {
                return;
            }
            let host_pty = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/ptmx")
                .unwrap();
            let mut number: libc::c_uint = 0;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&host_pty);
            assert_eq!(unsafe { libc::ioctl(fd, libc::TIOCGPTN, &mut number) }, 0);
            let script = format!(
                "echo $(ls /dev); ls /dev/pts; [ -e /dev/pts/{number} ] && echo host pty; \
                 python3 -c 'import os, pty; m, s = pty.openpty(); print(os.ttyname(s))'"
            );
            for mode in ["workspace", "read-only"] {
                let output = acp_run(ws.path(), ws.path(), mode, &[], &script);
                assert_eq!(
                    stdout(&output),
                    "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero\n\
                     ptmx\n/dev/pts/0\n",
                    "{mode}: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        },
    );
}

#[test]
fn a_run_command_reaches_no_socket_a_host_process_listens_on() {
    as_root_and_nobody(
        "cli::sandbox_view::a_run_command_reaches_no_socket_a_host_process_listens_on",
        || {
            let ws = dir("sock");
            if !served_commands_get_a_view(ws.path()) {
                return;
            }
            let tag = marker("clisock");
            let temp = tempfile::Builder::new()
                .prefix("acpbash-clisock-")
                .tempdir()
                .unwrap();
            let path = temp.path().join("host.sock");
            let in_temp = UnixListener::bind(&path).unwrap();
            in_temp.set_nonblocking(true).unwrap();
            let name = format!("{tag}-abstract");
            let in_abstract = {
                use std::os::linux::net::SocketAddrExt;
                let addr =
                    std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
                UnixListener::bind_addr(&addr).unwrap()
            };
            in_abstract.set_nonblocking(true).unwrap();
            let script = format!(
                r#"python3 -c '
import socket
for a in ["{path}", "\0{name}"]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(a); print("connected")
    except OSError as e:
        print(type(e).__name__)
'"#,
                path = path.display()
            );
            let open = acp_run(ws.path(), ws.path(), "full", &[], &script);
            assert_eq!(stdout(&open), "connected\nconnected\n");
            in_temp.accept().unwrap();
            in_abstract.accept().unwrap();
            for mode in ["workspace", "read-only"] {
                let output = acp_run(ws.path(), ws.path(), mode, &[], &script);
                let text = stdout(&output);
                assert_eq!(text.lines().count(), 2, "{mode}: {text}");
                assert!(!text.contains("connected"), "{mode}: {text}");
                assert!(in_temp.accept().is_err() && in_abstract.accept().is_err());
            }
        },
    );
}

#[test]
fn a_run_command_cannot_plant_git_hooks_or_config_unless_allowed() {
    as_root_and_nobody(
        "cli::sandbox_view::a_run_command_cannot_plant_git_hooks_or_config_unless_allowed",
        || {
            let ws = dir("git");
            if !served_commands_get_a_view(ws.path()) {
                return;
            }
            let git = "git -c user.name=t -c user.email=t@example.com";
            let setup =
                format!("git init -q -b main && echo a > a && git add a && {git} commit -qm one");
            let made = acp_run(ws.path(), ws.path(), "full", &[], &setup);
            assert!(made.status.success());
            let config = std::fs::read(ws.path().join(".git/config")).unwrap();
            let daily = format!(
                "echo b > b && git add b && {git} commit -qm two && git checkout -qb topic && echo ok"
            );
            let output = acp_run(ws.path(), ws.path(), "workspace", &[], &daily);
            assert_eq!(stdout(&output), "ok\n");
            for attack in [
                "echo 'touch /tmp/pwned' > .git/hooks/pre-commit",
                "git config core.pager 'touch /tmp/pwned'",
                "mv .git .git.old",
            ] {
                let output = acp_run(ws.path(), ws.path(), "workspace", &[], attack);
                assert!(!output.status.success(), "{attack}: {}", stdout(&output));
            }
            assert_eq!(
                std::fs::read(ws.path().join(".git/config")).unwrap(),
                config
            );
            assert!(!ws.path().join(".git/hooks/pre-commit").exists());
            let allowed = acp_run(
                ws.path(),
                ws.path(),
                "workspace",
                &["--allow-git-hooks-and-config-writes"],
                "echo '#!/bin/sh' > .git/hooks/pre-commit && git config core.pager cat && echo written",
            );
            assert_eq!(stdout(&allowed), "written\n");
        },
    );
}

#[test]
fn a_run_command_reads_no_credential_file_unless_allowed() {
    as_root_and_nobody(
        "cli::sandbox_view::a_run_command_reads_no_credential_file_unless_allowed",
        || {
            let ws = dir("creds");
            if !served_commands_get_a_view(ws.path()) {
                return;
            }
            let home = ws.path().join("home");
            for (rel, text) in [
                (".aws/credentials", "aws-SECRET"),
                (".ssh/id_rsa", "ssh-SECRET"),
                (".ssh/known_hosts", "public"),
                (".netrc", "netrc-SECRET"),
                (".config/gh/hosts.yml", "gh-SECRET"),
                (".docker/config.json", "docker-SECRET"),
                (".local/state/acp-bash/sessions/other.json", "store-SECRET"),
                ("notes.txt", "notes-SECRET"),
            ] {
                let path = home.join(rel);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, format!("{text}\n")).unwrap();
            }
            let script = "cat ~/.aws/credentials ~/.ssh/id_rsa ~/.ssh/known_hosts ~/.netrc \
                          ~/.config/gh/hosts.yml ~/.docker/config.json \
                          ~/.local/state/acp-bash/sessions/other.json ~/notes.txt 2>/dev/null; \
                          echo done";
            let open = acp_run(ws.path(), &home, "full", &[], script);
            assert_eq!(
                stdout(&open).matches("SECRET").count(),
                7,
                "{}",
                stdout(&open)
            );
            let notes = home.join("notes.txt");
            let notes = notes.to_str().unwrap();
            for mode in ["workspace", "read-only"] {
                let output = acp_run(ws.path(), &home, mode, &["--mask", notes], script);
                assert_eq!(stdout(&output), "public\ndone\n", "{mode}");
                let aws = home.join(".aws");
                let allowed = acp_run(
                    ws.path(),
                    &home,
                    mode,
                    &["--allow-read", aws.to_str().unwrap()],
                    script,
                );
                assert_eq!(
                    stdout(&allowed),
                    "aws-SECRET\npublic\nnotes-SECRET\ndone\n",
                    "{mode}"
                );
            }
        },
    );
}

/// A session folder inside the temp dir (which the view replaces, keeping the session folder):
/// a `--mask` of a file or folder in it holds as anywhere else. It used to be skipped as
/// "inside a replaced temp dir", so the file stayed readable.
#[test]
fn a_mask_inside_a_session_folder_under_the_temp_dir_holds() {
    as_root_and_nobody(
        "cli::sandbox_view::a_mask_inside_a_session_folder_under_the_temp_dir_holds",
        || {
            let ws = tempfile::Builder::new()
                .prefix("acpbash-cli-view-tmpmask-")
                .tempdir()
                .unwrap();
            if !served_commands_get_a_view(ws.path()) {
                return;
            }
            let secret = ws.path().join("credentials");
            std::fs::write(&secret, "file-SECRET\n").unwrap();
            let folder = ws.path().join("keys");
            std::fs::create_dir(&folder).unwrap();
            std::fs::write(folder.join("id"), "dir-SECRET\n").unwrap();
            std::fs::write(ws.path().join("notes"), "public\n").unwrap();
            let script = "cat credentials keys/id notes 2>/dev/null; echo done";
            let open = acp_run(ws.path(), ws.path(), "workspace", &[], script);
            assert_eq!(stdout(&open), "file-SECRET\ndir-SECRET\npublic\ndone\n");
            let masks = [
                "--mask",
                secret.to_str().unwrap(),
                "--mask",
                folder.to_str().unwrap(),
            ];
            for mode in ["workspace", "read-only"] {
                let output = acp_run(ws.path(), ws.path(), mode, &masks, script);
                assert_eq!(stdout(&output), "public\ndone\n", "{mode}");
            }
        },
    );
}

#[test]
fn doctor_lists_what_is_masked_on_this_machine_with_the_flags_given() {
    let ws = dir("doctor");
    let home = ws.path().join("home");
    for rel in [
        ".aws/credentials",
        ".ssh/id_ed25519",
        ".ssh/known_hosts",
        ".netrc",
    ] {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "x").unwrap();
    }
    let extra = ws.path().join("extra");
    std::fs::write(&extra, "x").unwrap();
    let doctor = |flags: &[&str]| {
        let output = Command::new(binary())
            .args(flags)
            .arg("doctor")
            .env("HOME", &home)
            .env_remove("XDG_STATE_HOME")
            .output()
            .expect("run acp-bash doctor");
        stdout(&output)
    };
    let shown = |path: &Path| format!("  {} (", path.display());
    let text = doctor(&["--mask", extra.to_str().unwrap()]);
    assert!(
        text.contains("Masked from workspace and read-only commands here"),
        "{text}"
    );
    for path in [
        home.join(".aws"),
        home.join(".ssh/id_ed25519"),
        home.join(".netrc"),
        extra,
    ] {
        assert!(text.contains(&shown(&path)), "{}: {text}", path.display());
    }
    assert!(
        !text.contains(&shown(&home.join(".ssh/known_hosts"))),
        "{text}"
    );
    assert!(text.contains("Git metadata in workspace mode: .git/hooks and .git/config read-only"));
    let aws = home.join(".aws");
    let allowed = doctor(&[
        "--allow-read",
        aws.to_str().unwrap(),
        "--allow-git-hooks-and-config-writes",
    ]);
    assert!(!allowed.contains(&shown(&aws)), "{allowed}");
    assert!(
        allowed.contains("Git metadata in workspace mode: writable"),
        "{allowed}"
    );
}

#[test]
fn a_run_command_writes_into_the_cargo_registry_and_the_host_keeps_its_own() {
    as_root_and_nobody(
        "cli::sandbox_view::a_run_command_writes_into_the_cargo_registry_and_the_host_keeps_its_own",
        || {
            let ws = dir("caches");
            if !served_commands_get_a_view(ws.path()) || !caches_are_copy_on_write() {
                return;
            }
            let home = dir("caches-home");
            let registry = home.path().join(".cargo/registry");
            std::fs::create_dir_all(&registry).unwrap();
            std::fs::write(registry.join("crate.txt"), "orig\n").unwrap();
            let output = acp_run(
                ws.path(),
                home.path(),
                "workspace",
                &[],
                "echo new > ~/.cargo/registry/x && echo more >> ~/.cargo/registry/crate.txt && \
                 cat ~/.cargo/registry/x ~/.cargo/registry/crate.txt",
            );
            let text = stdout(&output);
            assert!(
                output.status.success() && text.contains("new\norig\nmore\n"),
                "{text}{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let names: Vec<_> = std::fs::read_dir(&registry)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, ["crate.txt"]);
            assert_eq!(
                std::fs::read_to_string(registry.join("crate.txt")).unwrap(),
                "orig\n"
            );
            // doctor names the layer and says it works here.
            let doctor = Command::new(binary())
                .arg("doctor")
                .env("HOME", home.path())
                .output()
                .unwrap();
            let report = stdout(&doctor);
            assert!(
                report.contains("[works]   package caches copy-on-write"),
                "{report}"
            );
        },
    );
}

/// The console block of `script` run in `session` through `c` (a served agent, plain client).
async fn served(
    c: &mut acp_bash::acp::client::Conversation,
    session: &agent_client_protocol::v1::schema::SessionId,
    script: &str,
) -> agent_client_protocol::Result<String> {
    let turn = c.prompt(session, script).await?;
    Ok(crate::support::acp::console_block(&turn.updates))
}

#[test]
fn a_served_session_keeps_its_cache_writes_for_itself_and_no_link_reaches_the_host() {
    as_root_and_nobody(
        "cli::sandbox_view::a_served_session_keeps_its_cache_writes_for_itself_and_no_link_reaches_the_host",
        || {
            let ws = dir("served-caches");
            if !served_commands_get_a_view(ws.path()) || !caches_are_copy_on_write() {
                return;
            }
            let home = dir("served-caches-home");
            let target = dir("served-caches-target");
            let registry = home.path().join(".cargo/registry");
            std::fs::create_dir_all(&registry).unwrap();
            std::fs::write(registry.join("crate.txt"), "orig\n").unwrap();
            std::fs::write(target.path().join("keep"), "keep\n").unwrap();
            let client = acp_bash::acp::client::AcpClient::new(
                binary(),
                ["serve", "--sandbox", "workspace", "--no-history", "--log-level", "warn"],
            )
            .profile(acp_bash::acp::client::ClientProfile::Plain)
            .env("HOME", home.path().to_str().unwrap());
            let cwd = ws.path().to_path_buf();
            let link = format!("ln -s {} ~/.cargo/registry/link && echo linked", target.path().display());
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let (blocks, _) = runtime.block_on(crate::support::acp::converse_with(
                client,
                "a served session's package caches",
                async move |mut c| {
                    let first = c.new_session(&cwd).await?;
                    let mut blocks = vec![
                        served(&mut c, &first, "echo new > ~/.cargo/registry/x && echo more >> ~/.cargo/registry/crate.txt && echo written").await?,
                        served(&mut c, &first, "cat ~/.cargo/registry/x ~/.cargo/registry/crate.txt").await?,
                        served(&mut c, &first, &link).await?,
                        served(&mut c, &first, "{ echo planted > ~/.cargo/registry/link/planted; } 2>/dev/null || echo refused").await?,
                    ];
                    let second = c.new_session(&cwd).await?;
                    blocks.push(served(&mut c, &second, "ls ~/.cargo/registry; cat ~/.cargo/registry/crate.txt").await?);
                    Ok(blocks)
                },
            ));
            let expect = [
                "written\n",
                "new\norig\nmore\n",
                "linked\n",
                "refused\n",
                "crate.txt\norig\n",
            ];
            for (block, want) in blocks.iter().zip(expect) {
                assert!(block.contains(want), "{want:?} not in {block}\n{blocks:#?}");
            }
            let names: Vec<_> = std::fs::read_dir(&registry)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, ["crate.txt"]);
            assert_eq!(std::fs::read_to_string(registry.join("crate.txt")).unwrap(), "orig\n");
            let planted: Vec<_> = std::fs::read_dir(target.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(planted, ["keep"]);
        },
    );
}
