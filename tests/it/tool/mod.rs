//! The bash tool: arguments and the result text with its status markers.

mod bash;
