//! The execution engine, driven with real bash processes.

mod engine;
mod large_output;
mod log_limits;
mod prelude;
