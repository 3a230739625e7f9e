//! The bridge: the proxy's listening socket made inside a network namespace that has only a
//! loopback, served by the agent from outside it. Root only (joining the namespace needs
//! CAP_SYS_ADMIN over it).
#![cfg(target_os = "linux")]

use std::io::BufRead;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use super::{http_server, mapped, runtime};
use acp_bash::netproxy::{Proxy, PROXY_PORT};

/// A process in a new network namespace (`unshare -n`), ended on drop.
struct Namespace(std::process::Child);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn in_namespace(ns: &Namespace, args: &[&str]) -> (bool, String) {
    let out = Command::new("nsenter")
        .arg(format!("--net=/proc/{}/ns/net", ns.0.id()))
        .args(["--", "curl", "-sS", "--max-time", "30"])
        .args(args)
        .env_remove("http_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_listener_made_inside_a_namespace_is_its_only_way_out() {
    if !crate::support::skip_unless(
        crate::support::skip::ROOT,
        if unsafe { libc::geteuid() } == 0 {
            Ok(())
        } else {
            Err("not root")
        },
    ) {
        return;
    }
    let mut child = Command::new("unshare")
        .args(["-n", "--", "sh", "-c", "echo ready; exec sleep 1000"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let ns = Namespace(child);
    let netns = std::fs::File::open(format!("/proc/{}/ns/net", ns.0.id())).unwrap();

    let server = http_server(None);
    let rt = runtime();
    let listener = acp_bash::sandbox::listen_in_network_namespace(
        netns.as_fd(),
        ([127, 0, 0, 1], PROXY_PORT).into(),
    )
    .unwrap();
    let serving = Proxy::new(mapped(server.addr))
        .serve(listener, rt.handle())
        .unwrap();

    let proxy = format!("http://127.0.0.1:{PROXY_PORT}");
    let (ok, out) = in_namespace(&ns, &["-x", &proxy, "http://registry.test/in"]);
    assert!(ok, "{out}");
    assert_eq!(out, "GET /in HTTP/1.1|host: registry.test\n");
    // Past the proxy: no name resolves, the host's loopback is not this one, nothing routes.
    let (ok, out) = in_namespace(&ns, &["--noproxy", "*", "http://registry.test/"]);
    assert!(!ok, "{out}");
    let (ok, out) = in_namespace(&ns, &[&format!("http://{}/", server.addr)]);
    assert!(!ok, "{out}");
    let (ok, out) = in_namespace(&ns, &["http://1.1.1.1/"]);
    assert!(!ok, "{out}");
    assert_eq!(server.seen(), ["GET /in HTTP/1.1"]);
    drop(serving);
}
