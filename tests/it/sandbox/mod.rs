//! The kernel sandbox: what each mode lets a command do, tried by hostile commands.

mod caches;
mod cost;
mod engine;
mod escapees;
mod fs;
mod hostile;
mod net;
mod off;
mod secrets;
mod support;
mod unprivileged;
mod view;
