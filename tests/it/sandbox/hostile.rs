//! Hostile commands against the sandbox (issue #9): each one is something that got through, tried
//! again through the real engine (`Session::run`). Every test runs as this process's user and,
//! when that is root, once more as `nobody` (`as_root_and_nobody`), so that both a root agent
//! (containers, CI) and an ordinary one are covered.
#![cfg(target_os = "linux")]

use std::ffi::CString;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::support::engine::{hang_guard, run};
use crate::support::sandbox::{
    as_root_and_nobody, as_root_and_nobody_both_views, marker, processes_with, require_namespaces,
    running_as_nobody, view_way, wait_until_gone, without_notices, MEMORY_HOGS,
};
use crate::support::skip_unless;
use acp_bash::exec::{Engine, EngineConfig, Exit, RunRequest, Session};
use acp_bash::sandbox::{Limits, Mode};
use tokio_util::sync::CancellationToken;

/// The confined modes every escape below must fail in.
const CONFINED: [Mode; 2] = [Mode::Workspace, Mode::ReadOnly];

fn engine_with(limits: Limits) -> Engine {
    Engine::new(
        view_way(EngineConfig::default())
            .kill_grace(Duration::from_millis(300))
            .pipe_grace(Duration::from_millis(300))
            .limits(limits),
    )
}

fn session(dir: &Path, mode: Mode) -> Session {
    let session = engine_with(Limits::default()).session(dir).unwrap();
    session.set_mode(mode);
    session
}

/// A directory outside every writable place (the temp dir is writable in workspace mode).
fn outside() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("acpbash-hostile-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

fn run_in(dir: &Path, mode: Mode, script: &str) -> (Exit, String) {
    let outcome = block_on(run(&session(dir, mode), script));
    (outcome.status.exit, without_notices(&outcome.output))
}

#[test]
fn no_device_node_can_be_made_or_opened() {
    as_root_and_nobody_both_views(
        "sandbox::hostile::no_device_node_can_be_made_or_opened",
        || {
            if !require_namespaces() {
                return;
            }
            for mode in CONFINED {
                let ws = outside();
                // /dev/loop0's numbers; the node is only opened for appending, nothing is written.
                let script = r#"for d in . "$(mktemp -d)"; do
  mknod "$d/blk" b 7 0 && echo "MADE in $d" && { : >> "$d/blk"; } 2>/dev/null && echo "OPENED in $d"
done; true"#;
                let (_, output) = run_in(ws.path(), mode, script);
                assert!(!output.contains("MADE"), "{mode}: {output}");
                assert!(!output.contains("OPENED"), "{mode}: {output}");
                assert!(output.contains("mknod"), "{mode}: {output}");
            }
        },
    );
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    assert_eq!(
        unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) },
        0
    );
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[test]
fn the_hosts_name_stays() {
    as_root_and_nobody("sandbox::hostile::the_hosts_name_stays", || {
        if !require_namespaces() {
            return;
        }
        let before = host_name();
        for mode in CONFINED {
            let ws = outside();
            let (_, output) = run_in(ws.path(), mode, "hostname acpbash-hostile-name; true");
            let after = host_name();
            if after != before {
                // Put the machine's name back before failing.
                let name = CString::new(before.clone()).unwrap();
                unsafe { libc::sethostname(name.as_ptr(), before.len()) };
            }
            assert_eq!(after, before, "{mode}: the host was renamed: {output}");
        }
    });
}

