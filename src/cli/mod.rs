//! The `acp-bash` command line, one file per subcommand: [`serve`] (the default: ACP over stdio),
//! [`demo`], [`run`], [`doctor`] and [`zed_config`]. This module holds what they share: the
//! arguments, the engine flags, logging, and the child agent that `demo` and `run` talk to.
//!
//! Owns: argument parsing, logging setup, and the terminal rendering of `demo` and `run`.
//! Everything protocol-related lives in `acp_bash::acp`.

pub mod demo;
pub mod doctor;
pub mod model;
pub mod run;
pub mod serve;
pub mod zed_config;

use std::time::Duration;

use acp_bash::acp::client::{AcpClient, ClientProfile};
use acp_bash::acp::stream::StreamLimits;
use acp_bash::exec::EngineConfig;
use acp_bash::jobs::JobLimits;
use acp_bash::sandbox;
use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// An ACP agent whose tool is a sandboxed bash: every prompt is a bash script, run by the agent
/// itself and shown as a live terminal card in Zed (a console block in other ACP clients).
///
/// With no command, serves ACP on stdin/stdout: that is how an editor starts it.
#[derive(Parser, Debug)]
#[command(name = "acp-bash", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub model: model::ModelArgs,
    /// How much the agent logs to stderr: error, warn, info, debug or trace (or any RUST_LOG
    /// filter). Overrides RUST_LOG; the default is warn. Logs never go to stdout.
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve ACP v1 on stdin/stdout (the default). stdout carries only protocol messages.
    Serve,
    /// Start acp-bash as a child agent and run a few representative commands through it, showing
    /// what Zed's terminal card and what other clients' console block display.
    Demo,
    /// Run one script through the real protocol, print its output, exit with its exit status.
    Run(RunArgs),
    /// Print the settings.json snippet that adds this binary to Zed's agents.
    ZedConfig,
    /// Check each sandbox layer on this machine (Landlock, namespaces, private /proc, network
    /// isolation): whether it works here and, if not, why and what to do about it.
    Doctor,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Act as a client without the terminal card (like any non-Zed editor): print the console
    /// block that such a client shows instead of the live output.
    #[arg(long)]
    pub plain: bool,
    /// Also print every JSON-RPC line exchanged with the agent, to stderr (so that stdout stays
    /// the command's output): `->` client to agent, `<-` agent to client.
    #[arg(long)]
    pub transcript: bool,
    /// The bash script (several words are joined with spaces). It runs in the current directory.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "SCRIPT"
    )]
    pub script: Vec<String>,
}

