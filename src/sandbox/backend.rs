//! The contract between `sandbox/mod.rs` and a platform's backend, as a trait the compiler
//! checks: `sandbox/mod.rs` reaches the backend only through [`Backend`], on the one
//! implementation chosen by `cfg` (`Platform`), so a backend that lacks an item does not
//! compile. Static dispatch: one backend per build, no trait object.
//!
//! Owns: the list of what a platform provides. Must not touch: any platform's code.

use std::ffi::CStr;
use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::ExitStatus;

use super::{Confined, Launch, LayerReport, Limits, Mode, Roots, SessionSandbox, SpawnRequest};

/// What a platform's backend provides (Linux: `linux::Linux`; macOS: `macos::MacOs`;
/// elsewhere `unsupported::Unsupported`). Implemented by a unit struct; every item is called by
/// `sandbox/mod.rs` only.
pub(crate) trait Backend {
    /// Which layers work on this machine. `sandbox::Support` is this type (its fields are the
    /// backend's own); `Support::probe` returning [`Backend::probe_support`] makes the compiler
    /// check that the two are the same.
    type Support;
    /// What happens for one command between fork and exec, carried in [`Confined`] from
    /// [`Backend::confine_with`] to [`Backend::spawn_confined`].
    type Prepared: Send;
    /// Waiting for what [`Backend::spawn_confined`] started (an empty enum where nothing can be
    /// started).
    type SpawnedChild: Send;
    /// A session's helpers that start its commands (Linux: its zygotes), dropped with it.
    type Zygotes: Send + Default;

    /// Whether opening `/dev/fd/N` opens fd N's file anew with an offset of its own (Linux:
    /// `/proc/self/fd/N`), so that the engine may pass one prelude fd to every run. False
    /// where it duplicates fd N (macOS, the BSDs): readers would share one offset, and the
    /// engine then gives each run a [`Backend::sealed_file`] of its own.
    const DEV_FD_REOPENS: bool = false;

