//! The ACP agent over real pipes with the real SDK.

mod modes;
mod protocol;
mod sessions;
mod shutdown;
mod stdio;
mod streaming;
mod transcripts;
