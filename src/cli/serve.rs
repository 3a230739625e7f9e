//! `acp-bash serve` (the default): ACP v1 on stdin/stdout until EOF or a termination signal.
//! stdout carries only protocol messages; logs go to stderr. Started by hand on a terminal, it
//! first says on stderr what it is and what to try ([`FIRST_CONTACT`]), and serves all the same.

use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use acp_bash::acp::{AcpBashAgent, AgentStdio, TransportLimits};
use acp_bash::driver::model::keyfile;
use acp_bash::driver::ShellDriver;
use acp_bash::exec::Engine;

use super::model::ModelArgs;
use super::{EngineArgs, StoreArgs};

/// The line a bare `acp-bash` prints on stderr when its stdin is a terminal.
pub const FIRST_CONTACT: &str = "acp-bash: an ACP agent that your editor starts; it now waits \
     for JSON-RPC on stdin (Ctrl-D quits). To try it: `acp-bash demo`, or `acp-bash run -- ls`; \
     `acp-bash --help` for more.";

/// Serves ACP on stdin/stdout until EOF or a termination signal.
///
/// The agent is built on this thread; the SDK answers `initialize` like every other request
/// (`notes/2026-12-06-conventional-build.md`). The connection runs as a task on the runtime's worker, not in `block_on` on this thread:
/// the protocol's tasks and the commands' tasks wake each other on one thread, without a
/// hand-off to a parked main thread for every message (0.1–0.2 ms per prompt here).
pub fn serve(engine: &EngineArgs, store: &StoreArgs, model: &ModelArgs) -> ExitCode {
    if std::io::stdin().is_terminal() {
        // Someone typed `acp-bash` in a terminal: say what this is (on stderr; stdout stays
        // protocol only) and keep serving, in case they meant it.
        eprintln!("{FIRST_CONTACT}");
    }
    // Before any other thread: the agent's memory cannot be read by its commands (ptrace,
    // /proc/PID/mem), whatever thread they are forked from.
    acp_bash::sandbox::protect_agent_process();
    let (agent, transport, temp_root) = agent_on_stdio(engine, store, model);
    // What agents that were killed left behind (their session folders, their cgroups), off
    // the path to the first answer.
    let tidy = std::thread::Builder::new()
        .name("acp-bash-tidy".into())
        .spawn(move || acp_bash::exec::remove_abandoned(temp_root.as_deref()));
    if let Err(error) = tidy {
        tracing::debug!(%error, "no thread to remove what gone agents left");
    }
    let code = super::block_on(async move {
        match tokio::spawn(serve_on_worker(agent, transport)).await {
            Ok(code) => code,
            Err(error) => {
                eprintln!("acp-bash: the agent failed: {error}");
                ExitCode::FAILURE
            }
        }
    });
    // The commands are gone (EOF or a signal ends them first): so go their folders.
    acp_bash::exec::leave();
    code
}

