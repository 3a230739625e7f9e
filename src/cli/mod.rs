//! The `acp-bash` command line, one file per subcommand: [`serve`] (the default: ACP over stdio),
//! [`demo`], [`run`], [`doctor`], [`zed_config`] and [`login`]. The arguments are apart from their parsers:
//! [`args`] (the command line's shape), [`flags`] (the flag groups subcommands share and what
//! they turn into), [`parse`] (value parsers); [`child`] holds logging and the child agent that
//! `demo` and `run` talk to.
//!
//! Owns: argument parsing, logging setup, and the terminal rendering of `demo` and `run`.
//! Everything protocol-related lives in `acp_bash::acp`.

pub mod args;
pub mod child;
pub mod demo;
pub mod doctor;
pub mod flags;
pub mod login;
pub mod model;
pub mod parse;
pub mod run;
pub mod serve;
pub mod zed_config;

pub use args::{Cli, DoctorArgs, Invocation, RunArgs};
pub use child::{child_client, describe_error, init_logging};
pub use flags::{EngineArgs, EnvArgs, StoreArgs};
