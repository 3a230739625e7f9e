//! The flag groups that several subcommands share: how commands run ([`EngineArgs`]) and where
//! sessions are kept ([`StoreArgs`]), with what each turns into (the engine's configuration, the
//! same flags again for a child agent or Zed's settings).

use acp_bash::acp::stream::StreamLimits;
use acp_bash::exec::env::EnvPolicy;
use acp_bash::exec::EngineConfig;
use acp_bash::jobs::JobLimits;
use acp_bash::sandbox;

use super::parse::{
    parse_assignment, parse_duration, parse_limit_count, parse_memory_limit, parse_mode,
    parse_size, Limit,
};
use std::time::Duration;

use clap::Args;

/// The environment scrub: what commands' environment keeps and gets. These apply wherever
/// [`EngineArgs`] do, and to `doctor` (which lists what the scrub would remove).
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
#[command(next_help_heading = "Environment")]
pub struct EnvArgs {
    /// Pass this variable to commands even though its name or value looks like a secret
    /// (repeatable; the scrub removes tokens, keys and passwords by default).
    #[arg(long = "keep-env", value_name = "NAME")]
    pub keep_env: Vec<String>,
    /// Set this variable for every command, after the scrub (repeatable), e.g. `PAGER=cat`.
    #[arg(long = "set-env", value_name = "NAME=VALUE", value_parser = parse_assignment)]
    pub set_env: Vec<(String, String)>,
    /// Pass the agent's whole environment to commands, secrets included.
    #[arg(long)]
    pub no_env_scrub: bool,
}

impl EnvArgs {
    /// The scrub's policy these flags choose.
    pub fn policy(&self) -> EnvPolicy {
        let mut policy = EnvPolicy::standard();
        policy.scrub = !self.no_env_scrub;
        policy.keep = self.keep_env.clone();
        policy.set = self.set_env.clone();
        policy
    }

    /// The same settings as command-line arguments.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
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
        args
    }
}

/// What workspace and read-only commands may not read or write beyond the mode's rules (the
/// credential masks and Git metadata). These apply wherever [`EngineArgs`] do, and to `doctor`
/// (which lists what is masked).
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
#[command(next_help_heading = "Protection")]
pub struct ProtectionArgs {
    /// Let workspace and read-only commands read PATH (and what is under it) although it is
    /// masked: a credential file or folder such as `~/.aws` or `~/.ssh/id_ed25519`, or the
    /// agent's own state or log folder (repeatable; `acp-bash doctor` lists what is masked).
    #[arg(long = "allow-read", value_name = "PATH")]
    pub allow_read: Vec<std::path::PathBuf>,
    /// Also mask PATH from workspace and read-only commands: a file reads as empty, a folder as
    /// an empty read-only one (repeatable).
    #[arg(long = "mask", value_name = "PATH")]
    pub mask: Vec<std::path::PathBuf>,
    /// Let workspace commands write `.git/hooks` and `.git/config` of the session folder and of
    /// the repositories under it (read-only by default). Gives up that a command cannot plant a
    /// hook or a `core.fsmonitor` / `core.pager` that your own `git` runs later, outside the
    /// sandbox.
    #[arg(long)]
    pub allow_git_hooks_and_config_writes: bool,
}

impl ProtectionArgs {
    /// These flags applied to `config`'s protection.
    pub fn apply(&self, config: &mut EngineConfig) {
        config.protection.allow_read = self.allow_read.iter().map(|p| absolute(p)).collect();
        config.protection.mask = self.mask.iter().map(|p| absolute(p)).collect();
        config.protection.git_metadata_writable = self.allow_git_hooks_and_config_writes;
    }

    /// The same settings as command-line arguments (paths made absolute: a child agent may
    /// start elsewhere).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (flag, paths) in [("--allow-read", &self.allow_read), ("--mask", &self.mask)] {
            for path in paths {
                args.push(flag.into());
                args.push(absolute(path).to_string_lossy().into_owned());
            }
        }
        if self.allow_git_hooks_and_config_writes {
            args.push("--allow-git-hooks-and-config-writes".into());
        }
        args
    }
}