/// How commands run. These apply to `serve`, and to the child agent that `demo` and `run` start.
#[derive(Args, Debug, Clone, Default)]
pub struct EngineArgs {
    /// How long a command may run before it is killed, e.g. `90s`, `10m`, `1h` (default 10m).
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Pass this variable to commands even though its name or value looks like a secret
    /// (repeatable; the scrub removes tokens, keys and passwords by default).
    #[arg(long = "keep-env", global = true, value_name = "NAME")]
    keep_env: Vec<String>,
    /// Set this variable for every command, after the scrub (repeatable), e.g. `PAGER=cat`.
    #[arg(long = "set-env", global = true, value_name = "NAME=VALUE", value_parser = parse_assignment)]
    set_env: Vec<(String, String)>,
    /// Pass the agent's whole environment to commands, secrets included.
    #[arg(long, global = true)]
    no_env_scrub: bool,
    /// What commands may touch: `workspace` (write only under the session's directory and the
    /// temp dir), `read-only` (write only the temp dir, no network), `full` (no file or network
    /// confinement; background processes still end with the command) or `off` (no kernel
    /// sandbox at all; clients may then choose `off` too).
    #[arg(long, global = true, value_name = "MODE", value_parser = parse_mode)]
    sandbox: Option<sandbox::Mode>,
    /// How many background jobs (`/bg`) may run at once in each session (default 8).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_jobs: Option<u32>,
    /// Kill a background job after it has run this long, e.g. `30m`, `2h` (default: never;
    /// `--timeout` is for commands and does not apply to jobs).
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    job_timeout: Option<Duration>,
    /// Live output for clients without Zed's terminal card (acpx, Toad, …): `on` (the default)
    /// updates the call about 3 times a second with the last lines of output; `off` shows the
    /// output only once the command has ended.
    #[arg(long, global = true, value_name = "on|off")]
    plain_live: Option<OnOff>,
    /// The largest prompt (the script's text) the agent runs, e.g. `1MiB` (the default),
    /// `512KiB`, `4MiB`. A larger prompt is refused with a message that names this flag; an
    /// input line longer than eight times this plus 1 MiB is discarded as it arrives.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size)]
    max_prompt_bytes: Option<u64>,
    /// How much of one command's output its log file keeps, e.g. `256MiB` (the default) or
    /// `1GiB`. A command that prints more than the result keeps (32 KiB head + 32 KiB tail)
    /// has its output written to a log; the log stops at this size and the result says that
    /// it holds only the first part.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size)]
    max_log_bytes: Option<u64>,
    /// The total size of the log directory, e.g. `2GiB` (the default). Before a new log starts,
    /// the oldest logs are removed until the rest plus the new log's cap fit. While the disk
    /// is nearly full (less than 1 GiB or 5% free, whichever is smaller), no log is written and
    /// the result says so.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size)]
    log_budget: Option<u64>,
    /// How many processes (and threads) one command may have at once, e.g. `512`, or `none`
    /// (default 4096: room for parallel builds). Stops fork bombs. Enforced per command in
    /// workspace and read-only mode (see `acp-bash doctor`).
    #[arg(long, global = true, value_name = "N", value_parser = parse_limit_count)]
    max_processes: Option<Limit>,
    /// How much memory one command may use, e.g. `4G`, `512M`, or `none` (the default: a
    /// build's linker can need many GiB). Enforced for the command's whole process tree by a
    /// memory cgroup where the agent may make one (e.g. as root; over it the kernel kills a
    /// process of the command), and as RLIMIT_DATA per process everywhere (see `acp-bash doctor`).
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_memory_limit)]
    max_memory: Option<Limit>,
}

/// A switch on the command line.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnOff {
    On,
    Off,
}

impl EngineArgs {
    pub fn config(&self) -> EngineConfig {
        let mut config = EngineConfig::default();
        if let Some(timeout) = self.timeout {
            config.default_timeout = timeout;
        }
        config.env.scrub = !self.no_env_scrub;
        config.env.keep = self.keep_env.clone();
        config.env.set = self.set_env.clone();
        if let Some(mode) = self.sandbox {
            config.sandbox_mode = mode;
        }
        if let Some(bytes) = self.max_log_bytes {
            config.max_log_bytes = bytes;
        }
        if let Some(bytes) = self.log_budget {
            config.log_budget_bytes = bytes;
        }
        if let Some(Limit(limit)) = self.max_processes {
            config.limits.max_processes = limit;
        }
        if let Some(Limit(limit)) = self.max_memory {
            config.limits.max_memory = limit;
        }
        config
    }

    /// The limits of each session's background jobs.
    pub fn job_limits(&self) -> JobLimits {
        let mut limits = JobLimits::default();
        if let Some(max) = self.max_jobs {
            limits.max_running = max as usize;
        }
        limits.timeout = self.job_timeout;
        limits
    }

    /// How live output reaches the client (`--plain-live`).
    pub fn stream_limits(&self) -> StreamLimits {
        let mut limits = StreamLimits::default();
        if self.plain_live == Some(OnOff::Off) {
            limits.plain_live = None;
        }
        limits
    }

    /// The prompt limit for the agent (`--max-prompt-bytes`).
    pub fn max_prompt_bytes(&self) -> usize {
        self.max_prompt_bytes
            .map_or(acp_bash::acp::DEFAULT_MAX_PROMPT_BYTES, |bytes| {
                usize::try_from(bytes).unwrap_or(usize::MAX)
            })
    }

