//! The same layers for an agent that is not root: the test binary runs these again as `nobody`
//! (`as_root_and_nobody`), where the namespaces come with a user namespace mapping that user's
//! id to itself. And a sandbox step that fails reaches the agent as a typed error.
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;

use crate::support::sandbox::{
    as_root_and_nobody, marker, processes_with, require_namespaces, spawn_with, try_spawn,
    wait_for_file, wait_until_gone,
};
use acp_bash::sandbox::{Mode, Step, StepError, Support};

fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("acpbash-nobody-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

#[test]
fn every_layer_works_for_root_and_for_an_ordinary_user() {
    as_root_and_nobody(
        "sandbox::unprivileged::every_layer_works_for_root_and_for_an_ordinary_user",
        || {
            if !require_namespaces() {
                return;
            }
            let uid = unsafe { libc::geteuid() };
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
until grep -qs "^$P-setsid" /proc/[0-9]*/cmdline; do sleep 0.01; done
echo ready > {ready}"#,
                outside = outside.path().display(),
                ready = ws.path().join("ready").display(),
            );
            let (status, output) =
                spawn_with(&script, Mode::Workspace, ws.path(), Support::current()).finish();
            assert!(status.success(), "{output}");
            assert_eq!(
                output,
                format!("{uid}\n2\nwrote-inside\ndenied-outside\n0\n")
            );
            wait_for_file(&ws.path().join("ready"));
            wait_until_gone(&mark);
            assert!(processes_with(&mark).is_empty());
            assert!(!outside.path().join("f").exists());
        },
    );
}

#[test]
fn read_only_mode_has_no_network_for_root_and_for_an_ordinary_user() {
    as_root_and_nobody(
        "sandbox::unprivileged::read_only_mode_has_no_network_for_root_and_for_an_ordinary_user",
        || {
            if !require_namespaces() {
                return;
            }
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let ws = open_dir();
            let script =
                format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected || echo refused");
            let (_, output) =
                spawn_with(&script, Mode::ReadOnly, ws.path(), Support::current()).finish();
            assert!(output.ends_with("refused\n"), "{output}");
            listener.set_nonblocking(true).unwrap();
            assert!(listener.accept().is_err());
        },
    );
}

#[test]
fn a_sandbox_step_that_fails_is_a_typed_error_naming_the_step_and_errno() {
    let support = Support::current();
    if !require_namespaces()
        || !crate::support::skip::skip_unless(
            "read-only filesystem view",
            support.filesystem_view.clone(),
        )
    {
        return;
    }
    // A session folder that is gone by the time the view binds it writable.
    let ws = open_dir();
    let gone = ws.path().join("gone");
    let error = match try_spawn("echo ran", Mode::Workspace, &gone, support) {
        Ok(_) => panic!("the command ran"),
        Err(error) => error,
    };
    let step = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<StepError>())
        .copied()
        .expect("a StepError");
    assert_eq!((step.step, step.errno), (Step::WritablePlace, libc::ENOENT));
    // The platform-neutral question the engine asks (it shows this text, exit 126), and not
    // for an error that merely has the same kind (a program that is not there: 127).
    assert!(acp_bash::sandbox::is_setup_failure(&error));
    assert!(!acp_bash::sandbox::is_setup_failure(&std::io::Error::from(
        std::io::ErrorKind::NotFound
    )));
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    let text = error.to_string();
    assert!(
        text.starts_with("acp-bash sandbox: binding a writable folder failed: No such file or directory (errno 2)")
            && text.contains("the command did not run")
            && text.contains("acp-bash doctor"),
        "{text}"
    );
}
