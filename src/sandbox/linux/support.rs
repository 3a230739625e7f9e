//! Which kernel layers work on this machine ([`Support`]), probed once per process.

/// Which sandbox layers work on this machine: each `Ok`, or `Err(why not, with what to do)`.
///
/// Made by [`Support::probe`] (or [`Support::current`]); [`Support::none`] and [`Support::all`]
/// are starting points for tests of the degraded paths (set a field to change one layer).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Support {
    /// Landlock, with the kernel's ABI version.
    pub landlock: Result<u32, String>,
    /// PID + mount namespaces: nothing a command starts outlives it.
    pub namespaces: Result<(), String>,
    /// A fresh /proc in the PID namespace: other processes' environments are out of sight.
    pub private_proc: Result<(), String>,
    /// A network namespace (read-only mode's "no network").
    pub network_namespace: Result<(), String>,
    /// A user namespace for every workspace and read-only command (also for a root agent): the
    /// command holds no capability over the host (no device nodes, host name, host network or
    /// host IPC objects).
    pub user_namespace: Result<(), String>,
    /// The read-only view of the filesystem built in the mount namespace (writable binds for
    /// the writable places, private /dev/shm and read-only mode's private temp dir).
    pub filesystem_view: Result<(), String>,
    /// The seccomp filter of workspace and read-only commands (io_uring, keyrings, bpf, perf,
    /// userfaultfd, kexec, and socket families other than unix/inet/inet6/netlink denied).
    pub seccomp: Result<(), String>,
    /// A fresh, empty session keyring for every sandboxed command.
    pub session_keyring: Result<(), String>,
    /// overlayfs in the command's user namespace (Linux 5.11+): workspace mode's copy-on-write
    /// layer of the session's own over the package caches (without it they stay read-only).
    pub cache_layer: Result<(), String>,
    /// Root may not make PID + mount namespaces without a user namespace here (it lacks
    /// CAP_SYS_ADMIN, as in rootless podman or a container's default capabilities), but may with
    /// one: full mode's commands then get a user namespace too (root's ids mapped to
    /// themselves, every capability kept inside it), as workspace and read-only ones do.
    pub root_needs_user_namespace: bool,
    /// What would enable the missing layers here, each option with its cost (Ubuntu's
    /// AppArmor profile for this binary, a container's options), for `doctor`.
    pub advice: Vec<String>,
}

impl Support {
    /// No layer works, for `reason` (non-Linux hosts; tests of the degraded paths).
    pub fn none(reason: &str) -> Support {
        Support {
            landlock: Err(reason.to_string()),
            namespaces: Err(reason.to_string()),
            private_proc: Err(reason.to_string()),
            network_namespace: Err(reason.to_string()),
            user_namespace: Err(reason.to_string()),
            filesystem_view: Err(reason.to_string()),
            seccomp: Err(reason.to_string()),
            session_keyring: Err(reason.to_string()),
            cache_layer: Err(reason.to_string()),
            root_needs_user_namespace: false,
            advice: Vec::new(),
        }
    }

    /// Every layer works, with Landlock at ABI `landlock_abi`.
    pub fn all(landlock_abi: u32) -> Support {
        Support {
            landlock: Ok(landlock_abi),
            namespaces: Ok(()),
            private_proc: Ok(()),
            network_namespace: Ok(()),
            user_namespace: Ok(()),
            filesystem_view: Ok(()),
            seccomp: Ok(()),
            session_keyring: Ok(()),
            cache_layer: Ok(()),
            root_needs_user_namespace: false,
            advice: Vec::new(),
        }
    }

    pub(crate) fn landlock_abi(&self) -> u32 {
        *self.landlock.as_ref().unwrap_or(&0)
    }
}
