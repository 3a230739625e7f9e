//! Root in a user namespace that maps only part of the ids, as in rootless podman or docker
//! (65,537 ids), LXD or a Kubernetes user namespace (issue 44, point 5). The agent used to write
//! `0 0 4294967295` into each command's `uid_map`, which such a namespace refuses (EPERM); the
//! command's first process then waited forever on a pipe whose write end it still held, so
//! `doctor` and every command hung. Now the agent maps the ids its own namespace has, and any
//! failure ends in a message. The test sets up the namespace itself (a holder process in a new
//! user namespace whose maps the test writes, `nsenter` to join it) and drives the BUILT binary
//! as a client starts it, under a guard: a hang fails the test instead of hanging it.
#![cfg(target_os = "linux")]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use acp_bash::acp::client::{AcpClient, ClientProfile};

use crate::support::acp::{binary, console_block, converse_with, hang_guard};
use crate::support::sandbox::require_namespaces;
use crate::support::skip::{root, skip_unless, ROOT};

/// How many ids the namespace maps (rootless podman's 65,536 sub-ids, plus nothing more).
const IDS: u32 = 65536;

/// A process in a new user namespace that maps ids `0..IDS` to the same ids outside (the
/// namespace lives as long as it does; killed on drop).
struct Partial(Child);

