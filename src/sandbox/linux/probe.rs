//! Real probes of what this kernel allows: each layer is tried in a child ([`probe_support`]).

use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::child::ChildPlan;
use super::diagnose::{self, cause_text, root_namespaces_cause, userns_cause, Facts, Failure};
use super::landlock::{landlock_abi, ruleset};
use super::view_plan::view_for;
use super::{current_ids, spawn, step};
use crate::sandbox::{Mode, Roots, Support};

/// Runs `plan` in a child (a probe: the would-be shell exits 0) and says whether every step
/// worked, or which step failed and why.
fn probe(plan: ChildPlan) -> Result<(), String> {
    probe_step(plan).map_err(|f| f.text)
}

/// [`probe`], with the failed step and errno kept (for [`diagnose`]).
fn probe_step(plan: ChildPlan) -> Result<(), Failure> {
    let other = |text: String| Failure {
        step: None,
        errno: 0,
        text,
    };
    let launch = crate::sandbox::Launch {
        program: "/bin/true".into(),
        args: Vec::new(),
    };
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .map_err(|e| other(format!("could not probe: {e}")))?;
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
            Some(step) => Failure {
                step: Some(step.step),
                errno: step.errno,
                text: format!(
                    "{} failed: {} (errno {})",
                    step.step.describe(),
                    step.io_error(),
                    step.errno
                ),
            },
            None => other(format!("could not probe: {e}")),
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
        Err(other(format!("the probe ended with wait status {status}")))
    }
}

/// Whether this kernel lacks `mount_setattr` (Linux 5.12): the view is then built the classic
/// way (`child/remount.rs`). Probed once per process: the call with no mount fd and no
/// attributes is refused by every kernel that has it (EBADF, EINVAL, ENOENT); ENOSYS where the
/// kernel lacks it, EPERM where a seccomp filter (a container's) denies it, whose `mount(2)`
/// may still work.
pub(crate) fn mount_setattr_missing() -> bool {
    static MISSING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MISSING.get_or_init(|| {
        // SAFETY: mount_setattr on no fd, with a null attribute struct of size 0: it changes
        // nothing on any kernel.
        let r = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                -1,
                c"".as_ptr(),
                0,
                std::ptr::null::<u8>(),
                0,
            )
        };
        let err = std::io::Error::last_os_error().raw_os_error();
        r < 0 && matches!(err, Some(libc::ENOSYS) | Some(libc::EPERM))
    })
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

/// Probes each layer for real.
pub(crate) fn probe_support() -> Support {
    probe_support_with(Facts::read(), None)
}

/// [`probe_support`] with `facts` (the machine's, but for tests) and, in the library's unit
/// tests only, a step of the user-namespace probes made to fail with an errno.
fn probe_support_with(
    facts: Facts,
    #[cfg_attr(not(test), allow(unused_variables))] fault: Option<(super::step::Step, i32)>,
) -> Support {
    let userns_plan = |namespaces: bool, user_namespace: bool| {
        #[cfg_attr(not(test), allow(unused_mut))]
        let mut p = plan(namespaces, user_namespace);
        #[cfg(test)]
        {
            p.fault = fault;
        }
        p
    };
    let root = facts.root;
    let landlock = landlock_abi().and_then(|abi| {
        let roots = Roots::new(PathBuf::from("/"), std::env::temp_dir());
        let fd = ruleset(Mode::ReadOnly, &roots, Default::default())?
            .ok_or_else(|| "the ruleset came out empty".to_string())?;
        let mut p = plan(false, false);
        p.landlock_fd = fd.as_raw_fd();
        probe(p).map(|()| abi)
    });
    // Each failure's cause, in the order found (the advice names each one's options).
    let mut causes = Vec::new();
    let mut explain = |failure: Failure, decide: fn(&Failure, &Facts) -> diagnose::Cause| {
        let why = decide(&failure, &facts);
        let text = cause_text(&failure, &why, &facts);
        if !causes.contains(&why) {
            causes.push(why);
        }
        text
    };
    let user_namespace = probe_step(userns_plan(true, true)).map_err(|f| explain(f, userns_cause));
    let namespaces = match (&user_namespace, root) {
        (Ok(()), _) => Ok(()),
        (Err(why), false) => Err(why.clone()),
        // Root without user namespaces: PID + mount namespaces alone (root keeps its
        // capabilities; said in the descriptions).
        (Err(_), true) => {
            probe_step(userns_plan(true, false)).map_err(|f| explain(f, root_namespaces_cause))
        }
    };
    let with_userns = user_namespace.is_ok();
    // Root's full mode runs without a user namespace where PID + mount namespaces alone work;
    // without CAP_SYS_ADMIN (rootless podman, a container's default capabilities) they do not,
    // and its commands get the user namespace too rather than failing at `unshare`.
    let root_needs_user_namespace = root
        && with_userns
        && (!facts.cap_sys_admin || facts.seccomp_filter)
        && probe(userns_plan(true, false)).is_err();
    let private_proc = match &namespaces {
        Err(_) => Err("needs the PID namespace, which does not work here".to_string()),
        Ok(()) => {
            let mut p = plan(true, with_userns);
            p.private_proc = true;
            probe(p).map_err(|e| diagnose::proc_text(&e, &facts))
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
        probe_step(p).map_err(|failure| {
            if diagnose::keyring_refused_everywhere(&failure) {
                format!("{}{KEYRING_REFUSED}", failure.text)
            } else {
                failure.text
            }
        })
    };
    let cache_layer = match &filesystem_view {
        Err(_) => Err("needs the filesystem view, which does not work here".to_string()),
        Ok(()) => probe_cache_layer().map_err(|e| diagnose::overlay_text(&e, &facts)),
    };
    let advice = diagnose::advice(
        &causes,
        private_proc.is_err() && namespaces.is_ok(),
        cache_layer.is_err() && filesystem_view.is_ok(),
        &facts,
    );
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
        root_needs_user_namespace,
        advice,
    }
}

