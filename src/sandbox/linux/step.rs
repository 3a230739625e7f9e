//! The steps of starting a confined command that can fail, and the typed error the agent gets
//! when one does (the child reports the step and the errno on a close-on-exec pipe).

/// One step between fork and exec. The number is what travels on the error pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
#[non_exhaustive]
pub enum Step {
    /// Putting the command in a process group of its own, in a session with no controlling
    /// terminal (`setsid`, or `setpgid` in a fork of the zygote, whose session has none).
    ProcessGroup = 1,
    /// Asking for a kill signal when the agent dies (`PR_SET_PDEATHSIG`).
    ParentDeathSignal,
    /// Connecting stdin, stdout and stderr.
    Stdio,
    /// Joining the prepared network namespace (`setns`).
    JoinNetworkNamespace,
    /// Creating the namespaces (`unshare`).
    Unshare,
    /// Writing `/proc/self/setgroups`.
    Setgroups,
    /// Writing `/proc/self/uid_map`.
    UidMap,
    /// Writing `/proc/self/gid_map`.
    GidMap,
    /// Making the mounts private.
    PrivateMounts,
    /// Making the filesystem read-only (`mount_setattr`).
    ReadOnlyView,
    /// Binding a writable folder.
    WritablePlace,
    /// Mounting a private temp directory.
    PrivateTemp,
    /// Mounting a private `/dev/shm`.
    PrivateShm,
    /// Starting the namespace's init process.
    StartInit,
    /// Mounting a private `/proc`.
    PrivateProc,
    /// Starting the shell.
    StartShell,
    /// Becoming a subreaper (`PR_SET_CHILD_SUBREAPER`).
    Subreaper,
    /// Dropping capabilities.
    DropCapabilities,
    /// Setting the resource limits.
    ResourceLimits,
    /// Setting `no_new_privs`.
    NoNewPrivs,
    /// Applying the Landlock ruleset.
    Landlock,
    /// Passing the file descriptors the shell gets.
    Descriptors,
    /// Joining a fresh session keyring (`keyctl`).
    SessionKeyring,
    /// Installing the seccomp filter.
    Seccomp,
    /// Entering the working directory.
    Chdir,
    /// Starting bash (`exec`).
    Exec,
    /// Building the command's own minimal `/dev`.
    PrivateDev,
    /// Hiding host paths (credential files, host daemons' sockets) behind empty mounts.
    Mask,
    /// Binding Git metadata (hooks, config) read-only.
    GitMetadata,
    /// Mounting the session's copy-on-write layer over a package cache (overlayfs).
    CacheLayer,
    /// Making the network proxy's listener inside the command's network namespace and
    /// passing it to the agent (workspace mode's allowlist, as an ordinary user).
    ProxyBridge,
}

impl Step {
    const ALL: [Step; 31] = [
        Step::ProcessGroup,
        Step::ParentDeathSignal,
        Step::Stdio,
        Step::JoinNetworkNamespace,
        Step::Unshare,
        Step::Setgroups,
        Step::UidMap,
        Step::GidMap,
        Step::PrivateMounts,
        Step::ReadOnlyView,
        Step::WritablePlace,
        Step::PrivateTemp,
        Step::PrivateShm,
        Step::StartInit,
        Step::PrivateProc,
        Step::StartShell,
        Step::Subreaper,
        Step::DropCapabilities,
        Step::ResourceLimits,
        Step::NoNewPrivs,
        Step::Landlock,
        Step::Descriptors,
        Step::SessionKeyring,
        Step::Seccomp,
        Step::Chdir,
        Step::Exec,
        Step::PrivateDev,
        Step::Mask,
        Step::GitMetadata,
        Step::CacheLayer,
        Step::ProxyBridge,
    ];

    /// The step with this number on the error pipe, if any.
    pub fn from_code(code: u32) -> Option<Step> {
        Step::ALL.into_iter().find(|s| *s as u32 == code)
    }

    /// What the step does, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Step::ProcessGroup => "putting the command in a process group of its own",
            Step::ParentDeathSignal => "tying the command to the agent's life",
            Step::Stdio => "connecting stdin, stdout and stderr",
            Step::JoinNetworkNamespace => "joining the prepared network namespace (setns)",
            Step::Unshare => "creating namespaces (unshare)",
            Step::Setgroups => "writing /proc/self/setgroups",
            Step::UidMap => "writing /proc/self/uid_map",
            Step::GidMap => "writing /proc/self/gid_map",
            Step::PrivateMounts => "making mounts private",
            Step::ReadOnlyView => "making the filesystem read-only (mount_setattr)",
            Step::WritablePlace => "binding a writable folder",
            Step::PrivateTemp => "mounting a private temp dir",
            Step::PrivateShm => "mounting a private /dev/shm",
            Step::StartInit => "starting the namespace's init",
            Step::PrivateProc => "mounting a private /proc",
            Step::StartShell => "starting the shell",
            Step::Subreaper => "becoming a subreaper",
            Step::DropCapabilities => "dropping capabilities",
            Step::ResourceLimits => "setting resource limits",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::Landlock => "applying the Landlock ruleset",
            Step::Descriptors => "passing file descriptors",
            Step::SessionKeyring => "joining a fresh session keyring",
            Step::Seccomp => "installing the seccomp filter",
            Step::Chdir => "entering the working directory",
            Step::Exec => "starting bash (exec)",
            Step::PrivateDev => "building the command's own /dev",
            Step::Mask => "hiding a host path (credential file or daemon socket)",
            Step::GitMetadata => "binding Git metadata (hooks, config) read-only",
            Step::CacheLayer => {
                "mounting the session's copy-on-write layer over a package cache (overlayfs)"
            }
            Step::ProxyBridge => {
                "making the network proxy's listener in the command's network namespace"
            }
        }
    }
}

/// A sandbox step that failed in the child: which one, and the errno. Made by
/// [`spawn`](crate::sandbox::spawn) (inside its `io::Error`); callers only read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StepError {
    /// The step that failed.
    pub step: Step,
    /// The errno it failed with.
    pub errno: i32,
}

impl StepError {
    /// Decodes the 8-byte record the child wrote.
    pub(crate) fn decode(record: [u8; 8]) -> StepError {
        let [a, b, c, d, e, f, g, h] = record;
        let step = Step::from_code(u32::from_ne_bytes([a, b, c, d])).unwrap_or(Step::Exec);
        StepError {
            step,
            errno: i32::from_ne_bytes([e, f, g, h]),
        }
    }

    /// The errno as an [`std::io::Error`].
    pub fn io_error(&self) -> std::io::Error {
        std::io::Error::from_raw_os_error(self.errno)
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.io_error().to_string();
        let text = text.split(" (os error").next().unwrap_or_default();
        write!(
            f,
            "acp-bash sandbox: {} failed: {text} (errno {}); the command did not run. `acp-bash doctor` shows which sandbox layers work here",
            self.step.describe(),
            self.errno
        )
    }
}

impl std::error::Error for StepError {}
