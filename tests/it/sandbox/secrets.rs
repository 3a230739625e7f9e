//! A command cannot read another process's environment through /proc/<pid>/environ: not the
//! agent's (PID 1 of the namespace is a fork of it), not a sibling's, in any mode.
#![cfg(target_os = "linux")]

use std::process::{Command, Stdio};

use crate::support::sandbox::spawn;
use acp_bash::sandbox::{Mode, Support};

const SECRET: &str = "acpbash_secret_value_5d1f";

/// A process outside the sandbox with a secret in its environment (killed on drop).
struct Victim(std::process::Child);

impl Victim {
    fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn victim() -> Victim {
    Victim(
        Command::new("sleep")
            .arg("1000")
            .env("ACPBASH_TEST_SECRET", SECRET)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn script(victim: u32) -> String {
    format!(
        "cat /proc/1/environ /proc/{victim}/environ /proc/$PPID/environ 2>/dev/null | tr '\\0' '\\n'; \
         for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null; echo end"
    )
}

fn assert_hidden(output: &str) {
    assert!(output.ends_with("end\n"), "{output}");
    assert!(!output.contains(SECRET), "a secret leaked:\n{output}");
    // This test process's own environment (cargo sets these) must not leak via PID 1.
    assert!(
        !output.contains("CARGO_PKG_NAME"),
        "the agent's environment leaked:\n{output}"
    );
}

#[test]
fn no_other_environment_is_readable_in_any_mode() {
    crate::support::sandbox::as_root_and_nobody(
        "sandbox::secrets::no_other_environment_is_readable_in_any_mode",
        || {
            let support = Support::current();
            if !crate::support::skip_unless("private /proc", support.private_proc.clone()) {
                return;
            }
            let victim = victim();
            let dir = tempfile::tempdir().unwrap();
            for mode in Mode::ALL {
                let (status, output) = spawn(&script(victim.id()), mode, dir.path()).finish();
                assert!(status.success(), "{mode}");
                assert_hidden(&output);
                // The command's own (scrubbed) environment is still there.
                let (_, own) = spawn(
                    "cat /proc/self/environ | tr '\\0' '\\n' | grep ^PATH=",
                    mode,
                    dir.path(),
                )
                .finish();
                assert!(own.starts_with("PATH="), "{mode}: {own}");
            }
        },
    );
}

#[test]
fn without_a_private_proc_the_description_says_environments_are_readable() {
    let mut support = Support::current().clone();
    support.private_proc = Err("test: off".into());
    for mode in Mode::ALL {
        let line = acp_bash::sandbox::describe_with(mode, &support);
        assert!(
            line.contains("Not enforced on this machine") && line.contains("environments"),
            "{line}"
        );
    }
}