/// Said after a keyring probe's failure where `keyctl` itself is refused: commands can't use
/// any keyring then, so none of the agent's keys is within their reach
/// ([`crate::sandbox::linux::report`] leaves it out of the gaps).
pub(crate) const KEYRING_REFUSED: &str = " — keyctl is refused here for every process (a \
    container's seccomp filter), so commands cannot use any keyring: none of the agent's keys \
    is within their reach";

/// An overlayfs over a folder of the probe's own, in a user namespace, as workspace mode's
/// package caches get one (its upper and work folders beside it, in the temp dir).
fn probe_cache_layer() -> Result<(), String> {
    let base = probe_folder("acp-bash-probe").map_err(|e| format!("could not probe: {e}"))?;
    let result = probe_cache_layer_in(&base.path);
    let _ = crate::sandbox::remove_session_folder(&base.path);
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
        without_mount_setattr: mount_setattr_missing(),
        ..Default::default()
    });
    probe(p)
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

/// How the names of probe folders begin ([`probe_cache_layer`]'s and
/// [`probe_home_cache_layers`]').
const PROBE_PREFIX: &str = "acp-bash-probe-";

/// A probe's own folder in the temp dir, locked for as long as the probe uses it: a shared
/// `flock` on the folder itself, which the kernel drops when the process dies. An agent killed
/// during its probe (or one that exits while a probe thread still runs) leaves an unlocked
/// folder, which the next agent that starts removes ([`remove_abandoned_folders`]).
struct ProbeFolder {
    path: PathBuf,
    _lock: std::fs::File,
}

/// A new folder of this probe's own in the temp dir, `<prefix>-<pid>-<n>-<random>`: the random
/// part because an agent killed during its probe leaves its folder behind, and a later agent
/// may get the same pid (under fork churn, within seconds: `File exists` then failed the probe).
fn probe_folder(prefix: &str) -> std::io::Result<ProbeFolder> {
    use std::os::unix::fs::DirBuilderExt;
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut salt = [0u8; 8];
    crate::random::random_bytes(&mut salt);
    let salt: String = salt.iter().map(|b| format!("{b:02x}")).collect();
    let path = std::env::temp_dir().join(format!("{prefix}-{}-{n}-{salt}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&path)?;
    let lock = std::fs::File::open(&path)?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_SH) } != 0 {
        let error = std::io::Error::last_os_error();
        let _ = std::fs::remove_dir(&path);
        return Err(error);
    }
    Ok(ProbeFolder { path, _lock: lock })
}

/// Removes the probe folders in the temp dir that agents killed during a probe left: those
/// whose lock can be taken (no live process holds it) and that have not changed for a minute
/// (a folder a probe has just made, before it took its lock, is never taken for abandoned).
/// Called once when an agent starts, off the path to its first answer.
pub(crate) fn remove_abandoned_folders() {
    remove_abandoned_folders_in(&std::env::temp_dir(), std::time::Duration::from_secs(60));
}

fn remove_abandoned_folders_in(temp: &Path, unchanged_for: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if !name.starts_with(PROBE_PREFIX) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age >= unchanged_for);
        // Only this user's own folders (the temp dir is shared), and never through a link.
        if !meta.is_dir() || !old || std::os::unix::fs::MetadataExt::uid(&meta) != current_ids().0 {
            continue;
        }
        let Ok(folder) = std::fs::File::open(&path) else {
            continue;
        };
        // SAFETY: flock on a descriptor we own; released when `folder` drops.
        if unsafe { libc::flock(folder.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            continue;
        }
        if let Err(error) = crate::sandbox::remove_session_folder(&path) {
            tracing::debug!(%error, dir = %path.display(), "an abandoned probe folder");
        }
    }
}

