//! `network`: what workspace mode's network allowlist costs (issue 49, point 1;
//! `notes/2026-12-06-network-allowlist.md`): a command that uses no network, allowlist vs
//! `--network full`, paired in one run; and the proxy's throughput against a direct download
//! from the same loopback server, alternating round by round.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use super::client::Result;
use super::stats::{median, ms, spread, Row};
use super::wire::{check_completed, prompt, Ready};
use super::Bench;

fn ready_with(bench: &Bench, network: &str) -> Result<Ready> {
    let mut agent = bench.spawn_agent_with(&["--sandbox", "workspace", "--network", network])?;
    agent.initialize()?;
    let session = agent.new_session(bench.session_dir())?;
    Ok(Ready { agent, session })
}

fn true_ms(ready: &mut Ready) -> Result<f64> {
    let turn = prompt(ready, "true", Duration::from_secs(10))?;
    check_completed(&turn, "true")?;
    Ok(ms(turn.elapsed))
}

/// A loopback server that answers every connection with `bytes` of body (plain HTTP/1.1).
fn body_server(bytes: u64) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        let chunk = vec![b'x'; 256 * 1024];
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let chunk = chunk.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {bytes}\r\nConnection: close\r\n\r\n"
                );
                let mut left = bytes;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    if stream.write_all(&chunk[..n]).is_err() {
                        return;
                    }
                    left -= n as u64;
                }
            });
        }
    });
    addr
}

/// `curl` downloading `url` to /dev/null (through `proxy` when given): MB/s.
fn download(url: &str, proxy: Option<&str>, bytes: u64) -> Option<f64> {
    let mut curl = Command::new("curl");
    curl.args(["-sSf", "-o", "/dev/null", "--max-time", "300"]);
    for name in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        curl.env_remove(name);
    }
    match proxy {
        Some(proxy) => curl.args(["-x", proxy]),
        None => curl.args(["--noproxy", "*"]),
    };
    let started = Instant::now();
    let status = curl.arg(url).status().ok()?;
    let took = started.elapsed().as_secs_f64();
    status.success().then(|| bytes as f64 / took / 1e6)
}

pub fn network(bench: &Bench) -> Result<Vec<Row>> {
    let runs = if bench.quick { 30 } else { 200 };
    let mut rows = Vec::new();
    // Per command, no network used: the same `true`, alternating between two agents.
    let mut allow = ready_with(bench, "allowlist")?;
    let mut full = ready_with(bench, "full")?;
    for _ in 0..5 {
        true_ms(&mut allow)?;
        true_ms(&mut full)?;
    }
    let (mut with, mut without, mut paired) = (vec![], vec![], vec![]);
    for round in 0..runs {
        let (a, f) = if round % 2 == 0 {
            let a = true_ms(&mut allow)?;
            (a, true_ms(&mut full)?)
        } else {
            let f = true_ms(&mut full)?;
            (true_ms(&mut allow)?, f)
        };
        with.push(a);
        without.push(f);
        paired.push(a - f);
    }
    allow.agent.shutdown(Duration::from_secs(2));
    full.agent.shutdown(Duration::from_secs(2));
    let delta = median(&paired);
    rows.push(Row {
        case: "network".into(),
        metric: "`true` in workspace mode, --network allowlist (its own namespace, proxy \
                 listener per session)"
            .into(),
        median: spread(&with, "ms", 2),
        baseline: format!("--network full: {}", spread(&without, "ms", 2)),
        ratio: format!("paired Δ {delta:+.2} ms"),
        target: "≤ +1 ms".into(),
        met: Some(delta <= 1.0),
    });
    // Throughput: the proxy (the agent's own code, on a runtime like the agent's) against a
    // direct download from the same loopback server.
    let bytes = bench.bytes.min(1 << 30);
    let server = body_server(bytes);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let rules = acp_bash::netproxy::Rules::empty()
        .map("bench.test", server)
        .expect("a mapping");
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let serving = acp_bash::netproxy::Proxy::new(rules)
        .serve(listener, runtime.handle())
        .expect("the proxy serves");
    let proxy = format!("http://{}", serving.local_addr());
    let direct_url = format!("http://{server}/");
    let rounds = if bench.quick { 3 } else { 7 };
    let (mut direct, mut proxied, mut ratios) = (vec![], vec![], vec![]);
    for _ in 0..rounds {
        let (Some(d), Some(p)) = (
            download(&direct_url, None, bytes),
            download("http://bench.test/", Some(&proxy), bytes),
        ) else {
            rows.push(Row::unavailable(
                "network",
                "proxy throughput",
                "curl failed",
            ));
            return Ok(rows);
        };
        direct.push(d);
        proxied.push(p);
        ratios.push(p / d);
    }
    let ratio = median(&ratios);
    rows.push(Row {
        case: "network".into(),
        metric: format!(
            "download of {} MiB through the proxy (curl -x, loopback)",
            bytes >> 20
        ),
        median: spread(&proxied, "MB/s", 0),
        baseline: format!("direct: {}", spread(&direct, "MB/s", 0)),
        ratio: format!("{ratio:.2}× (median of per-round ratios)"),
        target: "≥ 0.8×".into(),
        met: Some(ratio >= 0.8),
    });
    drop(serving);
    Ok(rows)
}
