//! The model driver (`acp_bash::driver::model`) against a fake provider on loopback
//! (`support::fake_model`), through the real turn layer (`acp_bash::turn::Turn`) and real bash
//! on the engine: the loop, both wire formats, tool calls, failures, cancel, the key.
//!
//! - [`binary`]: the same through the built binary (`serve --model`): transcripts, key, auth, cancel.
//! - [`cache`]: prompt caching over a 30-step turn against fakes that count cache reads.
//! - [`catalog`]: the window and the model picker from the provider's model list.
//! - [`compaction`]: compaction near the window, on overflow and by `/compact`.
//! - [`login`]: `acp-bash login`, the key file, the terminal auth method, the file masked.
//! - [`wire`]: cost, thoughts, embedded context, `$/cancel_request`, base URLs, on the wire.
//! - [`lifetime`]: a closed session's conversation freed; a prompt's resources bounded in all.
//! - [`harness`]: a `TurnPort` that runs calls on a real engine session and records events.
//! - [`turns`]: text, thinking, tool calls (several per reply, arguments in pieces), step limit.
//! - [`failures`]: retries with `Retry-After`, bounded retries, 401, context overflow, cancel.
//! - [`errors`]: retries shown, quota final, overflow codes, URL credentials, bounds.
//! - [`reasoning`]: reasoning models, each provider's form sent back, fakes that refuse.
//! - [`control`]: slash commands and `!COMMAND` never reach the model; no key; the env scrub;
//!   background jobs; embedded resources.

mod binary;
mod cache;
mod catalog;
mod classified;
mod compaction;
mod compat;
mod conformance;
mod control;
mod errors;
mod failures;
mod harness;
mod images;
mod lifetime;
mod login;
mod prompt;
mod reasoning;
mod turns;
mod wire;
