//! The execution engine, driven with real bash processes: every case twice, once per way the
//! engine starts a shell.

/// Through the kernel sandbox's pre-exec step (a forked child), in the mode without file or
/// network rules.
mod sandboxed {
    const MODE: acp_bash::sandbox::Mode = acp_bash::sandbox::Mode::Full;
    include!("engine_cases.rs");
}

/// With the sandbox off: no pre-exec step, the vfork-style start.
mod sandbox_off {
    const MODE: acp_bash::sandbox::Mode = acp_bash::sandbox::Mode::Off;
    include!("engine_cases.rs");
}