    /// The same settings as command-line arguments, for a child agent or Zed's settings.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(timeout) = self.timeout {
            args.push("--timeout".into());
            args.push(if timeout.subsec_millis() == 0 {
                format!("{}s", timeout.as_secs())
            } else {
                format!("{}ms", timeout.as_millis())
            });
        }
        for name in &self.keep_env {
            args.push("--keep-env".into());
            args.push(name.clone());
        }
        for (name, value) in &self.set_env {
            args.push("--set-env".into());
            args.push(format!("{name}={value}"));
        }
        if self.no_env_scrub {
            args.push("--no-env-scrub".into());
        }
        if let Some(mode) = self.sandbox {
            args.push("--sandbox".into());
            args.push(mode.id().into());
        }
        if let Some(max) = self.max_jobs {
            args.push("--max-jobs".into());
            args.push(max.to_string());
        }
        if let Some(timeout) = self.job_timeout {
            args.push("--job-timeout".into());
            args.push(format!("{}ms", timeout.as_millis()));
        }
        if let Some(plain_live) = self.plain_live {
            args.push("--plain-live".into());
            args.push(if plain_live == OnOff::On { "on" } else { "off" }.into());
        }
        for (flag, value) in [
            ("--max-prompt-bytes", self.max_prompt_bytes),
            ("--max-log-bytes", self.max_log_bytes),
            ("--log-budget", self.log_budget),
        ] {
            if let Some(bytes) = value {
                args.push(flag.into());
                args.push(bytes.to_string());
            }
        }
        let none = || "none".to_string();
        if let Some(Limit(limit)) = self.max_processes {
            args.push("--max-processes".into());
            args.push(limit.map_or_else(none, |n| n.to_string()));
        }
        if let Some(Limit(limit)) = self.max_memory {
            args.push("--max-memory".into());
            args.push(limit.map_or_else(none, |n| n.to_string()));
        }
        args
    }
}

/// A resource limit from the command line: `None` is `none` (no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit(pub Option<u64>);

/// Parses a count, or `none` for no limit.
fn parse_limit_count(text: &str) -> Result<Limit, String> {
    parse_count(text).map(Limit)
}

fn parse_count(text: &str) -> Result<Option<u64>, String> {
    match text.trim() {
        "none" | "unlimited" => Ok(None),
        n => n
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| format!("expected a positive number or `none`, got `{text}`")),
    }
}

/// Parses `512M`, `4G`, `1T`, `65536` (bytes, or K/M/G/T binary units), or `none`.
fn parse_memory_limit(text: &str) -> Result<Limit, String> {
    parse_bytes(text).map(Limit)
}

