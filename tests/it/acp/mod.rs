//! The ACP agent over real pipes with the real SDK.

mod embed_example;
mod modes;
mod ordering;
mod protocol;
mod shutdown;
mod stdio;
mod stream_rules;
mod streaming;
mod tool_call;
mod transcripts;