#[test]
fn the_hosts_network_interfaces_cannot_be_changed() {
    as_root_and_nobody(
        "sandbox::hostile::the_hosts_network_interfaces_cannot_be_changed",
        || {
            if !require_namespaces() {
                return;
            }
            if !["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
                .iter()
                .any(|p| Path::new(p).exists())
            {
                panic!("this test needs iproute2's `ip` (netlink from bash needs a tool)");
            }
            let ws = outside();
            // Workspace mode shares the host's network; the MTU set is the one it has.
            let script = r#"PATH=$PATH:/usr/sbin:/sbin
ip link set dev lo mtu "$(cat /sys/class/net/lo/mtu)" && echo CHANGED; true"#;
            let (_, output) = run_in(ws.path(), Mode::Workspace, script);
            assert!(!output.contains("CHANGED"), "{output}");
            assert!(output.contains("Operation not permitted"), "{output}");
        },
    );
}

#[test]
fn metadata_outside_the_writable_places_stays() {
    as_root_and_nobody_both_views(
        "sandbox::hostile::metadata_outside_the_writable_places_stays",
        || {
            if !require_namespaces() {
                return;
            }
            for mode in CONFINED {
                let ws = outside();
                let other = outside();
                let file = other.path().join("f");
                std::fs::write(&file, "x").unwrap();
                let before = std::fs::metadata(&file).unwrap();
                let script = format!(
                    r#"F={f}
chmod 0777 "$F" && echo CHMOD
chown 4321 "$F" && echo CHOWN
touch -d 2001-01-01 "$F" && echo TOUCH
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.acpbash", b"x")' "$F" && echo XATTR
true"#,
                    f = file.display()
                );
                let (_, output) = run_in(ws.path(), mode, &script);
                for changed in ["CHMOD", "CHOWN", "TOUCH", "XATTR"] {
                    assert!(!output.contains(changed), "{mode}: {output}");
                }
                let after = std::fs::metadata(&file).unwrap();
                assert_eq!(after.mode(), before.mode(), "{mode}");
                assert_eq!(after.uid(), before.uid(), "{mode}");
                assert_eq!(after.mtime(), before.mtime(), "{mode}");
                let path = CString::new(file.to_str().unwrap()).unwrap();
                let size = unsafe {
                    libc::getxattr(
                        path.as_ptr(),
                        c"user.acpbash".as_ptr(),
                        std::ptr::null_mut(),
                        0,
                    )
                };
                assert!(size < 0, "{mode}: an xattr was set: {output}");
            }
        },
    );
}

#[test]
fn read_only_mode_keeps_a_session_folder_under_the_temp_dir_read_only() {
    as_root_and_nobody_both_views(
        "sandbox::hostile::read_only_mode_keeps_a_session_folder_under_the_temp_dir_read_only",
        || {
            if !require_namespaces() {
                return;
            }
            let ws = tempfile::Builder::new()
                .prefix("acpbash-ro-in-tmp-")
                .tempdir_in(std::env::temp_dir())
                .unwrap();
            std::fs::write(ws.path().join("kept"), "original").unwrap();
            let (exit, output) = run_in(
                ws.path(),
                Mode::ReadOnly,
                "cat kept; echo x > f; echo y > kept",
            );
            assert_ne!(exit, Exit::Code(0), "{output}");
            assert!(output.starts_with("original"), "{output}");
            assert!(!ws.path().join("f").exists(), "{output}");
            assert_eq!(
                std::fs::read_to_string(ws.path().join("kept")).unwrap(),
                "original"
            );
        },
    );
}

/// Appends to every file the agent names in the shell's starting environment and to anything
/// that looks like an acp-bash prelude under the temp dir, and plants "cwd" files next to them.
const TAMPER: &str = r#"targets=$(tr '\0' '\n' < /proc/$$/environ | sed -n 's/^\(BASH_ENV\|ACP_BASH[A-Z_]*\)=//p')
for f in $targets "${TMPDIR:-/tmp}"/acp-bash-*/*.bash; do
  [ -f "$f" ] && echo 'echo INJECTED' >> "$f"
  d=${f%/*}
  [ -d "$d" ] && for i in $(seq 0 300); do echo / > "$d/cwd-$i"; done
done 2>/dev/null
true"#;

#[test]
fn no_command_changes_what_later_commands_run_or_where_they_start() {
    as_root_and_nobody_both_views(
        "sandbox::hostile::no_command_changes_what_later_commands_run_or_where_they_start",
        || {
            if !require_namespaces() {
                return;
            }
            for mode in CONFINED {
                let engine = engine_with(Limits::default());
                let (ws_a, ws_b) = (outside(), outside());
                let a = engine.session(ws_a.path()).unwrap();
                let b = engine.session(ws_b.path()).unwrap();
                a.set_mode(mode);
                b.set_mode(Mode::ReadOnly);
                block_on(async {
                    run(&a, TAMPER).await;
                    for (session, root) in [(&b, ws_b.path()), (&a, ws_a.path())] {
                        let outcome = run(session, "echo after").await;
                        assert_eq!(without_notices(&outcome.output), "after\n", "{mode}");
                        assert_eq!(outcome.next_cwd, root, "{mode}");
                        let again = run(session, "pwd").await;
                        assert_eq!(again.output, format!("{}\n", root.display()), "{mode}");
                    }
                });
            }
        },
    );
}

#[test]
fn an_off_mode_command_cannot_open_the_agents_stdout_or_environment() {
    as_root_and_nobody(
        "sandbox::hostile::an_off_mode_command_cannot_open_the_agents_stdout_or_environment",
        || {
            if unsafe { libc::geteuid() } == 0 {
                // Root holds CAP_SYS_PTRACE: `off` gives this up for a root agent (said in
                // its description); the ordinary-user half below is the one that must hold.
                eprintln!("as root: not checked (root may open any process's fds)");
                return;
            }
            let ws = outside();
            let script = r#"{ : > /proc/$PPID/fd/1; } 2>/dev/null && echo OPENED-STDOUT
{ cat /proc/$PPID/environ > /dev/null; } 2>/dev/null && echo READ-ENVIRON
echo checked"#;
            let output = std::process::Command::new(crate::support::acp::binary())
                .args(["--sandbox", "off", "run", script])
                .current_dir(ws.path())
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&output.stdout);
            assert!(text.contains("checked"), "{text}");
            assert!(!text.contains("OPENED-STDOUT"), "{text}");
            assert!(!text.contains("READ-ENVIRON"), "{text}");
        },
    );
}

#[test]
fn other_programs_shared_memory_is_out_of_reach() {
    as_root_and_nobody_both_views(
        "sandbox::hostile::other_programs_shared_memory_is_out_of_reach",
        || {
            if !require_namespaces() {
                return;
            }
            for mode in CONFINED {
                let id = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600) };
                assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
                let name = marker("shm");
                let shm_file = Path::new("/dev/shm").join(&name);
                std::fs::write(&shm_file, "x").unwrap();
                let ws = outside();
                let script = format!(
                    "ipcrm -m {id} && echo REMOVED; rm /dev/shm/{name} && echo DELETED; true"
                );
                let (_, output) = run_in(ws.path(), mode, &script);
                let mut stat: libc::shmid_ds = unsafe { std::mem::zeroed() };
                let alive = unsafe { libc::shmctl(id, libc::IPC_STAT, &mut stat) } == 0;
                let file_kept = shm_file.exists();
                unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
                let _ = std::fs::remove_file(&shm_file);
                assert!(alive && !output.contains("REMOVED"), "{mode}: {output}");
                assert!(file_kept && !output.contains("DELETED"), "{mode}: {output}");
            }
        },
    );
}

#[test]
fn a_fork_bomb_stays_under_the_process_limit_and_cancel_ends_it() {
    as_root_and_nobody(
        "sandbox::hostile::a_fork_bomb_stays_under_the_process_limit_and_cancel_ends_it",
        || {
            if !require_namespaces() {
                return;
            }
            // Where doctor says --max-processes is not enforced (root without a pids cgroup,
            // as in a rootful container: RLIMIT_NPROC does not bind root), there is no limit
            // to test; cancel is tested by the other tests.
            let limits = acp_bash::sandbox::DoctorReport::probe()
                .layers
                .iter()
                .find(|layer| layer.name == "resource limits")
                .expect("doctor reports the resource limits")
                .status
                .clone()
                .map(|_| ());
            if !skip_unless("resource limits", limits) {
                return;
            }
            let engine = engine_with(Limits::default().max_processes(Some(256)).max_memory(None));
            let ws = outside();
            let session = engine.session(ws.path()).unwrap();
            let mark = marker("bomb");
            let (head, rest) = mark.split_at(4);
            // 600 sleepers, each one process; with the limit, forks fail after about 256.
            let script = format!(
                r#"P={head}; P="${{P}}{rest}"
for i in $(seq 600); do ( exec -a "$P" sleep 1000 ) >/dev/null 2>&1 & done 2>&1 | head -c 2000
echo all-started
sleep 1000"#
            );
            block_on(async {
                let cancel = CancellationToken::new();
                let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
                let request = RunRequest::new(script).timeout(hang_guard());
                let running = async {
                    let mut on_output = |text: &str| {
                        if text.contains("Resource temporarily unavailable")
                            || text.contains("all-started")
                        {
                            let _ = seen_tx.send(());
                        }
                    };
                    session.run(request, &mut on_output, &cancel).await
                };
                let watch = async {
                    tokio::time::timeout(hang_guard(), seen_rx.recv())
                        .await
                        .expect("neither a failed fork nor the end of the loop showed");
                    let count = processes_with(&mark).len();
                    cancel.cancel();
                    count
                };
                let (outcome, count) = tokio::join!(running, watch);
                assert!(outcome.status.cancelled, "{}", outcome.output);
                assert!(count <= 300, "{count} processes ran: {}", outcome.output);
            });
            wait_until_gone(&mark);
        },
    );
}

#[test]
fn commands_see_no_descriptor_the_agent_inherited() {
    as_root_and_nobody(
        "sandbox::hostile::commands_see_no_descriptor_the_agent_inherited",
        || {
            // An fd without close-on-exec, as a launcher may leave one to the agent. The
            // lowest free number from 200 up (F_DUPFD sets no close-on-exec): a fixed number
            // (`dup2` onto 57, as before) replaced whatever another test's thread held there,
            // and the `close` below then closed it under that thread's `OwnedFd` (a debug
            // build aborts: "owned file descriptor already closed").
            let null = std::fs::File::open("/dev/null").unwrap();
            use std::os::fd::AsRawFd;
            let leaked = unsafe { libc::fcntl(null.as_raw_fd(), libc::F_DUPFD, 200) };
            assert!(
                leaked >= 200,
                "F_DUPFD: {}",
                std::io::Error::last_os_error()
            );
            let modes: &[Mode] = if require_namespaces() {
                &[Mode::Workspace, Mode::ReadOnly, Mode::Full, Mode::Off]
            } else {
                &[Mode::Off]
            };
            for &mode in modes {
                let ws = outside();
                // One command: a pipeline would show the shell's own pipe fds. The shell's pid
                // as /proc knows it: in a PID namespace without a private /proc (a container's
                // masks) `$$` names another process there.
                let (_, output) = run_in(
                    ws.path(),
                    mode,
                    "read -r pid _ < /proc/self/stat; ls /proc/$pid/fd",
                );
                let mut fds: Vec<i32> = output
                    .split_whitespace()
                    .map(|n| n.parse().unwrap())
                    .collect();
                fds.sort();
                assert_eq!(fds, [0, 1, 2, 63], "{mode}: {output}");
            }
            unsafe { libc::close(leaked) };
        },
    );
}

#[test]
fn a_script_over_128_kib_runs() {
    as_root_and_nobody("sandbox::hostile::a_script_over_128_kib_runs", || {
        let line = format!("{}\n", "x".repeat(1023));
        let script = format!(
            "cat <<'EOF' | wc -c\n{}EOF\necho \"${{0##*/}}\"",
            line.repeat(1024)
        );
        assert!(script.len() > 1024 * 1024);
        let modes: &[Mode] = if require_namespaces() {
            &[Mode::Workspace, Mode::Off]
        } else {
            &[Mode::Off]
        };
        for &mode in modes {
            let ws = outside();
            let (exit, output) = run_in(ws.path(), mode, &script);
            assert_eq!(output, "1048576\nbash\n", "{mode}");
            assert_eq!(exit, Exit::Code(0), "{mode}");
        }
        if running_as_nobody() {
            eprintln!("ran as nobody");
        }
    });
}

