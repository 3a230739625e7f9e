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

/// CPU seconds (user + system) the server's connection threads used, added as each ends.
static SERVER_CPU_MICROS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The calling thread's CPU time so far (user + system), in microseconds (Linux only).
fn thread_cpu_micros() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage fills the struct it is given.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
            return None;
        }
        let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        Some(micros(usage.ru_utime) + micros(usage.ru_stime))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// CPU seconds (user + system) used so far by this process's threads named `prefix…`
/// (`/proc/self/task/*/stat`; Linux only).
fn threads_cpu_seconds(prefix: &str) -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        // After the name: state (field 3) … utime (14), stime (15).
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        total += field(11)? + field(12)?;
    }
    Some(total as f64 / ticks)
}

/// CPU seconds (user + system) of the children reaped so far (curl's).
fn children_cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
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
                let _counted = CountCpu;
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

/// Adds its thread's CPU time to [`SERVER_CPU_MICROS`] when dropped (the thread's end).
struct CountCpu;

impl Drop for CountCpu {
    fn drop(&mut self) {
        if let Some(micros) = thread_cpu_micros() {
            SERVER_CPU_MICROS.fetch_add(micros, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// The CPU seconds each side of a download used: (curl, the server, the proxy's threads).
#[derive(Default, Clone, Copy)]
struct CpuUse {
    curl: f64,
    server: f64,
    proxy: f64,
}

impl CpuUse {
    fn now() -> CpuUse {
        CpuUse {
            curl: children_cpu_seconds(),
            server: SERVER_CPU_MICROS.load(std::sync::atomic::Ordering::SeqCst) as f64 / 1e6,
            proxy: threads_cpu_seconds(PROXY_THREADS).unwrap_or(f64::NAN),
        }
    }

    fn since(self, before: CpuUse) -> CpuUse {
        CpuUse {
            curl: self.curl - before.curl,
            server: self.server - before.server,
            proxy: self.proxy - before.proxy,
        }
    }
}

/// The names of the proxy's runtime threads in this bench.
const PROXY_THREADS: &str = "bench-proxy";

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
        .thread_name(PROXY_THREADS)
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
    let (mut direct_cpu, mut proxied_cpu) = (vec![], vec![]);
    for _ in 0..rounds {
        let before = CpuUse::now();
        let d = download(&direct_url, None, bytes);
        let between = CpuUse::now();
        let p = download("http://bench.test/", Some(&proxy), bytes);
        let after = CpuUse::now();
        direct_cpu.push(between.since(before));
        proxied_cpu.push(after.since(between));
        let (Some(d), Some(p)) = (d, p) else {
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
    rows.extend(cpu_rows(&direct_cpu, &proxied_cpu, bytes));
    Ok(rows)
}

/// Where a loopback transfer's CPU goes (seconds per GiB moved, each side apart), and the
/// ratio it implies where every process has a core of its own: each side's throughput is
/// then bounded by its slowest process, so proxied ÷ direct = max(curl, server) ÷ max(curl,
/// server, proxy). CPU time, unlike wall time, does not depend on how busy the machine is.
fn cpu_rows(direct: &[CpuUse], proxied: &[CpuUse], bytes: u64) -> Vec<Row> {
    let per_gib = 1.0 / (bytes as f64 / (1u64 << 30) as f64);
    let side = |uses: &[CpuUse], pick: fn(&CpuUse) -> f64| -> Vec<f64> {
        uses.iter().map(|u| pick(u) * per_gib).collect()
    };
    let curl_direct = side(direct, |u| u.curl);
    let server_direct = side(direct, |u| u.server);
    let curl_proxied = side(proxied, |u| u.curl);
    let server_proxied = side(proxied, |u| u.server);
    let proxy = side(proxied, |u| u.proxy);
    if proxy.iter().any(|p| p.is_nan()) {
        return vec![Row::unavailable(
            "network",
            "proxy CPU per GiB",
            "no /proc/self/task here",
        )];
    }
    let implied: Vec<f64> = direct
        .iter()
        .zip(proxied)
        .map(|(d, p)| d.curl.max(d.server) / p.curl.max(p.server).max(p.proxy))
        .collect();
    let ratio = median(&implied);
    vec![Row {
        case: "network".into(),
        metric: "CPU s per GiB: the proxy's threads (splice tunnels), in the proxied download"
            .into(),
        median: spread(&proxy, "s", 3),
        baseline: format!(
            "curl {} and the server {} (proxied); direct: curl {}, server {}",
            spread(&curl_proxied, "s", 3),
            spread(&server_proxied, "s", 3),
            spread(&curl_direct, "s", 3),
            spread(&server_direct, "s", 3),
        ),
        ratio: format!("{ratio:.2}× implied with a core per process"),
        target: "(context: ≥ 0.8× where cores ≥ processes)".into(),
        met: None,
    }]
}
