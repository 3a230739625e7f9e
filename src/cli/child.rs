//! The child agent that `demo` and `run` talk to, and how its errors read; logging setup.

use acp_bash::acp::client::{AcpClient, ClientProfile};
use tracing_subscriber::EnvFilter;

use super::flags::EngineArgs;

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
