//! Real probes of what this kernel allows: each layer is tried in a child ([`probe_support`]).

use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::child::ChildPlan;
use super::landlock::{landlock_abi, ruleset};
use super::view_plan::view_for;
use super::{current_ids, spawn, step};
use crate::sandbox::{Mode, Roots, Support};

/// Runs `plan` in a child (a probe: the would-be shell exits 0) and says whether every step
/// worked, or which step failed and why.
fn probe(plan: ChildPlan) -> Result<(), String> {
    let launch = crate::sandbox::Launch {
        program: "/bin/true".into(),
        args: Vec::new(),
    };
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("could not probe: {e}"))?;
    let request = spawn::Request {
        launch: &launch,
        env: &[],
        cwd: Path::new("/"),
        output: null.as_raw_fd(),
        pass: &[],
    };
    let pid = spawn::spawn(&request, Some(&plan), true).map_err(|e| {
        match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<step::StepError>())
        {
            Some(step) => format!(
                "{} failed: {} (errno {})",
                step.step.describe(),
                step.io_error(),
                step.errno
            ),
            None => format!("could not probe: {e}"),
        }
    })?;
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(format!("the probe ended with wait status {status}"))
    }
}

fn plan(namespaces: bool, user_namespace: bool) -> ChildPlan {
    let (uid, gid) = current_ids();
    ChildPlan {
        namespaces,
        user_namespace,
        private_ipc_uts: user_namespace,
        parent_maps_ids: user_namespace && uid == 0,
        uid,
        gid,
        netns_fd: -1,
        landlock_fd: -1,
        pids_cgroup_fd: -1,
        memory_cgroup_fd: -1,
        drop_capabilities: user_namespace && uid == 0,
        ..ChildPlan::default()
    }
}

/// Why namespaces fail, in words a user can act on.
fn namespace_advice(step: String, root: bool) -> String {
    let mut why = step;
    if root {
        why.push_str(
            " — a seccomp profile or a container runtime that forbids unshare (run it with \
             --cap-add SYS_ADMIN, or where user namespaces are allowed)",
        );
        return why;
    }
    let apparmor =
        std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
            .map(|v| v.trim() == "1")
            .unwrap_or(false);
    let clone = std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone")
        .map(|v| v.trim() == "0")
        .unwrap_or(false);
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .map(|v| v.trim() == "0")
        .unwrap_or(false);
    if apparmor {
        why.push_str(
            " — AppArmor restricts unprivileged user namespaces here \
             (kernel.apparmor_restrict_unprivileged_userns=1); allow them with an AppArmor profile \
             for acp-bash or set that sysctl to 0",
        );
    } else if clone {
        why.push_str(
            " — unprivileged user namespaces are off (kernel.unprivileged_userns_clone=0)",
        );
    } else if max {
        why.push_str(" — user namespaces are off (user.max_user_namespaces=0)");
    } else {
        why.push_str(
            " — this process may not create user namespaces (a container's seccomp profile, or \
             it runs inside a chroot)",
        );
    }
    why
}

/// Probes each layer for real.
pub(crate) fn probe_support() -> Support {
    let root = current_ids().0 == 0;
    let landlock = landlock_abi().and_then(|abi| {
        let roots = Roots::new(PathBuf::from("/"), std::env::temp_dir());
        let fd = ruleset(Mode::ReadOnly, &roots, false)?
            .ok_or_else(|| "the ruleset came out empty".to_string())?;
        let mut p = plan(false, false);
        p.landlock_fd = fd.as_raw_fd();
        probe(p).map(|()| abi)
    });
    let user_namespace = probe(plan(true, true)).map_err(|e| namespace_advice(e, root));
    let namespaces = match (&user_namespace, root) {
        (Ok(()), _) => Ok(()),
        (Err(why), false) => Err(why.clone()),
        // Root without user namespaces: PID + mount namespaces alone (root keeps its
        // capabilities; said in the descriptions).
        (Err(_), true) => probe(plan(true, false)).map_err(|e| namespace_advice(e, root)),
    };
    let with_userns = user_namespace.is_ok();
    let private_proc = match &namespaces {
        Err(_) => Err("needs the PID namespace, which does not work here".to_string()),
        Ok(()) => {
            let mut p = plan(true, with_userns);
            p.private_proc = true;
            probe(p).map_err(|e| {
                format!(
                    "{e} — /proc is partly hidden here (as in many containers), so the kernel \
                     refuses a fresh one"
                )
            })
        }
    };
    let network_namespace = match &namespaces {
        Err(_) => Err("needs the namespaces, which do not work here".to_string()),
        Ok(()) => {
            let mut p = plan(true, with_userns);
            p.network_namespace = true;
            probe(p)
        }
    };
    let filesystem_view = match &user_namespace {
        Err(_) => Err("needs a user namespace, which does not work here".to_string()),
        Ok(()) => {
            let roots = Roots::new(std::env::temp_dir(), std::env::temp_dir());
            let mut p = plan(true, true);
            p.view = Some(view_for(Mode::Workspace, &roots));
            probe(p)
        }
    };
    let seccomp = super::seccomp::programs()
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|programs| {
            let mut p = plan(false, false);
            p.seccomp = Some(programs);
            probe(p)
        });
    let session_keyring = {
        let mut p = plan(false, false);
        p.fresh_keyring = true;
        probe(p)
    };
    let cache_layer = match &filesystem_view {
        Err(_) => Err("needs the filesystem view, which does not work here".to_string()),
        Ok(()) => probe_cache_layer(),
    };
    Support {
        landlock,
        namespaces,
        user_namespace,
        private_proc,
        network_namespace,
        filesystem_view,
        seccomp,
        session_keyring,
        cache_layer,
    }
}

