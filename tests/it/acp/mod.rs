//! The ACP agent over real pipes with the real SDK.

mod modes;
mod ordering;
mod protocol;
mod shutdown;
mod stdio;
mod stream_rules;
mod streaming;
mod transcripts;