impl Partial {
    fn new() -> Partial {
        let mut holder = Command::new("/bin/cat");
        holder.stdin(Stdio::piped()).stdout(Stdio::null());
        // SAFETY: one system call between fork and exec.
        unsafe {
            holder.pre_exec(|| {
                if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // `spawn` returns once `cat` has exec'd, so after the unshare.
        let holder = Partial(holder.spawn().expect("a process in a new user namespace"));
        let map = format!("0 0 {IDS}\n");
        for file in ["uid_map", "gid_map"] {
            std::fs::write(format!("/proc/{}/{file}", holder.0.id()), &map)
                .unwrap_or_else(|e| panic!("write the holder's {file}: {e}"));
        }
        holder
    }

    /// `program args` run as root inside the namespace.
    fn command(&self) -> (String, Vec<String>) {
        (
            "nsenter".to_string(),
            vec![format!("--user=/proc/{}/ns/user", self.0.id()), "--".into()],
        )
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ready() -> bool {
    skip_unless(ROOT, root()) && require_namespaces()
}

/// `doctor` answers, and finds the user namespace working: each probe's namespace got the ids
/// this one has.
#[test]
fn doctor_answers_as_root_in_a_partly_mapped_user_namespace() {
    if !ready() {
        return;
    }
    let partial = Partial::new();
    let (program, mut args) = partial.command();
    args.push(binary().to_string_lossy().into_owned());
    args.push("doctor".into());
    let mut doctor = Command::new(program)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nsenter");
    let pid = doctor.id();
    let (mut stdout, mut stderr) = (doctor.stdout.take().unwrap(), doctor.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut out, mut err) = (String::new(), String::new());
        let errors = std::thread::spawn(move || {
            let _ = stderr.read_to_string(&mut err);
            err
        });
        let _ = stdout.read_to_string(&mut out);
        let status = doctor.wait();
        let _ = tx.send((status, out, errors.join().unwrap_or_default()));
    });
    // The guard: doctor probes every layer, a few seconds on a loaded machine.
    let guard = hang_guard() * 3;
    let Ok((status, out, err)) = rx.recv_timeout(guard) else {
        // SAFETY: killing the process this test started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        panic!("`acp-bash doctor` as root in a user namespace mapping {IDS} ids: no answer after {guard:?}: it hangs");
    };
    let status = status.expect("wait for doctor");
    assert!(
        out.lines()
            .any(|l| l.starts_with("  [works]   user namespace")),
        "doctor in a user namespace mapping {IDS} ids ({status}): the user namespace does not \
         work:\n{out}\n{err}"
    );
}

/// A served command runs, in a user namespace of its own that maps exactly the ids the
/// agent's namespace has, each to itself.
#[test]
fn a_served_command_runs_as_root_in_a_partly_mapped_user_namespace() {
    if !ready() {
        return;
    }
    let partial = Partial::new();
    let (program, mut args) = partial.command();
    args.push(binary().to_string_lossy().into_owned());
    args.extend(
        [
            "serve",
            "--sandbox",
            "workspace",
            "--no-history",
            "--log-level",
            "warn",
        ]
        .map(String::from),
    );
    let ws = tempfile::Builder::new()
        .prefix("acpbash-partial-ids-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let cwd = ws.path().to_path_buf();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = AcpClient::new(program, args).profile(ClientProfile::Plain);
    let (output, _) = runtime.block_on(converse_with(
        client,
        "a served command as root in a partly mapped user namespace",
        async move |mut c| {
            let session = c.new_session(&cwd).await?;
            let turn = c
                .prompt(
                    &session,
                    "echo \"uid=$(id -u) map=$(cat /proc/self/uid_map | tr -s ' ')\"; \
                     readlink /proc/self/ns/user",
                )
                .await?;
            Ok(console_block(&turn.updates))
        },
    ));
    let outer = std::fs::read_link(format!("/proc/{}/ns/user", partial.0.id())).unwrap();
    assert!(
        output.contains(&format!("uid=0 map= 0 0 {IDS}")),
        "the command's ids are not the namespace's {IDS}, each mapped to itself:\n{output}"
    );
    assert!(
        !output.contains(&*outer.to_string_lossy()),
        "the command runs in the agent's user namespace, not one of its own:\n{output}"
    );
}

/// Rootless podman's root as it is: a partly mapped user namespace AND podman's default
/// capabilities, without CAP_SYS_ADMIN (dropped from the bounding set by `setpriv` before the
/// agent starts). Every mode's command runs: full mode's too (PID + mount namespaces without a
/// user namespace need CAP_SYS_ADMIN, so its commands get a user namespace like the others'),
/// and workspace mode's (the proxy's bridge needs a network namespace of the agent's own, which
/// root without CAP_SYS_ADMIN cannot make: the allowlist is then not enforced, as for an
/// ordinary user, rather than the command refused). Each runs in a PID namespace of its own.
#[test]
fn every_modes_command_runs_as_root_without_cap_sys_admin_in_a_partly_mapped_user_namespace() {
    if !ready() {
        return;
    }
    let partial = Partial::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ws = tempfile::Builder::new()
        .prefix("acpbash-partial-ids-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let agents_pid_ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
    for mode in ["full", "workspace", "read-only"] {
        let (program, mut args) = partial.command();
        args.extend(
            [
                "setpriv",
                "--bounding-set",
                "-sys_admin",
                "--inh-caps",
                "-sys_admin",
            ]
            .map(String::from),
        );
        args.push(binary().to_string_lossy().into_owned());
        args.extend(
            [
                "serve",
                "--sandbox",
                mode,
                "--no-history",
                "--log-level",
                "warn",
            ]
            .map(String::from),
        );
        let cwd = ws.path().to_path_buf();
        let client = AcpClient::new(program, args).profile(ClientProfile::Plain);
        let (output, _) = runtime.block_on(converse_with(
            client,
            "a served command as root without CAP_SYS_ADMIN in a partly mapped user namespace",
            async move |mut c| {
                let session = c.new_session(&cwd).await?;
                let turn = c
                    .prompt(
                        &session,
                        "echo \"ran uid=$(id -u)\"; readlink /proc/self/ns/pid",
                    )
                    .await?;
                Ok(console_block(&turn.updates))
            },
        ));
        assert!(
            output.contains("ran uid=0")
                && (!output.contains("[exit code:") || output.contains("[exit code: 0]")),
            "{mode} mode: the command did not run as root without CAP_SYS_ADMIN in a user \
             namespace mapping {IDS} ids:\n{output}"
        );
        assert!(
            !output.contains(&*agents_pid_ns.to_string_lossy()),
            "{mode} mode: the command shares the agent's PID namespace:\n{output}"
        );
    }
}
