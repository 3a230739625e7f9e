//! cgroup v2 limits (issue 44, point 3), through the built binary as a client starts it
//! (`acp-bash run`, which serves the agent over pipes): where doctor says `--max-processes` and
//! `--max-memory` are cgroup v2's (a delegated subtree: the systemd manager's scope, as root or
//! as a user with a user manager), a fork loop, a tree of memory hogs and a tmpfs fill stay under
//! them, and every folder the agent made is gone once it has ended, also by SIGTERM. Elsewhere
//! (cgroup v1, no delegation) the skip is recorded, and doctor says what each limit became.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::acp::binary;
use crate::support::sandbox::{as_root_and_nobody, require_namespaces, MEMORY_HOGS};
use crate::support::skip::{skip_unless, CGROUP_V2_DELEGATION};

/// A workspace outside the temp dir, that an ordinary user may enter.
fn workspace() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("acpbash-cgroup2-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// doctor's line for `layer` (`[works]   resource limits — …`).
fn doctor_line(report: &str, layer: &str) -> String {
    report
        .lines()
        .find(|l| l.contains(&format!("] {layer}")) || l.contains(&format!("]   {layer}")))
        .unwrap_or_else(|| panic!("doctor prints no {layer:?} layer:\n{report}"))
        .to_string()
}

/// Whether doctor says both limits are cgroup v2's here; `Err(what it says)` otherwise.
fn v2_limits(report: &str) -> Result<(), String> {
    let limits = doctor_line(report, "resource limits");
    let memory = doctor_line(report, "memory cgroup");
    if limits.contains("cgroup v2 pids.max") && memory.contains("cgroup v2 memory.max") {
        Ok(())
    } else {
        Err(format!("doctor says: {limits} / {memory}"))
    }
}

/// `acp-bash run` of `script` in `mode` with `limits`: its stdout.
fn run(mode: &str, limits: &[&str], script: &str) -> String {
    let ws = workspace();
    let output = Command::new(binary())
        .args(["--sandbox", mode, "run", "--plain"])
        .args(limits)
        .args(["--", script])
        .current_dir(ws.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    format!(
        "{}\n[stderr] {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The command's cgroup v2 folder, from the `0::/…` line it printed.
fn own_folder(output: &str) -> std::path::PathBuf {
    let line = output
        .lines()
        .find_map(|l| l.trim().strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup v2 line: {output}"));
    std::path::Path::new("/sys/fs/cgroup").join(line.trim_start_matches('/'))
}

const FORK_LOOP: &str = r#"cat /proc/self/cgroup
sh -c 'i=0; pids=; while [ $i -lt 300 ]; do sleep 1000 & pids="$pids $!"; i=$((i+1)); echo $i > ./forks; done; kill $pids'
echo "started $(cat ./forks) of 300 children""#;

#[test]
fn cgroup_v2_limits_hold_for_a_served_agents_commands() {
    as_root_and_nobody(
        "sandbox::cgroup_v2::cgroup_v2_limits_hold_for_a_served_agents_commands",
        || {
            if !require_namespaces() {
                return;
            }
            let doctor = Command::new(binary()).arg("doctor").output().unwrap();
            let report = String::from_utf8_lossy(&doctor.stdout).into_owned();
            if !skip_unless(CGROUP_V2_DELEGATION, v2_limits(&report)) {
                // What doctor says instead names what each limit became.
                let limits = doctor_line(&report, "resource limits");
                assert!(
                    limits.contains("cgroup v1") || limits.contains("RLIMIT_NPROC"),
                    "{limits}"
                );
                assert!(limits.contains("--max-memory:"), "{limits}");
                return;
            }
            // The fork loop: 300 asked, held under 64 (the agent's helpers count too).
            let output = run("workspace", &["--max-processes", "64"], FORK_LOOP);
            let started: u32 = output
                .lines()
                .find_map(|l| l.strip_prefix("started ")?.split(' ').next()?.parse().ok())
                .unwrap_or_else(|| panic!("{output}"));
            assert!((30..64).contains(&started), "{started} children: {output}");
            let folder = own_folder(&output);
            assert!(
                folder.ends_with("shell") && folder.to_string_lossy().contains("/run-"),
                "{output}"
            );
            assert!(!folder.exists(), "{} is left: {output}", folder.display());
            let scope = folder.parent().unwrap().parent().unwrap();
            assert!(!scope.join("agent").exists(), "{} is left", scope.display());
            // The hogs: over the tree's limit the kernel kills one (a tail), not the shell.
            for mode in ["workspace", "read-only"] {
                let output = run(mode, &["--max-memory", "64M"], MEMORY_HOGS);
                assert!(output.contains("ended: 137"), "{mode}: {output}");
                assert!(!output.contains("HELD 4"), "{mode}: {output}");
            }
            // 200 MB into tmpfs: charged to the command, stopped near 64 MiB.
            let fill = format!("/dev/shm/acpbash-cgroup2-{}", std::process::id());
            let output = run(
                "workspace",
                &["--max-memory", "64M"],
                &format!(
                    "head -c 200M /dev/zero > {fill}; echo \"head exit $?\"; \
                     echo \"size $(stat -c %s {fill})\"; rm -f {fill}"
                ),
            );
            let _ = std::fs::remove_file(&fill);
            let size: u64 = output
                .lines()
                .find_map(|l| l.strip_prefix("size ")?.trim().parse().ok())
                .unwrap_or(0);
            assert!(size < 100 << 20, "{size} bytes in tmpfs: {output}");
            assert!(
                output.contains("head exit 137") || !output.contains("head exit 0"),
                "{output}"
            );
        },
    );
}

/// An agent stopped by SIGTERM while its command runs removes the command's folders (killing
/// it) and its own leaf: nothing of it is left in the hierarchy.
#[test]
fn an_agent_stopped_by_sigterm_leaves_no_cgroup_folder() {
    as_root_and_nobody(
        "sandbox::cgroup_v2::an_agent_stopped_by_sigterm_leaves_no_cgroup_folder",
        || {
            if !require_namespaces() {
                return;
            }
            let doctor = Command::new(binary()).arg("doctor").output().unwrap();
            let report = String::from_utf8_lossy(&doctor.stdout).into_owned();
            if !skip_unless(CGROUP_V2_DELEGATION, v2_limits(&report)) {
                return;
            }
            let ws = workspace();
            let mut client = Command::new(binary())
                .args(["--sandbox", "workspace", "run", "--plain"])
                .args(["--max-processes", "64", "--max-memory", "64M"])
                .args(["--", "cat /proc/self/cgroup; sleep 1000"])
                .current_dir(ws.path())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
            let line = lines
                .by_ref()
                .map(|l| l.unwrap())
                .find(|l| l.contains("0::"))
                .expect("the command's cgroup");
            let folder = own_folder(&line);
            assert!(folder.exists(), "{}", folder.display());
            // The agent is `run`'s child.
            let children =
                std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", client.id()))
                    .unwrap();
            let agent: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
            // SAFETY: pidfd_open, kill and poll on the agent this test started (through `run`).
            unsafe {
                let pidfd = libc::syscall(libc::SYS_pidfd_open, agent, 0) as i32;
                assert!(
                    pidfd >= 0,
                    "pidfd_open: {}",
                    std::io::Error::last_os_error()
                );
                libc::kill(agent, libc::SIGTERM);
                let mut ended = libc::pollfd {
                    fd: pidfd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                assert_eq!(
                    libc::poll(&mut ended, 1, 60_000),
                    1,
                    "the agent did not end"
                );
                libc::close(pidfd);
            }
            for _ in lines {}
            let _ = client.wait();
            let scope = folder.parent().unwrap().parent().unwrap();
            assert!(!folder.exists(), "{} is left", folder.display());
            assert!(!scope.join("agent").exists(), "{} is left", scope.display());
        },
    );
}

/// Issue 44, point 7 (no silent weakening), found in the lab on Debian 11's 5.10 as root, where
/// systemd's scope job outlasted its wait under QEMU's TCG: where the cgroup v2 subtree cannot
/// be set up after all (here: the system bus hidden from the agent, in a mount namespace of
/// its own), the first command says that `--max-processes` is not enforced and why, instead of
/// running without its limit unsaid. As root (the system manager's scope), where doctor says
/// the limits are cgroup v2's. (Planted: the set-up after the mode's gaps were read, as before;
/// the fork loop then ran past the limit and nothing said so.)
#[test]
fn a_cgroup_v2_set_up_that_fails_is_said_by_the_first_command() {
    // SAFETY: plain getter.
    if unsafe { libc::geteuid() } != 0 || !require_namespaces() {
        return;
    }
    let doctor = Command::new(binary()).arg("doctor").output().unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout).into_owned();
    if !skip_unless(CGROUP_V2_DELEGATION, v2_limits(&report)) {
        return;
    }
    let bus = "/run/dbus/system_bus_socket";
    let has_bus = match std::path::Path::new(bus).exists() {
        true => Ok(()),
        false => Err(format!("no {bus}")),
    };
    if !skip_unless("the systemd system bus", has_bus) {
        return;
    }
    let ws = workspace();
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount --bind /dev/null {bus} && exec \"$0\" --sandbox workspace run --plain \
             --max-processes 64 -- 'cat /proc/self/cgroup'"
        ))
        .arg(binary())
        .current_dir(ws.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let notice = text
        .lines()
        .find(|l| l.contains("NOT enforced"))
        .unwrap_or_else(|| panic!("no NOT-enforced notice:\n{text}"));
    assert!(notice.contains("--max-processes ("), "{notice}");
    assert!(notice.contains("delegated scope failed"), "{notice}");
    // The command ran, in no run-N folder of the agent's.
    assert!(!text.contains("/run-"), "{text}");
}
