//! Read-only mode has no network: a connect to a listener on the host's loopback fails.
#![cfg(target_os = "linux")]

use crate::support::sandbox::as_root_and_nobody;
use std::net::TcpListener;

use crate::support::sandbox::{spawn, spawn_with};
use acp_bash::sandbox::{Mode, Support};

fn connect_script(port: u16) -> String {
    format!("if exec 3<>/dev/tcp/127.0.0.1/{port}; then echo connected; else echo refused; fi")
}

fn accepted(listener: &TcpListener) -> bool {
    listener.set_nonblocking(true).unwrap();
    listener.accept().is_ok()
}

#[test]
fn workspace_mode_reaches_the_host_loopback() {
    as_root_and_nobody(
        "sandbox::net::workspace_mode_reaches_the_host_loopback",
        || {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let dir = tempfile::tempdir().unwrap();
            let (status, output) =
                spawn(&connect_script(port), Mode::Workspace, dir.path()).finish();
            assert!(status.success());
            assert_eq!(output, "connected\n");
            assert!(accepted(&listener));
        },
    );
}

#[test]
fn read_only_mode_cannot_reach_the_host_loopback() {
    as_root_and_nobody(
        "sandbox::net::read_only_mode_cannot_reach_the_host_loopback",
        || {
            let support = Support::current();
            let either = support.network_namespace.clone().or_else(|netns| {
                support
                    .landlock
                    .clone()
                    .map(|_| ())
                    .map_err(|landlock| format!("{netns}; and no Landlock: {landlock}"))
            });
            if !crate::support::skip_unless("network namespace", either) {
                return;
            }
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let dir = tempfile::tempdir().unwrap();
            let (status, output) =
                spawn(&connect_script(port), Mode::ReadOnly, dir.path()).finish();
            assert!(status.success());
            assert!(output.ends_with("refused\n"), "{output}");
            assert!(!accepted(&listener), "a connection came through");
        },
    );
}

#[test]
fn read_only_mode_without_a_network_namespace_blocks_tcp_with_landlock() {
    as_root_and_nobody(
        "sandbox::net::read_only_mode_without_a_network_namespace_blocks_tcp_with_landlock",
        || {
            let mut support = Support::current().clone();
            let tcp = match &support.landlock {
                Ok(abi) if *abi >= 4 => Ok(()),
                Ok(abi) => Err(format!("Landlock ABI {abi} < 4")),
                Err(why) => Err(why.clone()),
            };
            if !crate::support::skip_unless("Landlock TCP rules", tcp) {
                return;
            }
            support.network_namespace = Err("test: pretend there is none".into());
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let dir = tempfile::tempdir().unwrap();
            let running = spawn_with(&connect_script(port), Mode::ReadOnly, dir.path(), &support);
            // TCP is blocked (no headline that the network is not); what is lost, UDP, is said
            // in the first command's output.
            assert!(
                !running
                    .notices
                    .iter()
                    .any(|n| n.contains("network is NOT blocked")),
                "{:?}",
                running.notices
            );
            assert!(
                running
                    .notices
                    .iter()
                    .any(|n| n.contains("NOT enforced") && n.contains("blocking UDP")),
                "{:?}",
                running.notices
            );
            let (status, output) = running.finish();
            assert!(status.success());
            assert!(
                output.contains("Permission denied") && output.ends_with("refused\n"),
                "{output}"
            );
            assert!(!accepted(&listener));
        },
    );
}

#[test]
fn read_only_mode_keeps_a_private_loopback() {
    as_root_and_nobody(
        "sandbox::net::read_only_mode_keeps_a_private_loopback",
        || {
            let netns = Support::current().network_namespace.clone();
            if !crate::support::skip_unless("network namespace", netns) {
                return;
            }
            let dir = tempfile::tempdir().unwrap();
            // The loopback inside is up: binding a port works (nothing outside can see it).
            let script =
            "ip -o link show lo 2>/dev/null | grep -q UP && echo lo-up || cat /sys/class/net/lo/flags";
            let (status, output) = spawn(script, Mode::ReadOnly, dir.path()).finish();
            assert!(status.success(), "{output}");
            assert!(output == "lo-up\n" || output.trim() == "0x9", "{output}");
        },
    );
}

#[test]
fn every_read_only_command_gets_a_network_namespace_of_its_own() {
    as_root_and_nobody(
        "sandbox::net::every_read_only_command_gets_a_network_namespace_of_its_own",
        || {
            let netns = Support::current().network_namespace.clone();
            if !crate::support::skip_unless("network namespace", netns) {
                return;
            }
            let host = std::fs::read_link("/proc/self/ns/net").unwrap();
            let dir = tempfile::tempdir().unwrap();
            // Namespaces are made ahead of need: the first command takes one made on the spot, the
            // next ones the spare made meanwhile. Three commands alive at once (namespace numbers are
            // reused once freed) must be in three namespaces, none the host's.
            let running: Vec<_> = (0..3)
                .map(|n| {
                    // The namespace exists once spawn returns (it is made before exec), and each
                    // command stays until `go`: all three are alive at once. Read-only commands can't
                    // write files the test sees, so each prints its namespace.
                    let _ = n;
                    spawn(
                        "readlink /proc/self/ns/net; until [ -e go ]; do sleep 0.01; done",
                        Mode::ReadOnly,
                        dir.path(),
                    )
                })
                .collect();
            std::fs::write(dir.path().join("go"), "").unwrap();
            let mut seen = Vec::new();
            for running in running {
                let (status, output) = running.finish();
                assert!(status.success(), "{output}");
                seen.push(output);
            }
            for (n, netns) in seen.iter().enumerate() {
                assert!(netns.starts_with("net:["), "{netns}");
                assert_ne!(std::path::Path::new(netns.trim()), host, "not the host's");
                assert!(!seen[..n].contains(netns), "shared: {seen:?}");
            }
        },
    );
}