/// Workspace mode's network: the allowlist (the default) or the whole network.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Network {
    /// Commands reach only allowed hosts, through the agent's proxy.
    #[default]
    Allowlist,
    /// Commands reach the whole network (gives up that a command cannot send the session's
    /// files anywhere).
    Full,
}

/// Workspace mode's network allowlist (`notes/2026-12-06-network-allowlist.md`).
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
#[command(next_help_heading = "Network")]
pub struct NetworkArgs {
    /// Workspace commands' network: `allowlist` (the default: a network namespace with only a
    /// loopback, and a proxy the agent runs that reaches only the package registries and the
    /// hosts --allow-host adds) or `full` (the whole network, as before; gives up that a
    /// command cannot send your files anywhere).
    #[arg(long, value_name = "MODE", value_enum)]
    pub network: Option<Network>,
    /// Also allow this host in workspace mode: `example.com`, `*.example.com` (its
    /// subdomains) or an IP address (repeatable).
    #[arg(long = "allow-host", value_name = "HOST", value_parser = parse_host)]
    pub allow_host: Vec<acp_bash::netproxy::HostPattern>,
    /// Refuse this host even where an allowed entry matches (repeatable; deny wins).
    #[arg(long = "deny-host", value_name = "HOST", value_parser = parse_host)]
    pub deny_host: Vec<acp_bash::netproxy::HostPattern>,
    /// Send connections for NAME to IP:PORT instead of resolving it, and allow NAME: for a
    /// registry mirror, and for tests against a loopback server (repeatable).
    #[arg(long = "map-host", value_name = "NAME=IP:PORT", value_parser = parse_map_host)]
    pub map_host: Vec<(String, std::net::SocketAddr)>,
    /// Tests: like --map-host without allowing NAME (it is refused, and asked about, until
    /// allowed).
    #[arg(long = "map-unlisted-host", value_name = "NAME=IP:PORT", value_parser = parse_map_host, hide = true)]
    pub map_unlisted_host: Vec<(String, std::net::SocketAddr)>,
}

fn parse_host(text: &str) -> Result<acp_bash::netproxy::HostPattern, String> {
    acp_bash::netproxy::HostPattern::parse(text)
}

fn parse_map_host(text: &str) -> Result<(String, std::net::SocketAddr), String> {
    acp_bash::netproxy::Rules::parse_map(text)
}

impl NetworkArgs {
    /// The allowlist's rules (`None`: `--network full`).
    pub fn rules(&self) -> Option<acp_bash::netproxy::Rules> {
        if self.network == Some(Network::Full) {
            return None;
        }
        let mut rules = acp_bash::netproxy::Rules::default();
        for pattern in &self.allow_host {
            rules = rules.allow(pattern.clone());
        }
        for pattern in &self.deny_host {
            rules = rules.deny(pattern.clone());
        }
        for (name, to) in &self.map_host {
            // Parsed already: a bad name was refused then.
            rules = rules.clone().map(name, *to).unwrap_or(rules);
        }
        for (name, to) in &self.map_unlisted_host {
            rules = rules.clone().map_unlisted(name, *to).unwrap_or(rules);
        }
        Some(rules)
    }

    /// The same settings as command-line arguments.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.network == Some(Network::Full) {
            args.extend(["--network".to_string(), "full".to_string()]);
        }
        for pattern in &self.allow_host {
            args.extend(["--allow-host".to_string(), pattern.to_string()]);
        }
        for pattern in &self.deny_host {
            args.extend(["--deny-host".to_string(), pattern.to_string()]);
        }
        for (name, to) in &self.map_host {
            args.extend(["--map-host".to_string(), format!("{name}={to}")]);
        }
        for (name, to) in &self.map_unlisted_host {
            args.extend(["--map-unlisted-host".to_string(), format!("{name}={to}")]);
        }
        args
    }
}

