//! The macOS backend: every mode runs. `off` and `full` start commands through the portable
//! path (`sandbox/portable.rs`: posix_spawn, a process group per command); `workspace` and
//! `read-only` run each command under `/usr/bin/sandbox-exec` with a Seatbelt profile made
//! for its session and mode ([`seatbelt`]). Without a PID namespace, what a command leaves
//! running is found by its mark ([`sweep`]). What it enforces is said in [`report`]; whether
//! Seatbelt applies here is probed in [`support`]. Design: `notes/2026-12-06-macos-seatbelt.md`.
//!
//! The profile generator, the sweep's parsing and the reports are pure and compiled into the
//! unit tests on every platform; the backend itself (`platform.rs`) only on macOS.

// On other platforms only the unit tests use these.
#![cfg_attr(not(target_os = "macos"), allow(dead_code))]

pub(crate) mod report;
pub(crate) mod seatbelt;
pub(crate) mod support;
pub(crate) mod sweep;

#[cfg(target_os = "macos")]
mod platform;
#[cfg(target_os = "macos")]
pub(crate) use platform::MacOs;