fn probe_home_cache_layers(home: &Path) -> Vec<(PathBuf, String)> {
    let base = match probe_folder("acp-bash-probe-caches") {
        Ok(base) => base,
        Err(error) => {
            tracing::warn!(%error, "could not probe the package caches' layers");
            return Vec::new();
        }
    };
    let (overlays, _) = super::view_plan::cache_layers(home, &base.path, &[], &[]);
    let with = |overlays: Vec<super::child::view::Overlay>| {
        let mut p = plan(true, true);
        p.view = Some(super::child::view::View {
            overlays,
            overlays_required: true,
            without_mount_setattr: mount_setattr_missing(),
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
    let _ = crate::sandbox::remove_session_folder(&base.path);
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
    use super::super::diagnose::{Cause, Facts};
    use super::super::step::Step;
    use crate::sandbox::Mode;

    /// Ubuntu 23.10+ as an ordinary user: the facts its kernel gives (the sysctl on, the agent
    /// unconfined) and this binary's path.
    fn ubuntu() -> Facts {
        Facts {
            root: false,
            restrict_userns: Some(true),
            apparmor: true,
            label: Some("unconfined".into()),
            exe: Some("/usr/local/bin/acp-bash".into()),
            ..Facts::default()
        }
    }

    /// Ubuntu's second failure point, which no lab here produces (its kernel patch is
    /// Ubuntu's own): a real child really unshares, then its id-map write fails with EPERM
    /// (the fault injection). The probe names Ubuntu's restriction, prints the profile, and
    /// the gaps say which layers remain: Landlock's and seccomp's, not the namespaces'.
    #[test]
    fn ubuntus_id_map_refusal_after_a_working_unshare_is_diagnosed_through_a_real_child() {
        let plain = super::probe_step(super::plan(true, true));
        assert!(
            plain.is_ok(),
            "this test needs user namespaces on the machine that runs it: {plain:?}"
        );
        let mut p = super::plan(true, true);
        p.fault = Some((Step::UidMap, libc::EPERM));
        let failure = super::probe_step(p).unwrap_err();
        assert_eq!(
            (failure.step, failure.errno),
            (Some(Step::UidMap), libc::EPERM)
        );
        assert_eq!(
            super::super::diagnose::userns_cause(&failure, &ubuntu()),
            Cause::UbuntuMapRefused
        );

        let support = super::probe_support_with(ubuntu(), Some((Step::UidMap, libc::EPERM)));
        let why = support.user_namespace.clone().unwrap_err();
        assert!(
            why.starts_with("writing /proc/self/uid_map failed"),
            "{why}"
        );
        assert!(
            why.contains("apparmor_restrict_unprivileged_userns=1"),
            "{why}"
        );
        assert!(support.namespaces.is_err() && support.filesystem_view.is_err());
        let advice = support.advice.join("\n");
        assert!(
            advice.contains("profile acp-bash /usr/local/bin/acp-bash flags=(unconfined) {"),
            "{advice}"
        );
        // What still holds is not reported missing.
        assert_eq!(support.landlock.is_ok(), super::landlock_abi().is_ok());
        assert!(support.seccomp.is_ok(), "{:?}", support.seccomp);
        let gaps = super::super::report::gaps(Mode::Workspace, &support).join("; ");
        assert!(gaps.contains("no filesystem view"), "{gaps}");
        assert!(!gaps.contains("seccomp"), "{gaps}");
    }

    /// Ubuntu's first failure point (`unshare` itself refused, as the lab's `ubuntu-userns on`
    /// reproduces it for real) through the same real child.
    #[test]
    fn ubuntus_refused_unshare_is_diagnosed_through_a_real_child() {
        let support = super::probe_support_with(ubuntu(), Some((Step::Unshare, libc::EACCES)));
        let why = support.user_namespace.clone().unwrap_err();
        assert!(
            why.starts_with("creating namespaces (unshare) failed"),
            "{why}"
        );
        assert!(why.contains("Ubuntu's restriction"), "{why}");
        assert!(support
            .advice
            .join("\n")
            .contains("sudo apparmor_parser -r"));
    }
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
        let a = super::probe_folder(&prefix).unwrap().path;
        let b = super::probe_folder(&prefix).unwrap().path;
        assert_ne!(a, b);
        assert!(a.is_dir() && b.is_dir());
        for dir in left.iter().chain([&a, &b]) {
            let _ = std::fs::remove_dir(dir);
        }
    }
}