/// An overlayfs over a folder of the probe's own, in a user namespace, as workspace mode's
/// package caches get one (its upper and work folders beside it, in the temp dir).
fn probe_cache_layer() -> Result<(), String> {
    let base = probe_folder("acp-bash-probe").map_err(|e| format!("could not probe: {e}"))?;
    let result = probe_cache_layer_in(&base);
    let _ = crate::sandbox::remove_session_folder(&base);
    result
}

fn probe_cache_layer_in(base: &Path) -> Result<(), String> {
    let home = base.join("home");
    let layer = base.join("layer");
    for dir in [home.join(".npm"), layer.clone()] {
        std::fs::create_dir_all(&dir).map_err(|e| format!("could not probe: {e}"))?;
    }
    let (overlays, _) = super::view_plan::cache_layers(&home, &layer, &[], &[]);
    if overlays.is_empty() {
        return Err("could not probe: no layer was planned".to_string());
    }
    let mut p = plan(true, true);
    p.view = Some(super::child::view::View {
        overlays,
        overlays_required: true,
        ..Default::default()
    });
    probe(p).map_err(|e| {
        format!(
            "{e} — overlayfs in a user namespace needs Linux 5.11 or newer, and an upper folder \
             on a filesystem overlayfs accepts"
        )
    })
}

/// The package caches whose layer the kernel refused, each with why.
pub(crate) type RefusedLayers = Vec<(PathBuf, String)>;

/// Whether the kernel takes a copy-on-write layer over each package cache of `home`
/// ([`crate::sandbox::package_caches`]): `(cache, Err(why))` for each one it refuses (a path
/// longer than overlayfs takes, a lower folder on a filesystem overlayfs cannot stack on, …).
/// Probed for real once per home and process, with the layers' upper and work folders in the
/// temp dir as a session's are: a refused cache is then left out of every command's view (it
/// stays read-only) and said once, in the session's first workspace command, not by every
/// command's setup. Empty where overlayfs does not work at all ([`Support::cache_layer`]
/// says so).
pub(crate) fn refused_cache_layers(home: &Path) -> std::sync::Arc<RefusedLayers> {
    let memo = refused_memo();
    if let Some(known) = memo.lock().unwrap().get(home) {
        return known.clone();
    }
    let refused = std::sync::Arc::new(if crate::sandbox::Support::current().cache_layer.is_ok() {
        probe_home_cache_layers(home)
    } else {
        Vec::new()
    });
    memo.lock()
        .unwrap()
        .insert(home.to_path_buf(), refused.clone());
    refused
}

type RefusedMemo =
    std::sync::Mutex<std::collections::HashMap<PathBuf, std::sync::Arc<RefusedLayers>>>;

fn refused_memo() -> &'static RefusedMemo {
    static MEMO: std::sync::OnceLock<RefusedMemo> = std::sync::OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// Whether [`refused_cache_layers`] of `home` would still probe (fork a child and wait for
/// it): not yet asked in this process. The probe's child ends only once its mount namespace is
/// torn down, which under a busy disk took seconds (issue 20 point 9), so an async caller asks
/// first and confines on a blocking thread when this says so.
pub(crate) fn cache_layers_unprobed(home: &Path) -> bool {
    !refused_memo().lock().unwrap().contains_key(home)
}

