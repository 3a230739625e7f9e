//! The execution engine, driven with real bash processes.

mod capture_oracle;
mod chunk_oracle;
mod concurrency;
mod editors;
mod engine;
mod env_rules;
mod handle;
mod large_output;
mod log_limits;
mod overrides;
mod prelude;
mod shell_state;
mod stateless;
