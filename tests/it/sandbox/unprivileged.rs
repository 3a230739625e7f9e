//! The same layers for an agent that is not root: the namespaces come with a user namespace
//! (our uid mapped to itself). Runs the command as `nobody` through `Command::uid`, which std
//! applies before the sandbox's pre-exec step, exactly as if the agent ran as that user.
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;

use crate::support::sandbox::{marker, processes_with, spawn_with, wait_for_file, wait_until_gone};
use acp_bash::sandbox::{Mode, Support};

const NOBODY: u32 = 65534;

fn as_root_with_user_namespaces() -> bool {
    use crate::support::skip::{root, skip_unless, ROOT, UNPRIVILEGED_USER_NAMESPACES};
    if !skip_unless(ROOT, root()) {
        return false;
    }
    // Probe as nobody: can this machine give an unprivileged user a PID namespace?
    let dir = open_dir();
    let (status, output) = spawn_with(
        "echo $$",
        Mode::Full,
        dir.path(),
        Support::current(),
        as_nobody,
    )
    .finish();
    let works = if status.success() && output == "2\n" {
        Ok(())
    } else {
        Err(format!("a PID namespace as nobody failed: {output}"))
    };
    if !skip_unless(UNPRIVILEGED_USER_NAMESPACES, works) {
        return false;
    }
    eprintln!("running as nobody in a user namespace");
    true
}

fn as_nobody(cmd: &mut std::process::Command) {
    cmd.uid(NOBODY).gid(NOBODY);
    // A process that dropped root is marked non-dumpable, which makes its /proc/self files
    // root's; an agent started as a normal user is dumpable. Be that agent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
            Ok(())
        });
    }
}

fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("acpbash-nobody-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

#[test]
fn a_non_root_agent_gets_every_layer() {
    if !as_root_with_user_namespaces() {
        return;
    }
    let ws = open_dir();
    let outside = open_dir();
    let mark = marker("nobody");
    let (head, rest) = mark.split_at(4);
    let script = format!(
        r#"id -u; echo $$
echo in > inside && echo wrote-inside
{{ echo x > {outside}/f; }} 2>/dev/null || echo denied-outside
cat /proc/1/environ 2>/dev/null | tr -d '\0' | wc -c
P={head}; P="${{P}}{rest}"
setsid bash -c "exec -a $P-setsid sleep 1000" &
until grep -q "$P-setsid" /proc/[0-9]*/cmdline 2>/dev/null; do sleep 0.01; done
echo ready > {ready}"#,
        outside = outside.path().display(),
        ready = ws.path().join("ready").display(),
    );
    let (status, output) = spawn_with(
        &script,
        Mode::Workspace,
        ws.path(),
        Support::current(),
        as_nobody,
    )
    .finish();
    assert!(status.success(), "{output}");
    assert_eq!(output, "65534\n2\nwrote-inside\ndenied-outside\n0\n");
    wait_for_file(&ws.path().join("ready"));
    wait_until_gone(&mark);
    assert!(processes_with(&mark).is_empty());
    assert!(!outside.path().join("f").exists());
}

#[test]
fn read_only_mode_for_a_non_root_agent_has_no_network() {
    if !as_root_with_user_namespaces() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let ws = open_dir();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected || echo refused");
    let (_, output) = spawn_with(
        &script,
        Mode::ReadOnly,
        ws.path(),
        Support::current(),
        as_nobody,
    )
    .finish();
    assert!(output.ends_with("refused\n"), "{output}");
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err());
}

#[test]
fn a_sandbox_step_that_fails_at_run_time_says_which_and_why() {
    use crate::support::skip::{root, skip_unless, ROOT};
    if !skip_unless(ROOT, root())
        || !skip_unless(
            "PID + mount namespaces",
            Support::current().namespaces.clone(),
        )
    {
        return;
    }
    // Dropping root without restoring dumpability leaves /proc/self owned by root, so the
    // user-namespace setup fails: the command must not run, and the output must say why.
    let ws = open_dir();
    let (status, output) = spawn_with(
        "echo ran",
        Mode::Workspace,
        ws.path(),
        Support::current(),
        |cmd| {
            cmd.uid(NOBODY).gid(NOBODY);
        },
    )
    .finish();
    assert_eq!(status.code(), Some(126), "{output}");
    assert!(!output.contains("ran"), "{output}");
    assert!(
        output.starts_with(
            "acp-bash sandbox: writing /proc/self/setgroups failed: permission denied (EACCES)"
        ),
        "{output}"
    );
    assert!(
        output.contains("the command did not run") && output.contains("acp-bash doctor"),
        "{output}"
    );
}
