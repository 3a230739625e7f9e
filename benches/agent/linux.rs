// `cargo bench`: the acp-bash agent measured over its real stdio, each figure against a baseline
// measured in the same run (so it holds on a noisy machine), plus the engine alone.
//
// ```text
// cargo bench                          # every case (about 1–1.5 minutes)
// cargo bench -- throughput latency    # only these cases
// cargo bench -- engine                # every engine-* case
// cargo bench -- --quick               # fewer runs, 64 MiB instead of 1 GiB: checks the harness
// ```
//
// Environment: `ACP_BASH_BIN` runs another agent binary (default: the one cargo built for this
// bench); `ACP_BASH_BENCH_BYTES` changes the throughput size (default 1 GiB).
//
// Prints a Markdown table: per case, the median (min–max, n) of several runs, the baseline, the
// ratio, the target and whether it is met. Never asserts on timings: it reports them.

mod changes;
mod client;
mod engine;
mod floor;
mod floor_child;
mod floor_zygote;
mod network;
mod prompt;
mod raw;
mod sessions;
mod stats;
mod tokens;
mod wire;

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Instant;

use client::{Agent, Result};
use stats::Row;

pub struct Bench {
    bin: PathBuf,
    quick: bool,
    bytes: u64,
    work: tempfile::TempDir,
    /// The base URL of the `--model` cases: a loopback port nothing answers.
    model_listener: TcpListener,
}

impl Bench {
    fn session_dir(&self) -> &Path {
        self.work.path()
    }

    /// The agent's TMPDIR: its private files and full logs land here and are removed with it.
    fn agent_tmp(&self) -> PathBuf {
        self.work.path().join(".agent-tmp")
    }

    fn engine_log_dir(&self) -> PathBuf {
        self.work.path().join(".engine-logs")
    }

    fn stderr_log(&self) -> PathBuf {
        self.work.path().join(".agent-stderr.log")
    }

    fn spawn_agent(&self, sandbox: Option<&str>) -> Result<Agent> {
        match sandbox {
            Some(mode) => self.spawn_agent_with(&["--sandbox", mode]),
            None => self.spawn_agent_with(&[]),
        }
    }

    fn spawn_agent_with(&self, args: &[&str]) -> Result<Agent> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        std::fs::create_dir_all(self.agent_tmp()).unwrap();
        let tmp = self.agent_tmp();
        // The session store is on (the default), in the bench's own directory.
        let state = self.work.path().join(".agent-state");
        let mut envs = vec![
            ("TMPDIR", tmp.as_os_str()),
            ("XDG_STATE_HOME", state.as_os_str()),
        ];
        // With `--model` the agent needs a key to be a model agent (without one it only
        // advertises an auth method): a made-up one, never sent anywhere.
        if args.iter().any(|a| a == "--model") {
            envs.push(("OPENAI_API_KEY", OsStr::new("sk-bench-never-sent")));
        }
        Agent::spawn(&self.bin, &args, &envs, Some(&self.stderr_log()))
    }

    /// The flags of a model agent whose provider is the bench's own loopback listener
    /// ([`Bench::model_listener`]), which nothing should ever connect to before a prompt reaches
    /// the model: `--model openai:bench --base-url http://127.0.0.1:PORT/v1`.
    fn model_args(&self) -> [String; 4] {
        let port = self.model_listener.local_addr().map_or(9, |a| a.port());
        [
            "--model".into(),
            "openai:bench".into(),
            "--base-url".into(),
            format!("http://127.0.0.1:{port}/v1"),
        ]
    }

    /// How many connections reached the model's base URL so far (the listener is never
    /// answered: a connection counted here is one the agent made).
    fn model_connections(&self) -> usize {
        let _ = self.model_listener.set_nonblocking(true);
        std::iter::from_fn(|| self.model_listener.accept().ok()).count()
    }

    /// Removes the agent's full logs (a 1 GiB run leaves a 1 GiB log).
    fn clean_agent_tmp(&self) {
        let _ = std::fs::remove_dir_all(self.agent_tmp());
    }

    fn clean_engine_logs(&self) {
        let _ = std::fs::remove_dir_all(self.engine_log_dir());
    }

    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(self.stderr_log()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(3).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" / ")
    }
}

type Case = fn(&Bench) -> Result<Vec<Row>>;

const CASES: &[(&str, Case)] = &[
    ("startup", wire::startup),
    ("overhead", wire::overhead),
    ("throughput", wire::throughput),
    ("latency", wire::latency),
    ("concurrency", wire::concurrency),
    ("concurrency-modes", sessions::concurrency_modes),
    ("first-command", sessions::first_command),
    ("idle-memory", sessions::idle_memory),
    ("warm-sessions", sessions::warm_sessions),
    ("engine-overhead", |b| Ok(engine::overhead(b))),
    ("engine-throughput", |b| Ok(engine::throughput(b))),
    ("engine-chunk-capture", |b| Ok(engine::chunk_capture(b))),
    ("engine-layers", |b| Ok(engine::layers(b))),
    ("engine-view", |b| Ok(engine::view(b))),
    ("engine-limits", |b| Ok(engine::limits(b))),
    ("floor", |b| Ok(floor::floor(b))),
    ("tokens", tokens::economy),
    ("changes", changes::changes),
    ("model-prompt", |b| Ok(prompt::size(b))),
    ("network", network::network),
];

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    format!("{cores} cores ({cpu}), Linux {}", kernel.trim())
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn main() {
    // The `floor` case's Z-like process is this binary under a hidden argument.
    floor_zygote::main_if_asked();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    // cargo passes `--bench`; every other word that is not a flag names a case (or a prefix
    // such as `engine`).
    let wanted: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(String::as_str)
        .collect();
    let selected: Vec<&(&str, Case)> = CASES
        .iter()
        .filter(|(name, _)| {
            wanted.is_empty()
                || wanted
                    .iter()
                    .any(|w| *name == *w || name.starts_with(&format!("{w}-")))
        })
        .collect();
    if selected.is_empty() {
        let names: Vec<&str> = CASES.iter().map(|(n, _)| *n).collect();
        eprintln!("no case matches {wanted:?}; cases: {}", names.join(", "));
        std::process::exit(2);
    }
    let bytes = std::env::var("ACP_BASH_BENCH_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 64 << 20 } else { 1 << 30 });
    let bin = std::env::var_os("ACP_BASH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_acp-bash")));
    let bench = Bench {
        bin,
        quick,
        bytes,
        work: tempfile::Builder::new()
            .prefix("acp-bash-bench-")
            .tempdir()
            .expect("a temp dir"),
        model_listener: TcpListener::bind("127.0.0.1:0").expect("a loopback port"),
    };
    println!("machine: {}", machine());
    println!("agent: {}", bench.bin.display());
    println!("load average at start: {}", load());
    println!();
    stats::header();
    let started = Instant::now();
    for (name, case) in selected {
        let case_started = Instant::now();
        match case(&bench) {
            Ok(rows) => rows.iter().for_each(Row::print),
            Err(error) => {
                let tail = bench.stderr_tail();
                let why = if tail.is_empty() {
                    error.to_string()
                } else {
                    format!("{error} (agent stderr: {tail})")
                };
                Row::unavailable(name, "-", &why).print();
            }
        }
        eprintln!(
            "  [{name}: {:.1} s, load {}]",
            case_started.elapsed().as_secs_f64(),
            load()
        );
    }
    println!();
    println!(
        "total {:.0} s; load average at end: {}",
        started.elapsed().as_secs_f64(),
        load()
    );
}
