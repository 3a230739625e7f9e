//! A command's plan made once per session and mode (`notes/2026-12-02-zygote-plan-once.md`):
//! the view, the Landlock ruleset and the notices `confine` builds depend only on the mode, the
//! roots, the layers and what the host's filesystem holds at a few dozen paths. The first
//! command of a (mode, roots) builds them; later ones reuse them while a *stamp* of the places
//! those lookups read is unchanged: one `statx` per folder whose entries the plan read (a file
//! appearing, going or being replaced there changes the folder's ctime and mtime) and per
//! path whose identity it used (a root, a symlink on the way). Anything else (a new socket
//! folder under `/run`, a new credential file, a changed root, another mode) builds the plan
//! again, as every command did before, and the zygote's own comparison of the setup message
//! decides whether the running zygote still fits.
//!
//! Folder timestamps come from a coarse clock on older kernels: a change in the same tick as
//! the stamp could leave them equal. A stamp whose folder changed within [`RACY`] of the moment
//! it was taken is never trusted (git's "racily clean" rule): the next command builds again.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::child::view::View;
use super::view_plan::{socket_dirs_from_env, SYSTEMD_KEEP};
use crate::sandbox::{Mode, Roots, Support, HOME_CREDENTIALS, PACKAGE_CACHES};

/// How recent a folder's change may be for its stamp to be trusted.
const RACY: std::time::Duration = std::time::Duration::from_millis(50);
/// Plans kept (per process; one per session and mode in use, the oldest dropped first).
const KEPT: usize = 64;

/// What a stamp records of a path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Look {
    /// Which file it is (device, inode, type), following symlinks: a root, a mask's path.
    Identity,
    /// That, and when its entries last changed (a folder the plan looked up names in).
    Entries,
}

/// One path's state: `None` where it does not exist (or cannot be looked up).
type State = Option<(u64, u64, u32, i64, i64, i64, i64)>;

fn state(path: &Path, look: Look) -> State {
    let meta = std::fs::metadata(path).ok()?;
    let (mtime, mtime_ns, ctime, ctime_ns) = match look {
        Look::Identity => (0, 0, 0, 0),
        Look::Entries => (
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
        ),
    };
    Some((
        meta.dev(),
        meta.ino(),
        meta.mode() & libc::S_IFMT,
        mtime,
        mtime_ns,
        ctime,
        ctime_ns,
    ))
}

/// The paths whose state decides the plan of `mode` under `roots` (see the module doc).
fn watched(mode: Mode, roots: &Roots) -> Vec<(PathBuf, Look)> {
    let mut out: Vec<(PathBuf, Look)> = Vec::new();
    let mut add = |path: PathBuf, look: Look| match out.iter_mut().find(|(p, _)| *p == path) {
        Some((_, l)) if look == Look::Entries => *l = Look::Entries,
        Some(_) => {}
        None => out.push((path, look)),
    };
    // The nearest existing folder above `path` (a file or folder created on the way changes
    // its entries), and `path` itself where it is a symlink (its target's identity).
    fn entries_above(path: &Path, add: &mut dyn FnMut(PathBuf, Look)) {
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            add(path.to_path_buf(), Look::Identity);
        }
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d.is_dir() {
                add(d.to_path_buf(), Look::Entries);
                return;
            }
            dir = d.parent();
        }
    }
    for root in [Some(&roots.workspace), Some(&roots.temp)]
        .into_iter()
        .chain([roots.session_temp.as_ref(), roots.cache_layer.as_ref()])
        .flatten()
    {
        add(root.clone(), Look::Identity);
    }
    add(PathBuf::from("/tmp"), Look::Identity);
    add(PathBuf::from("/dev"), Look::Entries);
    if !matches!(mode, Mode::Workspace | Mode::ReadOnly) {
        return out;
    }
    // Host daemons' sockets (`view_plan::hidden_sockets`).
    add(PathBuf::from("/run"), Look::Entries);
    add(PathBuf::from("/var/run"), Look::Entries);
    add(PathBuf::from(SYSTEMD_KEEP), Look::Identity);
    for dir in socket_dirs_from_env() {
        add(dir, Look::Identity);
    }
    // Credential files and package caches under the home (`masked_paths`, `package_caches`).
    let protection = &roots.protection;
    if let Some(home) = &protection.home {
        add(home.clone(), Look::Identity);
        for rel in HOME_CREDENTIALS.iter().chain(PACKAGE_CACHES.iter()) {
            entries_above(&home.join(rel), &mut add);
        }
        add(home.join(".ssh"), Look::Entries);
        entries_above(&home.join(".ssh"), &mut add);
    }
    for path in protection
        .agent_dirs
        .iter()
        .chain(&protection.mask)
        .chain(&protection.allow_read)
    {
        add(path.clone(), Look::Identity);
        entries_above(path, &mut add);
    }
    // Git metadata (`view_plan::git_metadata`).
    if mode == Mode::Workspace && !protection.git_metadata_writable {
        let repos = std::iter::once(roots.workspace.clone()).chain(protection.git_repos.clone());
        for repo in repos {
            add(repo.clone(), Look::Identity);
            let git = repo.join(".git");
            add(git.clone(), Look::Identity);
            for name in ["hooks", "config", "config.worktree"] {
                add(git.join(name), Look::Identity);
            }
            let modules = git.join("modules");
            add(modules.clone(), Look::Entries);
            if let Ok(entries) = std::fs::read_dir(&modules) {
                for module in entries.flatten() {
                    add(module.path(), Look::Entries);
                }
            }
        }
    }
    // The caches' layers (`view_plan::cache_layers`): the session's own folders.
    if let (Mode::Workspace, Some(layer)) = (mode, &roots.cache_layer) {
        add(layer.clone(), Look::Entries);
        for rel in PACKAGE_CACHES {
            add(layer.join(rel.replace('/', "-")), Look::Entries);
        }
    }
    out
}

