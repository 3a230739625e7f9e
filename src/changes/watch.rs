//! The inotify side of [`super::ChangeTracker`]: a watch on every directory of the folder, a
//! thread that drains the kernel's queue into a bounded dirty set (so that a command making a
//! million files cannot overflow it unseen nor grow the agent), and the baseline the dirty paths
//! are compared with.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};

use super::read::{look, Content, Stat};
use super::{
    ChangeKind, Changes, FileChange, Unavailable, MAX_BASELINE_BYTES, MAX_DIFF_BYTES, MAX_DIRTY,
    MAX_ITEMISED,
};

/// The most directories watched; past it, new directories are not followed (and the next
/// command's changes say the queue overflowed).
const MAX_WATCHES: usize = 200_000;
/// The most paths the baseline knows.
const MAX_BASELINE_ENTRIES: usize = 200_000;

struct Shared {
    fd: Inotify,
    root: PathBuf,
    state: Mutex<State>,
    stop: AtomicBool,
}

#[derive(Default)]
struct State {
    dirs: HashMap<WatchDescriptor, PathBuf>,
    /// Paths touched since the last look, one by one (at most [`MAX_DIRTY`] with `ignored`).
    dirty: BTreeSet<PathBuf>,
    /// Paths touched under ignored folders, one by one (bounded with `dirty`).
    ignored: BTreeSet<PathBuf>,
    /// Paths past the bounds, counted by folder.
    counted: BTreeMap<PathBuf, u64>,
    overflowed: bool,
    baseline: BTreeMap<PathBuf, (Stat, Content)>,
    baseline_bytes: usize,
    /// Folders whose files are not all in the baseline (counted, not itemised, once): a file
    /// there missing from the baseline is not known to be new.
    unknown: BTreeSet<PathBuf>,
    ignore_names: Vec<OsString>,
}

/// The watch on one folder and its thread (stopped when dropped).
pub(super) struct Watch {
    shared: Arc<Shared>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

/// The names the folder's `.gitignore` ignores wherever they are, as plain names (`target/`,
/// `/node_modules`); patterns with wildcards or inner slashes are not followed.
fn ignore_names(root: &Path) -> Vec<OsString> {
    let text = std::fs::read_to_string(root.join(".gitignore")).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with(['#', '!']))
        .map(|line| line.trim_start_matches('/').trim_end_matches('/'))
        .filter(|name| !name.is_empty() && !name.contains(['*', '?', '[', '/', '\\']))
        .map(OsString::from)
        .collect()
}

impl Watch {
    pub fn start(root: &Path) -> Result<Watch, Unavailable> {
        let fd = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| Unavailable(format!("inotify: {e}")))?;
        let shared = Arc::new(Shared {
            fd,
            root: root.to_path_buf(),
            state: Mutex::new(State {
                ignore_names: ignore_names(root),
                ..State::default()
            }),
            stop: AtomicBool::new(false),
        });
        {
            let mut state = shared.state.lock().unwrap();
            shared.add_tree(&mut state, Path::new(""), false);
        }
        let thread = shared.clone();
        std::thread::Builder::new()
            .name("acp-bash-changes".into())
            .spawn(move || thread.follow())
            .map_err(|e| Unavailable(format!("thread: {e}")))?;
        Ok(Watch { shared })
    }

    /// What changed since the last call, now taken into the baseline.
    pub fn collect(&self) -> Changes {
        let shared = &self.shared;
        let mut state = shared.state.lock().unwrap();
        shared.drain(&mut state);
        shared.changes(&mut state)
    }

    pub fn baseline_bytes(&self) -> usize {
        self.shared.state.lock().unwrap().baseline_bytes
    }

    pub fn baseline_entries(&self) -> usize {
        self.shared.state.lock().unwrap().baseline.len()
    }
}

/// The top folder a path is counted under: its first component (`.` for the folder itself).
fn top(rel: &Path) -> PathBuf {
    match rel.components().next() {
        Some(first) if rel.components().count() > 1 => PathBuf::from(first.as_os_str()),
        _ => PathBuf::from("."),
    }
}

