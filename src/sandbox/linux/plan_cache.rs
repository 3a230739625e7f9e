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
//!
//! The session's own folders the plan makes (the caches' layers: [`own_folders`]) are the one
//! exception (`notes/2026-12-02-plan-per-command.md`): they are stamped *after* the build that
//! makes them, and not held to the racy rule. The agent makes them a moment before (a new
//! session's first plan), no command reaches them (`confine::layers_exposed`), and only this
//! user can change them on the host; held to the rule, a new session's first plan was never
//! kept, and its first command planned again. The same (mode, roots) planned on two threads at
//! once (the early plan at `session/new` and the session's first command) is built once: the
//! second waits for the first ([`WAIT`] at most) and checks its stamp as for a kept plan.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::child::view::View;
use super::view_plan::{socket_dirs_from_env, SYSTEMD_KEEP};
use crate::sandbox::{Mode, Roots, Support, HOME_CREDENTIALS, PACKAGE_CACHES};

/// How recent a folder's change may be for its stamp to be trusted.
const RACY: std::time::Duration = std::time::Duration::from_millis(50);
/// Plans kept (per process; one per session and mode in use, the oldest dropped first; a
/// session's own are dropped when it ends, [`forget_under`]).
const KEPT: usize = 64;
/// How long a command waits for the same plan another thread is building before it builds
/// its own (a hang guard: a plan takes about a millisecond).
const WAIT: std::time::Duration = std::time::Duration::from_secs(2);

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
    for holder in super::view_plan::hidden_sockets_and_holders().1 {
        add(holder, Look::Entries);
    }
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
        // WSL's Windows homes (`masks::windows_homes`).
        if crate::sandbox::masks::is_wsl() {
            add(PathBuf::from("/mnt"), Look::Entries);
            for home in crate::sandbox::masks::windows_homes() {
                add(home.clone(), Look::Identity);
                for rel in crate::sandbox::masks::WINDOWS_HOME_CREDENTIALS {
                    entries_above(&home.join(rel), &mut add);
                }
                add(home.join(".ssh"), Look::Entries);
                entries_above(&home.join(".ssh"), &mut add);
            }
        }
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
    out
}

/// The session's own folders the plan reads and makes: the caches' layers
/// (`view_plan::cache_layers`). Stamped after the build, without the racy rule (module doc).
fn own_folders(mode: Mode, roots: &Roots) -> Vec<(PathBuf, Look)> {
    let mut out = Vec::new();
    if let (Mode::Workspace, Some(layer)) = (mode, &roots.cache_layer) {
        out.push((layer.clone(), Look::Entries));
        for rel in PACKAGE_CACHES {
            out.push((layer.join(rel.replace('/', "-")), Look::Entries));
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
#[derive(PartialEq, Clone)]
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
            // The view and ruleset do not depend on the hosts one command may also reach.
            roots: Roots {
                also_hosts: Vec::new(),
                ..roots.clone()
            },
            support: support.clone(),
            ids: super::current_ids(),
            env: ["XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"].map(std::env::var_os),
        }
    }
}

struct Entry {
    key: Key,
    /// The watched paths, then the session's own folders ([`own_folders`]).
    paths: Vec<(PathBuf, Look)>,
    states: Vec<State>,
    built: Arc<Built>,
}

/// The kept plans, and the keys a thread is building a plan for now.
struct Cache {
    entries: Vec<Entry>,
    building: Vec<Key>,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache {
    entries: Vec::new(),
    building: Vec::new(),
});
/// Woken when a build ends.
static BUILT: std::sync::Condvar = std::sync::Condvar::new();

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes `key` off the keys being built when the build ends (or panics), waking the waiters.
struct Building(Option<Key>);

impl Drop for Building {
    fn drop(&mut self) {
        if let Some(key) = self.0.take() {
            cache().building.retain(|k| *k != key);
            BUILT.notify_all();
        }
    }
}

/// The plan for `key`: the kept one if nothing it depends on changed (`true`), else a new one
/// from `build` (`false`), kept for the next command when its stamp can be trusted. Where
/// another thread is building the plan for `key`, waits for it and takes it if its stamp
/// still holds.
pub(crate) fn get_or_build(key: Key, build: impl FnOnce() -> Built) -> (Arc<Built>, bool) {
    let deadline = std::time::Instant::now() + WAIT;
    let mut guard = cache();
    let building = loop {
        let kept = guard
            .entries
            .iter()
            .find(|e| e.key == key)
            .map(|e| (e.paths.clone(), e.states.clone(), e.built.clone()));
        if let Some((paths, states, built)) = kept {
            drop(guard);
            let now: Vec<State> = paths.iter().map(|(p, look)| state(p, *look)).collect();
            if now == states {
                return (built, true);
            }
            guard = cache();
        }
        let now = std::time::Instant::now();
        if !guard.building.contains(&key) || now >= deadline {
            // Marked only when no one else builds it (past the deadline, this builds its own).
            let mark = !guard.building.contains(&key);
            if mark {
                guard.building.push(key.clone());
            }
            break Building(mark.then(|| key.clone()));
        }
        guard = BUILT
            .wait_timeout(guard, deadline - now)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    };
    drop(guard);
    // Stamped before building: a change after the stamp is seen by the next command. The
    // session's own folders, which the build makes, after it.
    let mut paths = watched(key.mode, &key.roots);
    let states = stamp(&paths);
    let built = Arc::new(build());
    let own = own_folders(key.mode, &key.roots);
    let states = states.map(|mut states| {
        states.extend(own.iter().map(|(p, look)| state(p, *look)));
        states
    });
    paths.extend(own);
    let mut cache = cache();
    cache.entries.retain(|e| e.key != key);
    if let Some(states) = states {
        if cache.entries.len() >= KEPT {
            cache.entries.remove(0);
        }
        cache.entries.push(Entry {
            key,
            paths,
            states,
            built: built.clone(),
        });
    }
    drop(cache);
    drop(building);
    (built, false)
}