/// `--max-memory` as doctor reports it here: the layer "memory cgroup" works or not.
fn memory_cgroup_works() -> bool {
    acp_bash::sandbox::DoctorReport::probe()
        .layers
        .iter()
        .find(|layer| layer.name == "memory cgroup")
        .expect("doctor reports the memory cgroup")
        .status
        .is_ok()
}

fn run_with_memory_limit(mode: Mode, bytes: u64, script: &str) -> String {
    let engine = engine_with(Limits::default().max_memory(Some(bytes)));
    let ws = outside();
    let session = engine.session(ws.path()).unwrap();
    session.set_mode(mode);
    block_on(run(&session, script)).output
}

#[test]
fn one_process_cannot_allocate_past_the_memory_limit() {
    as_root_and_nobody(
        "sandbox::hostile::one_process_cannot_allocate_past_the_memory_limit",
        || {
            // tail -c keeps the last 100 MiB of its input in memory.
            let script = "tail -c 100M < <(head -c 100M /dev/zero) | wc -c";
            for mode in [Mode::Workspace, Mode::ReadOnly, Mode::Full] {
                let output = run_with_memory_limit(mode, 64 << 20, script);
                assert!(!output.contains("104857600"), "{mode}: {output}");
                let roomy = run_with_memory_limit(mode, 512 << 20, script);
                assert!(roomy.contains("104857600"), "{mode}: {roomy}");
            }
        },
    );
}