impl State {
    /// The ignored folder `rel` is in, if any.
    fn ignored_folder(&self, rel: &Path) -> Option<PathBuf> {
        let mut folder = PathBuf::new();
        for component in rel.components() {
            if let Component::Normal(name) = component {
                folder.push(name);
                if self.ignore_names.iter().any(|n| n == name) {
                    return Some(folder);
                }
            }
        }
        None
    }

    fn touched(&mut self, rel: PathBuf) {
        let full = self.dirty.len() + self.ignored.len() >= MAX_DIRTY;
        let ignored = self.ignored_folder(&rel).is_some();
        let set = if ignored {
            &mut self.ignored
        } else {
            &mut self.dirty
        };
        if set.contains(&rel) {
            return;
        }
        if full {
            let folder = self.ignored_folder(&rel).unwrap_or_else(|| top(&rel));
            if !ignored {
                self.unknown.insert(folder.clone());
            }
            *self.counted.entry(folder).or_default() += 1;
        } else {
            set.insert(rel);
        }
    }
}

impl Shared {
    /// Watches `rel` and every directory under it; each file found goes into the baseline
    /// (`as_dirty`: into the dirty set instead, for a directory that appeared while watched).
    fn add_tree(&self, state: &mut State, rel: &Path, as_dirty: bool) {
        let mut stack = vec![rel.to_path_buf()];
        while let Some(dir) = stack.pop() {
            if dir.as_os_str() == ".git" || dir.ends_with(".git") {
                continue;
            }
            if state.dirs.len() >= MAX_WATCHES {
                state.overflowed = true;
                return;
            }
            let path = self.root.join(&dir);
            match self.fd.add_watch(&path, mask()) {
                Ok(wd) => {
                    state.dirs.insert(wd, dir.clone());
                }
                Err(error) => {
                    tracing::warn!(%error, path = %path.display(), "not watched");
                    state.overflowed = true;
                    continue;
                }
            }
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            let ignored = state.ignored_folder(&dir).is_some();
            for entry in entries.flatten() {
                let rel = dir.join(entry.file_name());
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    stack.push(rel);
                } else if as_dirty {
                    state.touched(rel);
                } else if !ignored && state.baseline.len() < MAX_BASELINE_ENTRIES {
                    let keep = state.baseline_bytes + MAX_DIFF_BYTES as usize <= MAX_BASELINE_BYTES;
                    if let Some((stat, content)) = look(&self.root, &rel, keep) {
                        state.baseline_bytes += content_len(&content);
                        state.baseline.insert(rel, (stat, content));
                    }
                }
            }
        }
    }

    /// The thread: waits for events and takes them into the dirty set, until the watch is
    /// dropped.
    fn follow(&self) {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        while !self.stop.load(Ordering::Relaxed) {
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(250u16)) {
                Ok(0) => continue,
                Ok(_) => {
                    let mut state = self.state.lock().unwrap();
                    self.drain(&mut state);
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(error) => {
                    tracing::error!(%error, "change tracking stopped");
                    self.state.lock().unwrap().overflowed = true;
                    return;
                }
            }
        }
    }

    /// Reads every queued event (non-blocking) into the dirty set.
    fn drain(&self, state: &mut State) {
        while let Ok(events) = self.fd.read_events() {
            if events.is_empty() {
                break;
            }
            for event in events {
                self.event(state, event);
            }
        }
    }

    fn event(&self, state: &mut State, event: InotifyEvent) {
        let mask = event.mask;
        if mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            state.overflowed = true;
            return;
        }
        if mask.contains(AddWatchFlags::IN_IGNORED) {
            state.dirs.remove(&event.wd);
            return;
        }
        let (Some(dir), Some(name)) = (state.dirs.get(&event.wd), event.name) else {
            return;
        };
        let rel = dir.join(name);
        if mask.contains(AddWatchFlags::IN_ISDIR) {
            if mask.intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO) {
                self.add_tree(state, &rel, true);
            }
            if mask.intersects(AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM) {
                let under: Vec<PathBuf> = state
                    .baseline
                    .range(rel.clone()..)
                    .take_while(|(path, _)| path.starts_with(&rel))
                    .map(|(path, _)| path.clone())
                    .collect();
                for path in under {
                    state.touched(path);
                }
            }
            return;
        }
        state.touched(rel);
    }

    /// The changes of the dirty paths against the baseline, which then takes them in.
    fn changes(&self, state: &mut State) -> Changes {
        let mut changes = Changes {
            overflowed: std::mem::take(&mut state.overflowed),
            ..Changes::default()
        };
        let dirty = std::mem::take(&mut state.dirty);
        let ignored = std::mem::take(&mut state.ignored);
        let mut counted = std::mem::take(&mut state.counted);
        for rel in ignored {
            let folder = state.ignored_folder(&rel).unwrap_or_else(|| top(&rel));
            *counted.entry(folder).or_default() += 1;
        }
        let mut created: Vec<FileChange> = Vec::new();
        let mut deleted: Vec<(Stat, FileChange)> = Vec::new();
        let mut files = Vec::new();
        for rel in dirty {
            let keep = state.baseline_bytes + MAX_DIFF_BYTES as usize <= MAX_BASELINE_BYTES;
            let now = look(&self.root, &rel, keep);
            let before = state.baseline.remove(&rel);
            if let Some((_, content)) = &before {
                state.baseline_bytes -= content_len(content);
            }
            let absolute = self.root.join(&rel);
            let change = |kind, old, new| FileChange {
                path: rel.clone(),
                absolute: absolute.clone(),
                kind,
                old,
                new,
            };
            match (before, &now) {
                (None, None) => {}
                (None, Some((stat, _))) if stat.is_dir() => {}
                (None, Some((stat, content))) => {
                    let unknown = state.unknown.iter().any(|folder| rel.starts_with(folder));
                    if unknown {
                        files.push(change(
                            ChangeKind::Modified,
                            Content::NotKept { size: 0 },
                            content.clone(),
                        ));
                    } else {
                        let _ = stat;
                        created.push(change(
                            ChangeKind::Created,
                            Content::Absent,
                            content.clone(),
                        ));
                    }
                }
                (Some((stat, old)), None) => {
                    deleted.push((stat, change(ChangeKind::Deleted, old, Content::Absent)));
                }
                (Some((old_stat, old)), Some((stat, new))) => {
                    let same = old_stat == *stat
                        || (old == *new
                            && old_stat.mode == stat.mode
                            && matches!(old, Content::Text(_) | Content::Symlink { .. }));
                    if !same {
                        files.push(change(ChangeKind::Modified, old, new.clone()));
                    }
                }
            }
            if let Some((stat, content)) = now {
                if !stat.is_dir() && state.baseline.len() < MAX_BASELINE_ENTRIES {
                    state.baseline_bytes += content_len(&content);
                    state.baseline.insert(rel, (stat, content));
                }
            }
        }
        // A deleted path whose inode reappeared elsewhere was renamed.
        for mut new in created {
            let moved = state
                .baseline
                .get(&new.path)
                .map(|(stat, _)| (stat.dev, stat.ino));
            let from = deleted
                .iter()
                .position(|(stat, _)| Some((stat.dev, stat.ino)) == moved);
            match from {
                Some(at) => {
                    let (_, old) = deleted.remove(at);
                    new.kind = ChangeKind::Renamed { from: old.path };
                    new.old = old.old;
                    files.push(new);
                }
                None => files.push(new),
            }
        }
        files.extend(deleted.into_iter().map(|(_, change)| change));
        files.sort_by(|a, b| a.path.cmp(&b.path));
        if files.len() > MAX_ITEMISED {
            for rest in files.split_off(MAX_ITEMISED) {
                *counted.entry(top(&rest.path)).or_default() += 1;
            }
        }
        changes.files = files;
        changes.counted = counted.into_iter().collect();
        changes
    }
}

fn content_len(content: &Content) -> usize {
    match content {
        Content::Text(text) => text.len(),
        _ => 0,
    }
}