/// Every package cache of `home` with its verdict: `Ok(())` where the kernel takes its layer.
pub(crate) fn cache_layer_verdicts(home: &Path) -> Vec<(PathBuf, Result<(), String>)> {
    if let Err(why) = &crate::sandbox::Support::current().cache_layer {
        return crate::sandbox::package_caches(home)
            .into_iter()
            .map(|(_, cache)| (cache, Err(format!("no overlayfs here: {why}"))))
            .collect();
    }
    let refused = refused_cache_layers(home);
    crate::sandbox::package_caches(home)
        .into_iter()
        .map(|(_, cache)| {
            let verdict = match refused.iter().find(|(path, _)| *path == cache) {
                Some((_, why)) => Err(why.clone()),
                None => Ok(()),
            };
            (cache, verdict)
        })
        .collect()
}

/// A new folder of this probe's own in the temp dir, `<prefix>-<pid>-<n>-<random>`: the random
/// part because an agent killed during its probe leaves its folder behind, and a later agent
/// may get the same pid (under fork churn, within seconds: `File exists` then failed the probe).
fn probe_folder(prefix: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut salt = [0u8; 8];
    crate::random::random_bytes(&mut salt);
    let salt: String = salt.iter().map(|b| format!("{b:02x}")).collect();
    let base = std::env::temp_dir().join(format!("{prefix}-{}-{n}-{salt}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&base)?;
    Ok(base)
}

fn probe_home_cache_layers(home: &Path) -> Vec<(PathBuf, String)> {
    let base = match probe_folder("acp-bash-probe-caches") {
        Ok(base) => base,
        Err(error) => {
            tracing::warn!(%error, "could not probe the package caches' layers");
            return Vec::new();
        }
    };
    let (overlays, _) = super::view_plan::cache_layers(home, &base, &[], &[]);
    let with = |overlays: Vec<super::child::view::Overlay>| {
        let mut p = plan(true, true);
        p.view = Some(super::child::view::View {
            overlays,
            overlays_required: true,
            ..Default::default()
        });
        probe(p)
    };
    let mut refused = Vec::new();
    // All at once first (the usual case: one probe); one by one only when that fails.
    if !overlays.is_empty() {
        let all: Vec<_> = overlays.iter().map(clone_overlay).collect();
        if with(all).is_err() {
            for overlay in &overlays {
                if let Err(why) = with(vec![clone_overlay(overlay)]) {
                    let target =
                        PathBuf::from(std::ffi::OsStr::from_bytes(overlay.target.to_bytes()));
                    let too_long = [&overlay.target, &overlay.upper, &overlay.work]
                        .iter()
                        .any(|p| p.to_bytes().len() > 255);
                    let hint = if too_long {
                        "; a path is longer than the 255 bytes overlayfs takes"
                    } else {
                        ""
                    };
                    refused.push((
                        target,
                        format!("the kernel refused its overlayfs layer: {why}{hint}"),
                    ));
                }
            }
        }
    }
    let _ = crate::sandbox::remove_session_folder(&base);
    refused
}

fn clone_overlay(overlay: &super::child::view::Overlay) -> super::child::view::Overlay {
    super::child::view::Overlay {
        target: overlay.target.clone(),
        upper: overlay.upper.clone(),
        work: overlay.work.clone(),
    }
}

#[cfg(test)]
mod tests {
    /// Folders an earlier process of the same pid left behind (`<prefix>-<pid>-<n>`, the old
    /// names) do not stop a probe, and no two probes share a folder.
    #[test]
    fn a_probe_folder_is_new_even_where_one_of_the_same_pid_was_left_behind() {
        let prefix = format!("acp-bash-probe-test-{}", std::process::id());
        let temp = std::env::temp_dir();
        let left: Vec<_> = (0..64)
            .map(|n| temp.join(format!("{prefix}-{}-{n}", std::process::id())))
            .collect();
        for dir in &left {
            let _ = std::fs::create_dir(dir);
        }
        let a = super::probe_folder(&prefix).unwrap();
        let b = super::probe_folder(&prefix).unwrap();
        assert_ne!(a, b);
        assert!(a.is_dir() && b.is_dir());
        for dir in left.iter().chain([&a, &b]) {
            let _ = std::fs::remove_dir(dir);
        }
    }
}