#[test]
fn a_commands_whole_tree_stays_under_the_memory_limit_where_doctor_says_so() {
    as_root_and_nobody(
        "sandbox::hostile::a_commands_whole_tree_stays_under_the_memory_limit_where_doctor_says_so",
        || {
            if !require_namespaces() {
                return;
            }
            // Over the limit the kernel kills the largest process of the command (a tail), never
            // the sandbox's own helpers (they stay out of the memory cgroup): the shell lives on
            // to say so.
            let script = MEMORY_HOGS;
            let tree_limited = memory_cgroup_works();
            if !running_as_nobody() {
                let _ = crate::support::skip::skip_unless(
                    "memory cgroup",
                    tree_limited.then_some(()).ok_or(
                        "doctor reports no memory cgroup: only the per-process limit is checked",
                    ),
                );
            }
            for mode in CONFINED {
                let output = run_with_memory_limit(mode, 64 << 20, script);
                if tree_limited {
                    assert!(output.contains("ended: 137"), "{mode}: {output}");
                    assert!(!output.contains("HELD 4"), "{mode}: {output}");
                } else {
                    // What doctor says instead: each process is limited, not the tree.
                    assert!(output.contains("HELD 4"), "{mode}: {output}");
                }
            }
        },
    );
}

/// Where the agent may make cgroups (root here), a command's processes (the shell, and a child
/// it starts) are in the command's own pids and memory cgroups, `…/acp-bash-<agent pid>/run-N`:
/// joined through `tasks` (one thread, the whole single-threaded process), not `cgroup.procs`
/// (issue 24: that write waits for an RCU grace period, 7–15 ms). On cgroup v2 (the lab's VM)
/// both are one folder, `<the agent's delegated subtree>/run-N/…`, the `0::` line. Where the
/// agent may not (nobody here), the command runs without one.
#[test]
fn a_commands_processes_are_all_in_its_own_cgroups() {
    as_root_and_nobody(
        "sandbox::hostile::a_commands_processes_are_all_in_its_own_cgroups",
        || {
            if !require_namespaces() {
                return;
            }
            let engine = engine_with(
                Limits::default()
                    .max_processes(Some(256))
                    .max_memory(Some(1 << 32)),
            );
            let ws = outside();
            let session = engine.session(ws.path()).unwrap();
            let script = "grep -E '^([0-9]+:(pids|memory):|0::)' /proc/self/cgroup | sed 's/^/shell /'; \
                          sh -c \"grep -E '^([0-9]+:(pids|memory):|0::)' /proc/self/cgroup | sed 's/^/child /'\"";
            for mode in [Mode::Workspace, Mode::ReadOnly, Mode::Full] {
                session.set_mode(mode);
                let outcome = block_on(run(&session, script));
                let own = format!("/acp-bash-{}/run-", std::process::id());
                // What doctor says the agent may make here.
                let report = acp_bash::sandbox::DoctorReport::probe();
                let layer = |name: &str| {
                    report
                        .layers
                        .iter()
                        .find(|l| l.name == name)
                        .map(|l| l.status.clone())
                        .unwrap()
                };
                let pids = layer("resource limits").is_ok_and(|how| how.contains("cgroup v1 pids"));
                // cgroup v1's lines (`N:memory:`); v2's are checked below.
                let memory =
                    layer("memory cgroup").is_ok_and(|how| how.contains("cgroup v1 memory"));
                // cgroup v2: "cgroup v2 pids.max per command in <subtree>/run-N (…)".
                let v2_subtree = ["resource limits", "memory cgroup"]
                    .iter()
                    .find_map(|name| {
                        let how = layer(name).ok()?;
                        let rest = how
                            .split("cgroup v2 ")
                            .nth(1)?
                            .split(" per command in ")
                            .nth(1)?;
                        Some(rest.split("/run-N").next()?.to_string())
                    });
                for who in ["shell", "child"] {
                    let line = outcome
                        .output
                        .lines()
                        .find(|l| l.starts_with(&format!("{who} 0::")));
                    // The path as this cgroup namespace shows it, up to the run's own folder.
                    let in_run = line.and_then(|l| {
                        let path = l.split_once("0::")?.1;
                        let at = path.find("/run-")?;
                        let run = path[at + "/run-".len()..].split('/').next()?;
                        run.parse::<u64>().ok()?;
                        Some(path[..at].to_string())
                    });
                    let inside = match (&in_run, &v2_subtree) {
                        (Some(prefix), Some(subtree)) => subtree.ends_with(prefix.as_str()),
                        (Some(_), None) => true,
                        (None, _) => false,
                    };
                    assert_eq!(
                        inside,
                        v2_subtree.is_some(),
                        "{mode:?}, uid {}: the {who}'s cgroup v2 folder: {line:?} (subtree {v2_subtree:?})\n{}",
                        unsafe { libc::geteuid() },
                        outcome.output
                    );
                }
                for who in ["shell", "child"] {
                    for (controller, may_make) in [("pids", pids), ("memory", memory)] {
                        let line = outcome
                            .output
                            .lines()
                            .find(|l| l.starts_with(who) && l.contains(&format!(":{controller}:")));
                        let inside = line.is_some_and(|l| l.contains(&own));
                        assert_eq!(
                            inside,
                            may_make,
                            "{mode:?}, uid {}: the {who}'s {controller} cgroup: {line:?}\n{}",
                            unsafe { libc::geteuid() },
                            outcome.output
                        );
                    }
                }
            }
        },
    );
}