fn parse_bytes(text: &str) -> Result<Option<u64>, String> {
    let t = text.trim();
    if t == "none" || t == "unlimited" {
        return Ok(None);
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let shift = match unit
        .trim_end_matches(['i', 'B', 'b'])
        .to_ascii_uppercase()
        .as_str()
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => {
            return Err(format!(
                "unknown size unit in `{text}`: use K, M, G or T (e.g. 4G)"
            ))
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .filter(|n| *n > 0)
        .map(Some)
        .ok_or_else(|| format!("expected a size such as 512M or 4G, or `none`, got `{text}`"))
}

/// Where sessions are kept. These apply to `serve` (`demo` and `run` keep nothing).
#[derive(Args, Debug, Clone, Default)]
pub struct StoreArgs {
    /// Keep sessions (directory, mode, title, recent calls with the head and tail of their
    /// output) in DIR/sessions, so that an editor can list, reopen and resume them after the
    /// agent restarts. Default: $XDG_STATE_HOME/acp-bash, else ~/.local/state/acp-bash.
    #[arg(long, global = true, value_name = "DIR", conflicts_with = "no_history")]
    state_dir: Option<std::path::PathBuf>,
    /// Keep nothing on disk: sessions end with the agent, and session/list, load, resume and
    /// delete are not offered (session/close still is).
    #[arg(long, global = true)]
    no_history: bool,
}

impl StoreArgs {
    /// The session store these flags choose; `None` with `--no-history`, or when there is no
    /// state directory (no `--state-dir`, `$XDG_STATE_HOME` or `$HOME`).
    pub fn store(&self) -> Option<acp_bash::store::Store> {
        if self.no_history {
            return None;
        }
        let env = |name| std::env::var_os(name).map(std::path::PathBuf::from);
        let dir = acp_bash::store::state_dir(
            self.state_dir.as_deref(),
            env("XDG_STATE_HOME").as_deref(),
            env("HOME").as_deref(),
        );
        if dir.is_none() {
            tracing::warn!("no state directory (set --state-dir or HOME): sessions are not kept");
        }
        dir.map(|dir| acp_bash::store::Store::new(&dir))
    }

    /// The same settings as command-line arguments (for Zed's settings).
    pub fn to_args(&self) -> Vec<String> {
        match (&self.state_dir, self.no_history) {
            (_, true) => vec!["--no-history".into()],
            (Some(dir), false) => vec!["--state-dir".into(), dir.to_string_lossy().into_owned()],
            (None, false) => Vec::new(),
        }
    }
}

/// Parses `90s`, `10m`, `1h`, `500ms` or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: write e.g. 90s, 10m or 1h"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" | "secs" => number,
        "ms" => number / 1000.0,
        "m" | "min" | "mins" => number * 60.0,
        "h" => number * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use ms, s, m or h"
            ))
        }
    };
    if seconds <= 0.0 || !seconds.is_finite() {
        return Err(format!("{text:?}: the timeout must be more than zero"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses a size: a number of bytes, optionally with a unit (`K`/`KiB`, `M`/`MiB`, `G`/`GiB`,
/// all powers of 1024; `B` or none for bytes).
fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size: write e.g. 1MiB, 512KiB or 2GiB"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use KiB, MiB or GiB"
            ))
        }
    };
    let bytes = number
        .checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too large"))?;
    if bytes == 0 {
        return Err(format!("{text:?}: the size must be more than zero"));
    }
    Ok(bytes)
}