    /// Probes every layer for real.
    fn probe_support() -> Self::Support;
    /// Applies `mode` to `launch` with only the layers `support` says work; what the mode
    /// promises but this launch does not enforce goes in [`Confined::notices`].
    fn confine_with(
        launch: Launch,
        mode: Mode,
        roots: &Roots,
        limits: Limits,
        support: &Self::Support,
    ) -> Confined;
    /// The mode's promise, then what of it `support` does not enforce.
    fn describe(mode: Mode, support: &Self::Support) -> String;
    /// Doctor's table: every layer and whether it works.
    fn layers(support: &Self::Support) -> Vec<LayerReport>;
    /// Whether `mode` holds here, is weakened or missing ([`super::Verdict`]); by default
    /// (no sandbox on this platform) every mode but `off` is missing.
    fn verdict(mode: super::Mode, _support: &Self::Support) -> super::Verdict {
        match mode {
            super::Mode::Off => super::Verdict::Holds,
            _ => super::Verdict::Missing(vec!["a sandbox on this platform".to_string()]),
        }
    }
    /// What would enable the layers `support` lacks, each option with its cost (`doctor`).
    fn advice(_support: &Self::Support) -> Vec<String> {
        Vec::new()
    }
    /// Whether a session's namespaces and view are built once per session (`Ok(how)`) or once
    /// per command (`Err(why)`), for `doctor`.
    fn per_session_sandbox(support: &Self::Support) -> Result<String, String>;
    /// Starts `confined` as `sandbox::spawn` documents (or refuses with an error saying why):
    /// the pid, and the pipe its wait status comes on where that pid is not this process's
    /// child (started by the session's zygote, `request.session`).
    fn spawn_confined(
        confined: &Confined,
        request: &SpawnRequest,
    ) -> io::Result<(i32, Option<OwnedFd>)>;
    /// Starts `session`'s zygote for `confined` now if none that fits runs (on the spawner
    /// thread, like a command): its first command then finds the namespaces and view built.
    fn start_zygote_early(confined: &Confined, session: &SessionSandbox);
    /// The pids of a session's running zygotes.
    fn zygote_pids(zygotes: &Self::Zygotes) -> Vec<i32>;
    /// Runs the zygote and exits when this process was started as one.
    fn zygote_main_if_asked();
    /// Whether `error` (from [`Backend::spawn_confined`]) is a sandbox step that failed before
    /// the command ran, rather than the program failing to start.
    fn is_setup_failure(error: &io::Error) -> bool;
    /// Starts waiting for `pid`, which [`Backend::spawn_confined`] returned (with its status
    /// pipe, if any).
    fn watch_child(pid: i32, status: Option<OwnedFd>) -> io::Result<Self::SpawnedChild>;
    /// Waits until `child` has exited and is reaped.
    fn wait_child(
        child: &mut Self::SpawnedChild,
    ) -> impl Future<Output = io::Result<ExitStatus>> + Send;
    /// Runs `job` on the thread that starts commands.
    fn on_spawner_thread(job: Box<dyn FnOnce() + Send>);
    /// Hardens the agent's own process against commands of the same user.
    fn protect_agent_process();
    /// The host daemons' sockets the view hides now, each with what is kept inside.
    fn masked_host_sockets() -> Vec<(PathBuf, Option<PathBuf>)>;
    /// Each package cache of `home` and whether workspace commands get its copy-on-write
    /// layer here (`Err(why not)`: it stays read-only), for `doctor`.
    fn cache_layer_verdicts(home: &std::path::Path) -> Vec<(PathBuf, Result<(), String>)>;
    /// Whether confining a command for `home` still has to probe the kernel for its package
    /// caches' layers (a child forked and waited for): the caller then confines off the async
    /// runtime. Once per home and process; false where there is nothing to probe.
    fn cache_layers_unprobed(home: &std::path::Path) -> bool;
    /// A read-only, close-on-exec fd holding `contents`, which no one can change (the shell
    /// prelude, long scripts). The engine passes one prelude fd to every run, so opening
    /// `/dev/fd/N` must read from the start each time: true of Linux's memfd; where
    /// `/dev/fd/N` duplicates the fd (macOS), the offset is shared, and the engine makes one
    /// per run instead ([`Backend::DEV_FD_REOPENS`]).
    fn sealed_file(name: &CStr, contents: &[u8]) -> io::Result<OwnedFd>;
    /// A new, empty, read-write, close-on-exec file of its own that exists only as an fd (a
    /// run's shell-state report): writes to it wake no one. Where the platform can, writes
    /// past `bound` bytes fail (EPERM on Linux), so a writer that never stops holds at most
    /// `bound` bytes of memory; the reader must not rely on that where it cannot.
    fn bounded_file(name: &CStr, bound: u64) -> io::Result<OwnedFd>;
    /// Drops what the backend keeps for the session whose own folder is `dir` (Linux: its
    /// kept plans and their Landlock rulesets), once the session has ended. Nothing by default.
    fn forget_session(_dir: &std::path::Path) {}

    /// Ends a session's helpers (Linux: its zygotes and their spares); its next command starts
    /// them again. Nothing by default.
    fn end_helpers(_zygotes: &mut Self::Zygotes) {}

    /// Lets a session's spare helpers go but keeps the ones that hold its sandbox (Linux: the
    /// spare PID 1 of each zygote; the zygotes stay); its next command makes them again.
    /// Nothing by default.
    fn let_spares_go(_zygotes: &mut Self::Zygotes) {}

    /// A command ended: what the backend made for it alone (Linux: its cgroup folders) goes
    /// once its processes are gone.
    fn command_ended() {}

    /// The program ends: what the backend made for its commands goes.
    fn leave() {}

    /// At start: what backends of programs that are gone left behind goes.
    fn remove_abandoned() {}
}
