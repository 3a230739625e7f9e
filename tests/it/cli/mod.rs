//! The `acp-bash` subcommands.

mod commands;
mod defaults;
