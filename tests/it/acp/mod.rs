//! The ACP agent over real pipes with the real SDK.

mod acpx;
mod modes;
mod plain_clients;
mod protocol;
mod shutdown;
mod stdio;
mod streaming;
mod transcripts;
