//! The execution engine, driven with real bash processes.

mod capture_oracle;
mod chunk_oracle;
mod engine;
mod env_rules;
mod large_output;
mod prelude;