/// The agent makes each command's cgroups before it is asked for them (on its spawner thread,
/// while the previous command runs): still, no two commands share one, each has the limit it
/// was made for (read while it runs), and each is removed once its command has ended (root
/// here; nobody may make none). Planted "no removal when the command ends": caught.
#[test]
fn cgroups_made_ahead_are_each_one_commands_with_its_limit() {
    if unsafe { libc::geteuid() } != 0 || !require_namespaces() {
        return;
    }
    let engine = engine_with(Limits::default().max_processes(Some(77)));
    let ws = outside();
    let session = engine.session(ws.path()).unwrap();
    let report = acp_bash::sandbox::DoctorReport::probe();
    let pids = report
        .layers
        .iter()
        .find(|l| l.name == "resource limits")
        .is_some_and(|l| {
            l.status
                .as_ref()
                .is_ok_and(|how| how.contains("cgroup v1 pids"))
        });
    if !pids {
        return;
    }
    let mut seen = Vec::new();
    for mode in [
        Mode::Workspace,
        Mode::Workspace,
        Mode::ReadOnly,
        Mode::Full,
        Mode::Full,
    ] {
        session.set_mode(mode);
        // The limit is read while the command runs: its folder goes when it ends.
        let outcome = block_on(run(
            &session,
            "grep -E '^[0-9]+:pids:' /proc/self/cgroup; \
             echo \"limit=$(cat /sys/fs/cgroup/pids$(grep -E '^[0-9]+:pids:' /proc/self/cgroup | cut -d: -f3)/pids.max)\"",
        ));
        let line = outcome
            .output
            .lines()
            .find(|l| l.contains(":pids:"))
            .unwrap_or_else(|| panic!("{mode:?}: {}", outcome.output))
            .to_string();
        let path = line.splitn(3, ':').nth(2).unwrap().to_string();
        assert!(
            path.contains(&format!("/acp-bash-{}/run-", std::process::id())),
            "{mode:?}: {line}"
        );
        assert!(
            outcome.output.contains("limit=77"),
            "{mode:?}: {path}: {}",
            outcome.output
        );
        // Removed once the command has ended (on the spawner thread; a hang guard only).
        let folder = std::path::PathBuf::from(format!("/sys/fs/cgroup/pids{path}"));
        let start = std::time::Instant::now();
        while folder.exists() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "{mode:?}: {path} is left behind"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!seen.contains(&path), "{mode:?}: {path} again in {seen:?}");
        seen.push(path);
    }
}

