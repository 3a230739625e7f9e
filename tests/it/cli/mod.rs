//! The `acp-bash` subcommands.

mod commands;
mod defaults;
mod first_contact;
mod require_sandbox;
mod run_view;
mod sandbox_view;