/// `path` made absolute against the current directory (a child agent may start elsewhere).
fn absolute(path: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// How commands run. These apply to `serve` and `run`, to the child agent that `demo` starts,
/// and `zed-config` writes them into the snippet.
#[derive(Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Engine")]
pub struct EngineArgs {
    /// How long a command may run before it is killed, e.g. `90s`, `10m`, `1h` (default 10m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// What commands may touch: `workspace` (write only under the session's directory and the
    /// temp dir), `read-only` (write only the temp dir, no network), `full` (no file or network
    /// confinement; background processes still end with the command) or `off` (no kernel
    /// sandbox at all; clients may then choose `off` too).
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    sandbox: Option<sandbox::Mode>,
    /// How many background jobs (`/bg`) may run at once in each session (default 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_jobs: Option<u32>,
    /// Kill a background job after it has run this long, e.g. `30m`, `2h` (default: never;
    /// `--timeout` is for commands and does not apply to jobs).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    job_timeout: Option<Duration>,
    /// How long an MCP server the client passes may take to start, and each call of its
    /// tools, e.g. `30s` (default 60s). A server that does not start in time is left out (the
    /// user is told); a call that takes longer answers the model an error.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    mcp_timeout: Option<Duration>,
    /// Live output for clients without Zed's terminal card (acpx, Toad, …): `on` (the default)
    /// updates the call about 3 times a second with the last lines of output; `off` shows the
    /// output only once the command has ended.
    #[arg(long, value_name = "on|off")]
    plain_live: Option<OnOff>,
    /// The largest prompt (the script's text) the agent runs, e.g. `1MiB` (the default),
    /// `512KiB`, `4MiB`. A larger prompt is refused with a message that names this flag; an
    /// input line longer than eight times this plus 1 MiB is discarded as it arrives.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_prompt_bytes: Option<u64>,
    /// How much of one command's output its log file keeps, e.g. `256MiB` (the default) or
    /// `1GiB`. A command that prints more than the result keeps (32 KiB head + 32 KiB tail)
    /// has its output written to a log; the log stops at this size and the result says that
    /// it holds only the first part.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_log_bytes: Option<u64>,
    /// The total size of the log directory, e.g. `2GiB` (the default). Before a new log starts,
    /// the oldest logs are removed until the rest plus the new log's cap fit. While the disk
    /// is nearly full (less than 1 GiB or 5% free, whichever is smaller), no log is written and
    /// the result says so.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    log_budget: Option<u64>,
    /// How many processes (and threads) one command may have at once, e.g. `512`, or `none`
    /// (default 4096: room for parallel builds). Stops fork bombs. Enforced per command in
    /// workspace and read-only mode (see `acp-bash doctor`).
    #[arg(long, value_name = "N", value_parser = parse_limit_count)]
    max_processes: Option<Limit>,
    /// How much memory one command may use, e.g. `4G`, `512M`, or `none` (the default: a
    /// build's linker can need many GiB). Enforced for the command's whole process tree by a
    /// memory cgroup where the agent may make one (e.g. as root; over it the kernel kills a
    /// process of the command), and as RLIMIT_DATA per process everywhere (see `acp-bash doctor`).
    #[arg(long, value_name = "SIZE", value_parser = parse_memory_limit)]
    max_memory: Option<Limit>,
    /// How many sessions keep their sandbox helpers between commands (default 8): a zygote per
    /// mode, which makes the next command 1–2 ms faster. The sessions used most recently keep
    /// theirs, and only the two used last also keep a spare PID 1 (at most N + 2 helper
    /// processes per mode); another session's next command starts them again, as its first
    /// did. `0` keeps none.
    #[arg(long, value_name = "N")]
    max_warm_sessions: Option<usize>,
    /// How long a session keeps its sandbox helpers after its last command, e.g. `5m` (the
    /// default), `30s`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    warm_idle: Option<Duration>,
    /// Refuse to run commands in a mode whose sandbox is not whole on this machine (a layer
    /// is missing: `acp-bash doctor` says which, why, and how to fix it). Each refused command
    /// says what is missing. Without it such commands run with what holds, and each session's
    /// first command in that mode says what is missing.
    #[arg(long)]
    require_sandbox: bool,
    /// Show a typed command that only reads a file, searches or lists (`cat f`, `rg foo`, `ls`)
    /// as a read or search card with the file's location, as a model's commands are, instead of
    /// a terminal card. Display only: the command runs the same.
    #[arg(long)]
    classify_typed: bool,
    /// Do not ask the client (`session/request_permission`) when the sandbox refuses a command
    /// a host, a write or the network: the command just fails, as before. On by default
    /// (README, "Permission requests").
    #[arg(long)]
    no_permission_requests: bool,
    /// Do not show what each workspace-mode command changed in the session folder (an edit
    /// card with a diff per file after the command's card, and a `[changed: …]` line for the
    /// model). On by default; it watches the folder with inotify and keeps the earlier
    /// versions of its text files in the agent's memory (bounded).
    #[arg(long)]
    no_changes: bool,
    /// What commands' environment keeps and gets.
    #[command(flatten)]
    pub env: EnvArgs,
    /// What commands may not read or write beyond the mode's rules.
    #[command(flatten)]
    pub protection: ProtectionArgs,
    /// Workspace mode's network allowlist.
    #[command(flatten)]
    pub network: NetworkArgs,
}

/// A switch on the command line.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnOff {
    On,
    Off,
}

