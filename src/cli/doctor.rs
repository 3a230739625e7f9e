//! `acp-bash doctor`: each sandbox layer on this machine, whether it works here and, if not, why
//! and what to do about it.

use std::process::ExitCode;

use acp_bash::sandbox;

pub fn doctor() -> ExitCode {
    // Probe in the state `serve` runs in (non-dumpable), so that the two can never disagree.
    sandbox::protect_agent_process();
    print!("{}", sandbox::doctor_report());
    ExitCode::SUCCESS
}
