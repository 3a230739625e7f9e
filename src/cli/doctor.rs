//! `acp-bash doctor`: each sandbox layer on this machine, whether it works here and, if not, why
//! and what to do about it; then what commands do not see here (masked paths) with these flags.

use std::process::ExitCode;

use acp_bash::exec::Engine;
use acp_bash::sandbox;

use super::{EngineArgs, StoreArgs};

pub fn doctor(engine: &EngineArgs, store: &StoreArgs) -> ExitCode {
    print!("{}", sandbox::doctor_report());
    let mut config = engine.config();
    config.protection.agent_dirs.extend(store.state_dir_path());
    print!(
        "{}",
        sandbox::masked_report(Engine::new(config).protection())
    );
    ExitCode::SUCCESS
}