/// The state of each watched path, or `None` when one changed too recently to be trusted.
fn stamp(paths: &[(PathBuf, Look)]) -> Option<Vec<State>> {
    let now = std::time::SystemTime::now();
    let recent = |secs: i64, nanos: i64| {
        let then = std::time::UNIX_EPOCH
            + std::time::Duration::from_secs(secs.max(0) as u64)
            + std::time::Duration::from_nanos(nanos.max(0) as u64);
        now.duration_since(then).map_or(true, |age| age < RACY)
    };
    let states: Vec<State> = paths.iter().map(|(p, look)| state(p, *look)).collect();
    let racy = paths.iter().zip(&states).any(|((_, look), s)| {
        *look == Look::Entries
            && s.is_some_and(|(_, _, _, m, mn, c, cn)| recent(m, mn) || recent(c, cn))
    });
    (!racy).then_some(states)
}

/// What `confine` builds for a (mode, roots) and keeps while nothing changed.
pub(crate) struct Built {
    /// The view (its caches' work folders are those of the command that built it: a reuse
    /// that mounts the overlays again takes fresh ones, [`super::view_plan::renew_work`]).
    pub view: Option<View>,
    /// The Landlock ruleset (`Ok(None)`: none for this mode), or why it could not be built.
    pub ruleset: Result<Option<Arc<OwnedFd>>, String>,
    /// The notices of the plan.
    pub notices: Vec<String>,
}

/// What a plan was built from, compared in memory.
#[derive(PartialEq)]
pub(crate) struct Key {
    pub mode: Mode,
    pub roots: Roots,
    pub support: Support,
    pub ids: (u32, u32),
    pub env: [Option<std::ffi::OsString>; 2],
}

impl Key {
    pub(crate) fn new(mode: Mode, roots: &Roots, support: &Support) -> Key {
        Key {
            mode,
            roots: roots.clone(),
            support: support.clone(),
            ids: super::current_ids(),
            env: ["XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"].map(std::env::var_os),
        }
    }
}

struct Entry {
    key: Key,
    paths: Vec<(PathBuf, Look)>,
    states: Vec<State>,
    built: Arc<Built>,
}

static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The plan for `key`: the kept one if nothing it depends on changed (`true`), else a new one
/// from `build` (`false`), kept for the next command when its stamp can be trusted.
pub(crate) fn get_or_build(key: Key, build: impl FnOnce() -> Built) -> (Arc<Built>, bool) {
    let kept = {
        let cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .iter()
            .find(|e| e.key == key)
            .map(|e| (e.paths.clone(), e.states.clone(), e.built.clone()))
    };
    if let Some((paths, states, built)) = kept {
        let now: Vec<State> = paths.iter().map(|(p, look)| state(p, *look)).collect();
        if now == states {
            return (built, true);
        }
    }
    // Stamped before building: a change after the stamp is seen by the next command.
    let paths = watched(key.mode, &key.roots);
    let states = stamp(&paths);
    let built = Arc::new(build());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|e| e.key != key);
    if let Some(states) = states {
        if cache.len() >= KEPT {
            cache.remove(0);
        }
        cache.push(Entry {
            key,
            paths,
            states,
            built: built.clone(),
        });
    }
    (built, false)
}
