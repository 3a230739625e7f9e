//! The `acp-bash` subcommands.

mod commands;
