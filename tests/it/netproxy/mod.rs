//! The network proxy (`acp_bash::netproxy`) driven by real clients (curl, git, pip, npm,
//! cargo where installed) against a loopback HTTP server whose name the rules map; and the
//! bridge: the proxy's listening socket made inside a loopback-only network namespace.

mod bridge;
mod clients;
mod engine;
mod flood;
mod hostile;
mod served;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::sync::{Arc, Mutex};

use acp_bash::netproxy::{Proxy, Rules, Serving};

/// A loopback HTTP server of a test and the request lines it got.
pub struct Server {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// The request lines received so far (`GET /path HTTP/1.1`).
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// A loopback HTTP/1.1 server that answers every request with the request line and the Host
/// header it got (`GET /path HTTP/1.1|host: name`), or with `body` when one is given; each
/// connection on a thread of its own. Lives as long as the test process.
pub fn http_server(body: Option<Vec<u8>>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let body = Arc::new(body);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let body = body.clone();
            let record = record.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let line = text.lines().next().unwrap_or_default().to_string();
                record.lock().unwrap().push(line.clone());
                let host = text
                    .lines()
                    .find_map(|l| {
                        l.split_once(':')
                            .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
                            .map(|(_, v)| v.trim().to_string())
                    })
                    .unwrap_or_default();
                let reply = match body.as_ref() {
                    Some(body) => body.clone(),
                    None => format!("{line}|host: {host}\n").into_bytes(),
                };
                let _ = stream.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        reply.len()
                    )
                    .as_bytes(),
                );
                let _ = stream.write_all(&reply);
            });
        }
    });
    Server { addr, seen }
}

/// A runtime for the proxy, as the agent has one.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `proxy` serving a fresh listener on the host's loopback.
pub fn serve(proxy: &Proxy, runtime: &tokio::runtime::Runtime) -> Serving {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    proxy.serve(listener, runtime.handle()).unwrap()
}

/// Rules that map `registry.test` to `server` and allow nothing else.
pub fn mapped(server: SocketAddr) -> Rules {
    Rules::empty().map("registry.test", server).unwrap()
}

/// Runs curl with `args` (silent, errors shown, a bounded time), returning its exit code and
/// stdout+stderr. No proxy variable of the test's environment reaches it.
pub fn curl(args: &[&str]) -> (i32, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "60"])
        .args(args)
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .expect("curl runs");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `tool` on the PATH, if installed.
pub fn which_tool(tool: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(tool))
        .find(|path| path.is_file())
}
