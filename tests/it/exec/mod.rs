//! The execution engine, driven with real bash processes.

mod concurrency;
mod engine;
mod handle;
mod large_output;
mod overrides;
mod prelude;
