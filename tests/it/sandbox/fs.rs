//! Landlock filesystem rules: what each mode lets a command write.
#![cfg(target_os = "linux")]

use crate::support::sandbox::as_root_and_nobody;
use std::path::Path;

use crate::support::sandbox::{spawn, spawn_with};
use acp_bash::sandbox::{Mode, Support};

/// A workspace and an "outside" folder, both outside the temp dir (which is always writable).
fn dirs() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let base = tempfile::Builder::new()
        .prefix("acpbash-fs-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let workspace = base.path().join("workspace");
    let outside = base.path().join("outside");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("existing"), "keep\n").unwrap();
    (base, workspace, outside)
}

fn landlock() -> bool {
    let landlock = Support::current().landlock.clone().map(|_| ());
    crate::support::skip_unless("Landlock filesystem rules", landlock)
}

fn run(script: &str, mode: Mode, workspace: &Path) -> (i32, String) {
    let (status, output) = spawn(script, mode, workspace).finish();
    (status.code().unwrap_or(-1), output)
}

#[test]
fn workspace_mode_writes_inside_and_is_denied_outside() {
    as_root_and_nobody(
        "sandbox::fs::workspace_mode_writes_inside_and_is_denied_outside",
        || {
            if !landlock() {
                return;
            }
            let (_base, ws, out) = dirs();
            let tmp = tempfile::tempdir().unwrap();
            let script = format!(
                "set -e; echo a > inside; mkdir sub; mv inside sub/moved; echo b > {tmp}/t; \
             echo to-null > /dev/null; echo to-stderr > /dev/stderr; \
             cat <(echo from-procsub) > >(cat > procsub.out); echo done",
                tmp = tmp.path().display()
            );
            let (code, output) = run(&script, Mode::Workspace, &ws);
            assert_eq!((code, output.as_str()), (0, "to-stderr\ndone\n"));
            // Process substitution writes through /dev/fd (a pipe), which Landlock leaves alone.
            // A poll on the condition; the deadline is only a hang guard.
            let start = std::time::Instant::now();
            while std::fs::read_to_string(ws.join("procsub.out")).unwrap_or_default()
                != "from-procsub\n"
            {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(60),
                    "process substitution failed"
                );
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            assert!(ws.join("sub/moved").exists());
            assert!(tmp.path().join("t").exists());

            for attempt in [
                format!("echo x > {}/new", out.display()),
                format!("echo x >> {}/existing", out.display()),
                format!(": > {}/existing", out.display()),
                format!("rm {}/existing", out.display()),
                format!("mkdir {}/d", out.display()),
                format!("ln -s /etc/passwd {}/link", out.display()),
                format!("mv {}/existing ./stolen", out.display()),
                format!("touch {}/../escape", ws.display()),
            ] {
                let (code, output) = run(&attempt, Mode::Workspace, &ws);
                assert_ne!(code, 0, "{attempt} succeeded: {output}");
                assert!(
                    output.contains("Permission denied")
                        || output.contains("Operation not permitted")
                        || output.contains("Read-only file system"),
                    "{attempt}: {output}"
                );
            }
            assert_eq!(
                std::fs::read_to_string(out.join("existing")).unwrap(),
                "keep\n"
            );
            let left: Vec<_> = std::fs::read_dir(&out)
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(left, vec![std::ffi::OsString::from("existing")]);
        },
    );
}

#[test]
fn read_only_mode_denies_the_workspace_but_not_the_temp_dir() {
    as_root_and_nobody(
        "sandbox::fs::read_only_mode_denies_the_workspace_but_not_the_temp_dir",
        || {
            if !landlock() {
                return;
            }
            let (_base, ws, _out) = dirs();
            std::fs::write(ws.join("file"), "orig\n").unwrap();
            let (code, output) = run("echo x > new", Mode::ReadOnly, &ws);
            assert_ne!(code, 0);
            assert!(output.contains("Read-only file system"), "{output}");
            let (code, _) = run("echo x >> file", Mode::ReadOnly, &ws);
            assert_ne!(code, 0);
            assert_eq!(std::fs::read_to_string(ws.join("file")).unwrap(), "orig\n");

            // The temp dir is a private one: writable, empty, gone with the command.
            let tmp = tempfile::tempdir().unwrap();
            let script = format!(
                "ls -A {}; echo ok > {}/t && cat {}/t && cat file",
                std::env::temp_dir().display(),
                tmp.path().display(),
                tmp.path().display()
            );
            let (code, output) = run(&script, Mode::ReadOnly, &ws);
            assert_eq!(
                (code, output.as_str()),
                (
                    1,
                    format!(
                        "/bin/bash: line 1: {}/t: No such file or directory\n",
                        tmp.path().display()
                    )
                    .as_str()
                ),
                "a host temp folder is not there"
            );
            let (code, output) = run(
                &format!(
                    "mkdir -p {0} && echo ok > {0}/t && cat {0}/t && cat file",
                    tmp.path().display()
                ),
                Mode::ReadOnly,
                &ws,
            );
            assert_eq!((code, output.as_str()), (0, "ok\norig\n"));
            assert!(
                !tmp.path().join("t").exists(),
                "the host's temp dir is untouched"
            );
        },
    );
}

#[test]
fn full_mode_writes_anywhere() {
    as_root_and_nobody("sandbox::fs::full_mode_writes_anywhere", || {
        let (_base, ws, out) = dirs();
        let (code, output) = run(&format!("echo x > {}/new", out.display()), Mode::Full, &ws);
        assert_eq!(code, 0, "{output}");
        assert!(out.join("new").exists());
    });
}

#[test]
fn landlock_without_namespaces_still_confines_writes() {
    as_root_and_nobody(
        "sandbox::fs::landlock_without_namespaces_still_confines_writes",
        || {
            if !landlock() {
                return;
            }
            let (_base, ws, out) = dirs();
            let mut support = Support::current().clone();
            support.namespaces = Err("test: namespaces off".into());
            support.private_proc = Err("test".into());
            support.network_namespace = Err("test".into());
            let script = format!("echo in > inside; echo x > {}/new", out.display());
            let (status, output) = spawn_with(&script, Mode::Workspace, &ws, &support).finish();
            assert_eq!(status.code(), Some(1), "{output}");
            assert!(ws.join("inside").exists());
            assert!(!out.join("new").exists());
        },
    );
}

#[test]
fn switching_modes_changes_what_the_next_command_may_do() {
    as_root_and_nobody(
        "sandbox::fs::switching_modes_changes_what_the_next_command_may_do",
        || {
            if !landlock() {
                return;
            }
            let (_base, ws, _out) = dirs();
            assert_ne!(run("echo 1 > f", Mode::ReadOnly, &ws).0, 0);
            assert_eq!(run("echo 2 > f", Mode::Workspace, &ws).0, 0);
            assert_ne!(run("echo 3 > f", Mode::ReadOnly, &ws).0, 0);
            assert_eq!(std::fs::read_to_string(ws.join("f")).unwrap(), "2\n");
        },
    );
}