/// The agent is multithreaded: its other threads start processes (`posix_spawn`, `fork`) while
/// it forks a command. Since glibc 2.41 (Debian 13) those hold a lock that glibc's `sigaction`
/// takes for SIGABRT, and a command's child, made by a raw `clone` while another thread held it,
/// waited on it forever when it reset its signals that way: commands hung in Debian 13 containers
/// (the platform lab's `docker-root`, 6 Dec). Here two threads start processes without pause
/// while commands run in each mode; each must end. Planted (glibc's `sigaction` back in
/// `child::sys::reset_signals`): hangs on glibc 2.41 (the lab); this host's glibc 2.36 has no
/// such lock, so here it holds either way.
#[test]
fn commands_start_while_other_threads_start_processes() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let stop = Arc::new(AtomicBool::new(false));
    let starters: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::process::Command::new("true").status();
                }
            })
        })
        .collect();
    const EACH: usize = 15;
    let modes = [Mode::Workspace, Mode::ReadOnly, Mode::Full];
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ws = outside();
        for mode in modes {
            let session = session(ws.path(), mode);
            for i in 0..EACH {
                let outcome = block_on(run(&session, &format!("echo ran-{i}")));
                if tx.send((mode, i, outcome.output)).is_err() {
                    return;
                }
            }
        }
    });
    for mode in modes {
        for i in 0..EACH {
            let (got_mode, n, output) = rx.recv_timeout(hang_guard()).unwrap_or_else(|_| {
                panic!("{mode:?}: command {i} did not end within {:?} while other threads started processes", hang_guard())
            });
            assert_eq!((got_mode, n), (mode, i));
            assert!(output.contains(&format!("ran-{i}")), "{mode:?}: {output}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    for starter in starters {
        starter.join().unwrap();
    }
}
