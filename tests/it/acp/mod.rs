//! The ACP agent over real pipes with the real SDK.

mod modes;
mod protocol;
mod robustness;
mod shutdown;
mod stdio;
mod streaming;
mod transcripts;