/// Drops the kept plans whose session folder (temp dir or caches' layers) lies under `dir`:
/// a session's own plans (and their Landlock rulesets' fds) once it has ended.
pub(crate) fn forget_under(dir: &Path) {
    let mine = |p: &Option<PathBuf>| p.as_deref().is_some_and(|p| p.starts_with(dir));
    cache()
        .entries
        .retain(|e| !mine(&e.key.roots.session_temp) && !mine(&e.key.roots.cache_layer));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    fn holds(key: &Key) -> bool {
        cache().entries.iter().any(|e| e.key == *key)
    }

    fn nothing() -> Built {
        Built {
            view: None,
            ruleset: Ok(None),
            notices: Vec::new(),
        }
    }

    /// A workspace session's roots under `base` (no home: nothing of the host's home is
    /// watched), its folders not made yet.
    fn session_roots(base: &Path, name: &str) -> (Roots, PathBuf) {
        let ws = base.join(format!("{name}-ws"));
        std::fs::create_dir_all(&ws).unwrap();
        let session = base.join(format!("{name}-session"));
        let roots = Roots::new(&ws, base)
            .session_temp(session.join("tmp"))
            .cache_layer(session.join("caches"));
        (roots, session)
    }

    fn key(roots: &Roots) -> Key {
        Key::new(Mode::Workspace, roots, &Support::all(7))
    }

    /// Waits until no host folder the plan watches (`/dev`, `/run`) changed within [`RACY`]:
    /// what the racy rule may refuse here is then the session's own folders only.
    fn host_settled(roots: &Roots) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while stamp(&watched(Mode::Workspace, roots)).is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the host's /dev or /run never settles"
            );
            std::thread::yield_now();
        }
    }

    fn make_session_folders(session: &Path) {
        for sub in ["tmp", "caches"] {
            std::fs::create_dir_all(session.join(sub)).unwrap();
        }
    }

    #[test]
    fn a_new_sessions_first_plan_is_kept_though_the_agent_just_made_its_folders() {
        let base = tempfile::tempdir().unwrap();
        let (roots, session) = session_roots(base.path(), "first");
        host_settled(&roots);
        // As at `session/new`: the session's folders made, then its plan, whose build makes
        // a cache's layer folder.
        make_session_folders(&session);
        let layer = session.join("caches/.npm");
        let (_, reused) = get_or_build(key(&roots), || {
            std::fs::create_dir(&layer).unwrap();
            nothing()
        });
        assert!(!reused);
        let (_, reused) = get_or_build(key(&roots), nothing);
        assert!(reused, "the session's first command planned again");
        // The session's own folders still count: one removed on the host re-plans.
        std::fs::remove_dir(&layer).unwrap();
        let (_, reused) = get_or_build(key(&roots), nothing);
        assert!(
            !reused,
            "a layer folder removed on the host was not noticed"
        );
    }

    #[test]
    fn a_plan_another_thread_is_building_is_waited_for_not_built_again() {
        let base = tempfile::tempdir().unwrap();
        let (roots, session) = session_roots(base.path(), "inflight");
        host_settled(&roots);
        make_session_folders(&session);
        let (release, released) = mpsc::channel::<()>();
        let (started, building) = mpsc::channel::<()>();
        // One key for both (another test may change the environment a key reads meanwhile).
        let key = key(&roots);
        let first = {
            let key = key.clone();
            std::thread::spawn(move || {
                get_or_build(key, || {
                    started.send(()).unwrap();
                    // Done when a second build starts (the bug), else after a while.
                    let _ = released.recv_timeout(std::time::Duration::from_millis(300));
                    nothing()
                })
            })
        };
        building.recv().unwrap();
        let built_again = AtomicBool::new(false);
        let (second, reused) = get_or_build(key, || {
            built_again.store(true, Ordering::Relaxed);
            let _ = release.send(());
            nothing()
        });
        let (first, _) = first.join().unwrap();
        assert!(
            !built_again.load(Ordering::Relaxed),
            "the plan was built twice at once"
        );
        assert!(reused && Arc::ptr_eq(&first, &second));
    }

    #[test]
    fn a_sessions_plans_are_dropped_when_it_ends_and_no_other_sessions() {
        let base = tempfile::tempdir().unwrap();
        let (ended, ended_session) = session_roots(base.path(), "ended");
        let (going_on, going_on_session) = session_roots(base.path(), "going-on");
        make_session_folders(&ended_session);
        make_session_folders(&going_on_session);
        // Kept or not (the racy rule may refuse a stamp this fresh), until they are.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !holds(&key(&ended)) || !holds(&key(&going_on)) {
            assert!(
                std::time::Instant::now() < deadline,
                "the plans were never kept"
            );
            get_or_build(key(&ended), nothing);
            get_or_build(key(&going_on), nothing);
        }
        forget_under(&ended_session);
        assert!(
            !holds(&key(&ended)),
            "the ended session's plan is still kept"
        );
        assert!(holds(&key(&going_on)), "another session's plan was dropped");
    }
}
