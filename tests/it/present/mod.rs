//! The presentation layer: prompts to views, the wire checked against the schema, Zed's card.

mod ansi_oracle;
mod prompt_to_views;
mod wire_schema;
mod zed_replay;