/// The agent these flags make, its transport on stdin/stdout, and where its sessions' temp
/// folders go; nothing runs yet.
fn agent_on_stdio(
    engine: &EngineArgs,
    store: &StoreArgs,
    model: &ModelArgs,
) -> (AcpBashAgent, AgentStdio, Option<std::path::PathBuf>) {
    let max_prompt_bytes = engine.max_prompt_bytes();
    let mut config = engine.config();
    let temp_root = config.session_temp_root.clone();
    // The session store (other sessions' scripts and output) is masked from commands, with
    // `--no-history` too (an earlier agent's store is still there).
    config.protection.agent_dirs.extend(store.state_dir_path());
    // So are the keys `acp-bash login` stored.
    let config_home =
        keyfile::config_home(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
    config
        .protection
        .agent_dirs
        .extend(config_home.as_ref().map(|home| keyfile::key_dir(home)));
    // And what the user allowed always when asked: no command may add to it. The folder is
    // made when a grant is first kept; until then the view makes it (0700, empty, masked)
    // only where a command could otherwise make it first (its nearest existing folder is
    // writable in that command's view: `sandbox::Protection::agent_dirs`).
    let always = config_home
        .as_deref()
        .map(acp_bash::permit::AlwaysFile::under);
    if let Some(always) = &always {
        config.protection.agent_dirs.push(always.folder());
    }
    if let Some(dir) = store.log_dir() {
        config = config.log_dir(dir);
    }
    // With --model, the key's variable never reaches a command; without, nothing changes.
    let (commands_engine, driver) = match model.key_envs().is_empty() {
        true => (Engine::new(config), None),
        false => {
            let env: Vec<_> = std::env::vars_os().collect();
            let driver = model.driver(&env);
            let env = model.commands_env(env);
            (Engine::with_environment(config, env), driver)
        }
    };
    // A driver that sends images gets lines with room for a prompt's images beyond its text.
    let mut limits = TransportLimits::for_prompts(max_prompt_bytes);
    if driver.as_ref().is_some_and(|driver| driver.images()) {
        limits = limits.with_image_room(acp_bash::acp::PROMPT_IMAGE_LINE_BYTES);
    }
    let transport = AgentStdio::new().limits(limits);
    let mut agent = AcpBashAgent::new(commands_engine)
        .with_stream_limits(engine.stream_limits())
        .with_max_prompt_bytes(max_prompt_bytes)
        .with_client_behind(transport.client_behind())
        .with_job_limits(engine.job_limits())
        .with_mcp_timeout(engine.mcp_timeout());
    if engine.permission_requests() {
        agent = agent.with_permission_requests(acp_bash::permit::Permits::asking(always));
    }
    if let Some(store) = store.store() {
        agent = agent.with_session_store(store);
    }
    if let Some(driver) = driver {
        agent = agent.with_driver(driver);
    } else if engine.classify_typed() {
        agent = agent.with_driver(Arc::new(ShellDriver::classifying(true)));
    }
    (agent, transport, temp_root)
}

async fn serve_on_worker(agent: AcpBashAgent, transport: AgentStdio) -> ExitCode {
    let (signal_tx, mut signal_rx) = tokio::sync::oneshot::channel::<i32>();
    let stop = async move {
        let signal = termination_signal().await;
        tracing::info!(signal, "stopping: cancelling every running command");
        let _ = signal_tx.send(signal);
    };
    let served = agent.serve_until(transport, stop).await;
    match served {
        // Stopped by a signal: the conventional 128 + its number, once the commands are gone.
        // EOF that came with the signal (a client that kills the agent and closes its pipes)
        // can win the race to end `serve_until`: the signal still decides the code.
        Ok(()) => match signal_rx
            .try_recv()
            .ok()
            .or_else(termination_signal_received)
        {
            Some(signal) => ExitCode::from((128 + signal) as u8),
            None => ExitCode::SUCCESS,
        },
        Err(error) => {
            tracing::error!(%error, "the connection failed");
            eprintln!("acp-bash: the connection failed: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The termination signals the agent stops on.
const TERMINATION_SIGNALS: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// The first termination signal whose handler ran, 0 before any: set in the handler itself,
/// beside tokio's, so that it holds whatever the tasks that wait for tokio's did not see yet.
static TERMINATED_BY: AtomicI32 = AtomicI32::new(0);

/// Waits for SIGTERM, SIGINT or SIGHUP (an editor or a terminal stopping the agent) and returns
/// its number. Without signal support, waits forever.
async fn termination_signal() -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    // Ours first, then tokio's: a signal that comes between them is in TERMINATED_BY, read
    // below, and none after them is lost (before both, it ends the process as by default).
    for number in TERMINATION_SIGNALS {
        // SAFETY: the action is one atomic compare-exchange, which is async-signal-safe.
        let registered = unsafe {
            signal_hook_registry::register(number, move || {
                let _ =
                    TERMINATED_BY.compare_exchange(0, number, Ordering::SeqCst, Ordering::SeqCst);
            })
        };
        if let Err(error) = registered {
            tracing::debug!(%error, number, "no handler of our own for this signal");
        }
    }
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    if let Some(signal) = termination_signal_received() {
        return signal;
    }
    tokio::select! {
        _ = term.recv() => libc::SIGTERM,
        _ = int.recv() => libc::SIGINT,
        _ = hup.recv() => libc::SIGHUP,
    }
}

/// The termination signal this process got, if any: one whose handler ran, or (on Linux) one
/// still pending, which is taken here so that it cannot end the process on the way out.
fn termination_signal_received() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain system calls on a local set; a zero timeout never blocks.
        let pending = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for number in TERMINATION_SIGNALS {
                libc::sigaddset(&mut set, number);
            }
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::sigtimedwait(&set, std::ptr::null_mut(), &zero)
        };
        if pending > 0 {
            return Some(pending);
        }
    }
    Some(TERMINATED_BY.load(Ordering::SeqCst)).filter(|&signal| signal != 0)
}