fn parse_assignment(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

fn parse_mode(text: &str) -> Result<sandbox::Mode, String> {
    sandbox::Mode::from_id(text).ok_or_else(|| {
        format!("unknown sandbox mode {text:?}: use workspace, read-only, full or off")
    })
}

pub fn init_logging(level: Option<&str>) {
    let filter = match level {
        Some(level) => EnvFilter::try_new(level).unwrap_or_else(|error| {
            eprintln!("acp-bash: ignoring --log-level {level:?}: {error}");
            EnvFilter::new("warn")
        }),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

/// A client for a child `acp-bash serve` with the same engine settings as this invocation.
pub fn child_client(
    engine: &EngineArgs,
    log_level: Option<&str>,
    profile: ClientProfile,
) -> Result<AcpClient, String> {
    let exe = std::env::current_exe()
        .map_err(|error| format!("cannot find this binary's path: {error}"))?;
    let mut args = vec!["serve".to_string()];
    args.extend(engine.to_args());
    // A one-shot run keeps no session.
    args.push("--no-history".into());
    if let Some(level) = log_level {
        args.push("--log-level".into());
        args.push(level.into());
    }
    Ok(AcpClient::new(exe, args).profile(profile))
}

pub fn describe_error(error: &agent_client_protocol::Error) -> String {
    match &error.data {
        Some(data) => format!("{} ({data})", error.message),
        None => error.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_people_write_them() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5y").is_err());
        assert!(parse_duration("0s").is_err());
    }

    #[test]
    fn engine_flags_round_trip_through_child_arguments() {
        let cli = Cli::try_parse_from([
            "acp-bash",
            "--timeout",
            "90s",
            "--keep-env",
            "GH_TOKEN",
            "--set-env",
            "PAGER=cat",
            "--no-env-scrub",
            "--sandbox",
            "read-only",
            "--max-jobs",
            "3",
            "--job-timeout",
            "90m",
            "--plain-live",
            "off",
            "--max-prompt-bytes",
            "2MiB",
            "--max-log-bytes",
            "64M",
            "--log-budget",
            "1GiB",
            "serve",
        ])
        .unwrap();
        let again = Cli::try_parse_from(
            std::iter::once("acp-bash".to_string()).chain(cli.engine.to_args()),
        )
        .unwrap();
        let (a, b) = (cli.engine.config(), again.engine.config());
        assert_eq!(a.default_timeout, b.default_timeout);
        assert_eq!(a.env.keep, b.env.keep);
        assert_eq!(a.env.set, b.env.set);
        assert_eq!(a.env.scrub, b.env.scrub);
        assert_eq!(a.sandbox_mode, b.sandbox_mode);
        assert_eq!(cli.engine.stream_limits(), again.engine.stream_limits());
        assert_eq!(cli.engine.stream_limits().plain_live, None);
        assert_eq!(a.max_log_bytes, b.max_log_bytes);
        assert_eq!(a.log_budget_bytes, b.log_budget_bytes);
        assert_eq!(
            cli.engine.max_prompt_bytes(),
            again.engine.max_prompt_bytes()
        );
        assert_eq!(again.engine.max_prompt_bytes(), 2 << 20);
        assert_eq!(b.max_log_bytes, 64 << 20);
        assert_eq!(b.log_budget_bytes, 1 << 30);
        assert!(!a.env.scrub);
        assert_eq!(a.sandbox_mode, sandbox::Mode::ReadOnly);
        assert_eq!(cli.engine.job_limits(), again.engine.job_limits());
        assert_eq!(cli.engine.job_limits().max_running, 3);
        assert_eq!(
            cli.engine.job_limits().timeout,
            Some(Duration::from_secs(90 * 60))
        );
        assert_eq!(
            Cli::try_parse_from(["acp-bash"])
                .unwrap()
                .engine
                .job_limits(),
            JobLimits::default(),
            "jobs have no timeout unless --job-timeout sets one"
        );
        assert!(Cli::try_parse_from(["acp-bash", "--max-jobs", "0"]).is_err());
    }

    /// The defaults README and `--help` promise, as literals (not the code's constants): a
    /// command line without engine flags gives a 10-minute timeout, the scrub on and the
    /// `workspace` sandbox.
    #[test]
    fn no_engine_flags_mean_the_documented_defaults() {
        for args in [
            &["acp-bash"][..],
            &["acp-bash", "serve"],
            &["acp-bash", "run", "--", "true"],
        ] {
            let config = Cli::try_parse_from(args).unwrap().engine.config();
            assert_eq!(
                config.default_timeout,
                Duration::from_secs(10 * 60),
                "{args:?}"
            );
            assert!(config.env.scrub, "{args:?}");
            assert!(config.env.keep.is_empty() && config.env.set.is_empty());
            assert_eq!(config.sandbox_mode, sandbox::Mode::Workspace, "{args:?}");
            assert_eq!(config.keep_head_bytes, 32 * 1024);
            assert_eq!(config.keep_tail_bytes, 32 * 1024);
        }
        assert!(Cli::try_parse_from(["acp-bash"])
            .unwrap()
            .engine
            .to_args()
            .is_empty());
    }

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("2gib"), Ok(2 << 30));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5TB").is_err());
    }

    #[test]
    fn run_takes_the_script_after_a_double_dash() {
        let cli =
            Cli::try_parse_from(["acp-bash", "run", "--plain", "--", "echo", "-n", "hi"]).unwrap();
        match cli.command {
            Some(Command::Run(args)) => {
                assert!(args.plain);
                assert_eq!(args.script.join(" "), "echo -n hi");
            }
            other => panic!("{other:?}"),
        }
    }
}