impl EngineArgs {
    pub fn config(&self) -> EngineConfig {
        // Every thread of the binary's runtime that polls a run (its worker, the thread in
        // `block_on`) lives until the runtime shuts down, after the commands are reaped.
        let mut config = EngineConfig::default().fork_bare_commands_in_place(true);
        if let Some(timeout) = self.timeout {
            config.default_timeout = timeout;
        }
        config.env = self.env.policy();
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
        if let Some(max) = self.max_warm_sessions {
            config.max_warm_sessions = max;
        }
        if let Some(idle) = self.warm_idle {
            config.warm_idle = idle;
        }
        config.require_sandbox = self.require_sandbox;
        config.track_changes = !self.no_changes;
        self.protection.apply(&mut config);
        config.network_proxy = self.network.rules().map(acp_bash::netproxy::Proxy::new);
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

    /// Whether to ask the client when the sandbox refuses a command (`--no-permission-requests`).
    pub fn permission_requests(&self) -> bool {
        !self.no_permission_requests
    }

    /// Whether the shell driver shows typed reads and searches as such (`--classify-typed`).
    pub fn classify_typed(&self) -> bool {
        self.classify_typed
    }

    /// The bound on an MCP server's start and each call (`--mcp-timeout`).
    pub fn mcp_timeout(&self) -> Duration {
        self.mcp_timeout.unwrap_or(acp_bash::mcp::DEFAULT_TIMEOUT)
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
        args.extend(self.env.to_args());
        args.extend(self.network.to_args());
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
        if let Some(timeout) = self.mcp_timeout {
            args.push("--mcp-timeout".into());
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
        if let Some(max) = self.max_warm_sessions {
            args.push("--max-warm-sessions".into());
            args.push(max.to_string());
        }
        if let Some(idle) = self.warm_idle {
            args.push("--warm-idle".into());
            args.push(format!("{}ms", idle.as_millis()));
        }
        if self.require_sandbox {
            args.push("--require-sandbox".into());
        }
        if self.classify_typed {
            args.push("--classify-typed".into());
        }
        if self.no_permission_requests {
            args.push("--no-permission-requests".into());
        }
        if self.no_changes {
            args.push("--no-changes".into());
        }
        args.extend(self.protection.to_args());
        args
    }
}

/// Where sessions are kept. These apply to `serve`, and `zed-config` writes them into the
/// snippet (`demo` and `run` keep nothing).
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
#[command(next_help_heading = "Sessions")]
pub struct StoreArgs {
    /// Keep sessions (directory, mode, title, recent calls with the head and tail of their
    /// output) in DIR/sessions, so that an editor can list, reopen and resume them after the
    /// agent restarts; full-output logs go to DIR/logs. Default: $XDG_STATE_HOME/acp-bash, else
    /// ~/.local/state/acp-bash.
    #[arg(long, value_name = "DIR", conflicts_with = "no_history")]
    state_dir: Option<std::path::PathBuf>,
    /// Keep nothing on disk: sessions end with the agent, and session/list, load, resume and
    /// delete are not offered (session/close still is).
    #[arg(long)]
    no_history: bool,
}

impl StoreArgs {
    /// The session store these flags choose; `None` with `--no-history`, or when there is no
    /// state directory (no `--state-dir`, `$XDG_STATE_HOME` or `$HOME`).
    pub fn store(&self) -> Option<acp_bash::store::Store> {
        if self.no_history {
            return None;
        }
        let dir = self.state_dir_path();
        if dir.is_none() {
            tracing::warn!("no state directory (set --state-dir or HOME): sessions are not kept");
        }
        dir.map(|dir| acp_bash::store::Store::new(&dir))
    }

    /// Where full-output logs go with these flags: `DIR/logs` for `--state-dir DIR` (else the
    /// engine's default, the default state directory's `logs`).
    pub fn log_dir(&self) -> Option<std::path::PathBuf> {
        self.state_dir.as_ref().map(|dir| dir.join("logs"))
    }

    /// The state directory these flags name (also with `--no-history`), if any.
    pub fn state_dir_path(&self) -> Option<std::path::PathBuf> {
        let env = |name| std::env::var_os(name).map(std::path::PathBuf::from);
        acp_bash::store::state_dir(
            self.state_dir.as_deref(),
            env("XDG_STATE_HOME").as_deref(),
            env("HOME").as_deref(),
        )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{Cli, Invocation};
    use clap::Parser;

    /// The engine flags of a command line that serves.
    fn engine(args: &[&str]) -> EngineArgs {
        match Cli::try_parse_from(args).unwrap().invocation().unwrap() {
            Invocation::Serve(serve) => serve.engine,
            Invocation::Run(run) => run.engine,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn engine_flags_round_trip_through_child_arguments() {
        let cli_engine = engine(&[
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
            "--classify-typed",
            "serve",
        ]);
        let args: Vec<String> = std::iter::once("acp-bash".to_string())
            .chain(cli_engine.to_args())
            .collect();
        let again_engine = engine(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let (a, b) = (cli_engine.config(), again_engine.config());
        // The binary's runtime threads outlive the commands they start.
        assert!(a.fork_bare_commands_in_place && b.fork_bare_commands_in_place);
        assert_eq!(a.default_timeout, b.default_timeout);
        assert_eq!(a.env.keep, b.env.keep);
        assert_eq!(a.env.set, b.env.set);
        assert_eq!(a.env.scrub, b.env.scrub);
        assert_eq!(a.sandbox_mode, b.sandbox_mode);
        assert_eq!(cli_engine.stream_limits(), again_engine.stream_limits());
        assert_eq!(cli_engine.stream_limits().plain_live, None);
        assert!(cli_engine.classify_typed() && again_engine.classify_typed());
        assert_eq!(a.max_log_bytes, b.max_log_bytes);
        assert_eq!(a.log_budget_bytes, b.log_budget_bytes);
        assert_eq!(
            cli_engine.max_prompt_bytes(),
            again_engine.max_prompt_bytes()
        );
        assert_eq!(again_engine.max_prompt_bytes(), 2 << 20);
        assert_eq!(b.max_log_bytes, 64 << 20);
        assert_eq!(b.log_budget_bytes, 1 << 30);
        assert!(!a.env.scrub);
        assert_eq!(a.sandbox_mode, sandbox::Mode::ReadOnly);
        assert_eq!(cli_engine.job_limits(), again_engine.job_limits());
        assert_eq!(cli_engine.job_limits().max_running, 3);
        assert_eq!(
            cli_engine.job_limits().timeout,
            Some(Duration::from_secs(90 * 60))
        );
        assert_eq!(
            engine(&["acp-bash"]).job_limits(),
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
            let config = engine(args).config();
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
        assert!(engine(&["acp-bash"]).to_args().is_empty());
    }
}
