//! `acp-bash zed-config`: the settings.json snippet that adds this binary to Zed's agents, with
//! the same engine, store and model flags as this invocation.

use std::process::ExitCode;

use super::model::ModelArgs;
use super::{EngineArgs, StoreArgs};

pub fn zed_config(engine: &EngineArgs, store: &StoreArgs, model: &ModelArgs) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => {
            eprintln!("acp-bash: cannot find this binary's path: {error}");
            return ExitCode::FAILURE;
        }
    };
    let snippet = serde_json::json!({
        "agent_servers": {
            "acp-bash": {
                "type": "custom",
                "command": exe.to_string_lossy(),
                "args": ([engine.to_args(), store.to_args(), model.to_args()].concat()),
                "env": {}
            }
        }
    });
    println!("{}", serde_json::to_string_pretty(&snippet).expect("json"));
    // stdout stays pure JSON (for `acp-bash zed-config > snippet.json`); the hint goes to stderr.
    eprintln!(
        "Merge this into Zed's settings.json (command palette: `zed: open settings`), then pick \
         acp-bash in the agent panel."
    );
    ExitCode::SUCCESS
}
