//! The execution engine, driven with real bash processes.

mod concurrency;
mod engine;
mod handle;
mod large_output;
mod log_limits;
mod overrides;
mod prelude;
