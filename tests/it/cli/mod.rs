//! The `acp-bash` subcommands.

mod commands;
mod defaults;
mod sandbox_view;
