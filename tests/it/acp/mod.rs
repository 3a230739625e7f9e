//! The ACP agent over real pipes with the real SDK.

mod embed_example;
mod modes;
mod protocol;
mod robustness;
mod sessions;
mod shutdown;
mod stdio;
mod streaming;
mod tool_call;
mod transcripts;
