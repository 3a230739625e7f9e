//! The ACP agent over real pipes with the real SDK.

mod acpx;
mod card_process;
mod changes;
mod classified_calls;
mod config_options;
mod embed_example;
mod jobs;
mod jobs_ownership;
mod jobs_transcripts;
mod modes;
mod ordering;
mod plain_clients;
mod protocol;
mod records;
mod robustness;
mod sessions;
mod sessions_jobs;
mod shutdown;
mod startup;
mod stdio;
mod stream_rules;
mod streaming;
mod tool_call;
mod transcripts;
pub(crate) mod turns;
pub(crate) mod v2_face;
mod v2_terminals;
