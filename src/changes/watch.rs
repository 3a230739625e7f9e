//! The inotify side of [`super::ChangeTracker`]: a watch on every directory of the folder, a
//! thread that drains the kernel's queue into a bounded dirty set (so that a command making a
//! million files cannot overflow it unseen nor grow the agent), and the baseline the dirty paths
//! are compared with.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};

use super::gitignore::Ignores;
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
/// How many events a look reads when the kernel cannot say how many are queued.
const FALLBACK_EVENTS: usize = 65_536;

struct Shared {
    fd: Inotify,
    root: PathBuf,
    state: Mutex<State>,
    stop: AtomicBool,
    /// Looks ([`Watch::collect`]) waiting for `state`: the thread steps aside for them.
    looks_waiting: AtomicUsize,
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
    /// The kernel's queue overflowed (`IN_Q_OVERFLOW`): events were lost, so the next look
    /// walks the folder and compares it with the baseline instead.
    lost_events: bool,
    /// When the last look began (seconds, `CLOCK_REALTIME`): a file the baseline lacks whose
    /// `ctime` is older was there before it (left out by a bound), not made since.
    last_look: i64,
    /// A rescan is under way: past the bound, paths are counted by folder.
    rescanning: bool,
    baseline: BTreeMap<PathBuf, (Stat, Content)>,
    baseline_bytes: usize,
    /// Folders whose files are not all in the baseline (counted, not itemised, once): a file
    /// there missing from the baseline is not known to be new.
    unknown: BTreeSet<PathBuf>,
    ignores: Option<Ignores>,
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

impl Watch {
    pub fn start(root: &Path) -> Result<Watch, Unavailable> {
        let fd = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| Unavailable(format!("inotify: {e}")))?;
        let shared = Arc::new(Shared {
            fd,
            root: root.to_path_buf(),
            state: Mutex::new(State {
                ignores: Some(Ignores::new(root)),
                last_look: now_seconds(),
                ..State::default()
            }),
            stop: AtomicBool::new(false),
            looks_waiting: AtomicUsize::new(0),
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
    /// Takes the events queued when it is called, not those that keep coming (a background
    /// job that never stops changing files cannot hold it up).
    pub fn collect(&self) -> Changes {
        let shared = &self.shared;
        shared.looks_waiting.fetch_add(1, Ordering::SeqCst);
        let mut state = shared.state.lock().unwrap();
        shared.looks_waiting.fetch_sub(1, Ordering::SeqCst);
        shared.drain(&mut state, shared.queued_events_at_most());
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
    /// Where the file `rel` is counted when the repository ignores it ([`Ignores::folder`]).
    fn ignored_folder(&self, rel: &Path) -> Option<PathBuf> {
        self.ignores.as_ref()?.folder(rel, false)
    }

    /// `rel` changed: into the dirty set (or the ignored one), while they hold fewer than
    /// [`MAX_DIRTY`] paths. Past that, an event per path cannot be told from another event of
    /// the same path without keeping the path: the next look walks the folder instead
    /// ([`Shared::rescan`]), which counts each changed file once, by folder.
    fn touched(&mut self, rel: PathBuf) {
        if self.dirty.contains(&rel) || self.ignored.contains(&rel) {
            return;
        }
        let full = self.dirty.len() + self.ignored.len() >= MAX_DIRTY;
        if full && !self.rescanning {
            self.lost_events = true;
            return;
        }
        let ignored = self.ignored_folder(&rel);
        match (full, ignored) {
            (true, ignored) => {
                let folder = ignored.clone().unwrap_or_else(|| top(&rel));
                if ignored.is_none() {
                    self.unknown.insert(folder.clone());
                }
                *self.counted.entry(folder).or_default() += 1;
            }
            (false, Some(_)) => {
                self.ignored.insert(rel);
            }
            (false, None) => {
                self.dirty.insert(rel);
            }
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
            if let Some(ignores) = state.ignores.as_mut() {
                ignores.load(&dir);
            }
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            for entry in entries.flatten() {
                let rel = dir.join(entry.file_name());
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    stack.push(rel);
                } else if as_dirty {
                    state.touched(rel);
                } else if state.ignored_folder(&rel).is_none()
                    && state.baseline.len() < MAX_BASELINE_ENTRIES
                {
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
    /// dropped. It holds the state for one read at a time and steps aside while a look waits,
    /// so that events that never stop coming cannot keep a look (or `/undo`) waiting.
    fn follow(&self) {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        while !self.stop.load(Ordering::Relaxed) {
            if self.looks_waiting.load(Ordering::SeqCst) > 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            }
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(250u16)) {
                Ok(0) => continue,
                Ok(_) => {
                    let mut state = self.state.lock().unwrap();
                    self.drain(&mut state, 1);
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

    /// At least as many events as the kernel has queued now (each is at least a header long),
    /// and at most that many bytes' worth: a bound that every event queued now is within.
    fn queued_events_at_most(&self) -> usize {
        let mut bytes: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer, which outlives the call.
        let read = unsafe { libc::ioctl(self.fd.as_fd().as_raw_fd(), libc::FIONREAD, &mut bytes) };
        match read {
            0 => (bytes.max(0) as usize).div_ceil(std::mem::size_of::<libc::inotify_event>()),
            _ => FALLBACK_EVENTS,
        }
    }

    /// Reads queued events (non-blocking) into the dirty set: at most `budget` of them, so that
    /// it ends even while events keep coming (the queue is first in, first out: a budget of
    /// [`Shared::queued_events_at_most`] takes every event queued when it was counted).
    fn drain(&self, state: &mut State, mut budget: usize) {
        while budget > 0 {
            let events = match self.fd.read_events() {
                Ok(events) if !events.is_empty() => events,
                _ => break,
            };
            budget = budget.saturating_sub(events.len());
            for event in events {
                self.event(state, event);
            }
        }
    }

    fn event(&self, state: &mut State, event: InotifyEvent) {
        let mask = event.mask;
        if mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            state.lost_events = true;
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
        if rel.file_name() == Some(std::ffi::OsStr::new(".gitignore")) {
            let dir = dir.clone();
            if let Some(ignores) = state.ignores.as_mut() {
                ignores.load(&dir);
            }
        }
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

    /// After the kernel's queue overflowed: the dirty set is made again from the folder itself.
    /// Every directory is walked (and watched again: one that appeared unseen gets its watch);
    /// a file the baseline lacks, changed since the last look, is dirty; every file of the
    /// baseline is `lstat`ed, and dirty when it differs or is gone. Memory stays bounded as in
    /// [`State::touched`], and each path is counted once. Files of ignored folders have no
    /// baseline: those changed since the last look are counted (not those deleted).
    fn rescan(&self, state: &mut State) {
        state.lost_events = false;
        state.rescanning = true;
        state.dirty.clear();
        state.ignored.clear();
        state.counted.clear();
        // The files known first (a modified or deleted one is itemised before new ones fill
        // the bound), then the new ones.
        let differ: Vec<PathBuf> = state
            .baseline
            .iter()
            .filter(|(rel, (stat, _))| {
                std::fs::symlink_metadata(self.root.join(rel))
                    .map(|meta| Stat::of(&meta) != *stat)
                    .unwrap_or(true)
            })
            .map(|(rel, _)| rel.clone())
            .collect();
        for rel in differ {
            state.touched(rel);
        }
        let since = state.last_look - 1;
        let watched: std::collections::HashSet<PathBuf> = state.dirs.values().cloned().collect();
        let mut stack = vec![PathBuf::new()];
        while let Some(dir) = stack.pop() {
            if dir.ends_with(".git") {
                continue;
            }
            let path = self.root.join(&dir);
            if !watched.contains(&dir) {
                if let Some(ignores) = state.ignores.as_mut() {
                    ignores.load(&dir);
                }
                if state.dirs.len() >= MAX_WATCHES {
                    state.overflowed = true;
                } else {
                    match self.fd.add_watch(&path, mask()) {
                        Ok(wd) => {
                            state.dirs.insert(wd, dir.clone());
                        }
                        Err(_) => state.overflowed = true,
                    }
                }
            }
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            for entry in entries.flatten() {
                let rel = dir.join(entry.file_name());
                match entry.file_type() {
                    Ok(kind) if kind.is_dir() => stack.push(rel),
                    Ok(_) if !state.baseline.contains_key(&rel) => {
                        let changed = entry
                            .metadata()
                            .map(|meta| meta.ctime() >= since)
                            .unwrap_or(true);
                        if changed {
                            state.touched(rel);
                        }
                    }
                    _ => {}
                }
            }
        }
        state.rescanning = false;
    }

    /// The changes of the dirty paths against the baseline, which then takes them in.
    fn changes(&self, state: &mut State) -> Changes {
        // A folder counted by this look's rescan is unknown from the next look on: its
        // itemised files are still new now.
        let unknown = state.unknown.clone();
        if state.lost_events {
            self.rescan(state);
        }
        state.last_look = now_seconds();
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
            let old_mode = before.as_ref().map(|(stat, _)| stat.mode & 0o7777);
            let change = |kind, old, new| FileChange {
                path: rel.clone(),
                absolute: absolute.clone(),
                kind,
                old,
                new,
                old_mode,
            };
            match (before, &now) {
                (None, None) => {}
                (None, Some((stat, _))) if stat.is_dir() => {}
                (None, Some((stat, content))) => {
                    if unknown.iter().any(|folder| rel.starts_with(folder)) {
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
        // A deleted path whose inode reappeared elsewhere, with the same modification time, was
        // renamed (a file made after a delete may get the freed inode number: its mtime is new).
        for mut new in created {
            let moved = state
                .baseline
                .get(&new.path)
                .map(|(stat, _)| (stat.dev, stat.ino, stat.mtime));
            let from = deleted
                .iter()
                .position(|(stat, _)| Some((stat.dev, stat.ino, stat.mtime)) == moved);
            match from {
                Some(at) => {
                    let (_, old) = deleted.remove(at);
                    new.kind = ChangeKind::Renamed { from: old.path };
                    new.old = old.old;
                    new.old_mode = old.old_mode;
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

fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() as i64)
}

fn content_len(content: &Content) -> usize {
    match content {
        Content::Text(text) => text.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More events than the kernel queues (`fs.inotify.max_queued_events`) while the thread
    /// cannot drain them: the queue overflows and the last changes' events are lost. The next
    /// look walks the folder instead, and still shows exactly what changed.
    #[test]
    fn after_the_queue_overflowed_a_look_still_shows_the_right_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::write(root.join("a.txt"), "one\n").unwrap();
        std::fs::write(root.join("b.txt"), "b\n").unwrap();
        std::fs::create_dir(root.join("noise")).unwrap();
        let watch = Watch::start(&root).unwrap();
        assert!(watch.collect().is_empty());
        let queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(16_384);
        // Each new file is at least one event (IN_CREATE); more than the queue holds, then
        // the changes that matter, whose events are lost.
        let noise = queued + 1_000;
        assert!(
            noise + 3 < MAX_DIRTY,
            "the test stays within the dirty set's bound"
        );
        let (lost, overflowed) = {
            let state = watch.shared.state.lock().unwrap();
            for i in 0..noise {
                std::fs::write(root.join(format!("noise/{i:06}")), "").unwrap();
            }
            std::fs::write(root.join("a.txt"), "ONE\n").unwrap();
            std::fs::remove_file(root.join("b.txt")).unwrap();
            std::fs::write(root.join("c.txt"), "new\n").unwrap();
            drop(state);
            let mut state = watch.shared.state.lock().unwrap();
            watch
                .shared
                .drain(&mut state, watch.shared.queued_events_at_most());
            (state.lost_events, state.overflowed)
        };
        assert!(lost, "the queue overflowed");
        assert!(!overflowed, "nothing was left unfollowed");
        let changes = watch.collect();
        assert!(!changes.overflowed);
        assert_eq!(changes.count(), noise as u64 + 3);
        let shown: Vec<(&Path, &ChangeKind, &Content, &Content)> = changes
            .files
            .iter()
            .take(3)
            .map(|f| (f.path.as_path(), &f.kind, &f.old, &f.new))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    Path::new("a.txt"),
                    &ChangeKind::Modified,
                    &Content::Text("one\n".into()),
                    &Content::Text("ONE\n".into())
                ),
                (
                    Path::new("b.txt"),
                    &ChangeKind::Deleted,
                    &Content::Text("b\n".into()),
                    &Content::Absent
                ),
                (
                    Path::new("c.txt"),
                    &ChangeKind::Created,
                    &Content::Absent,
                    &Content::Text("new\n".into())
                ),
            ]
        );
        assert_eq!(
            changes.files.len() as u64 + changes.counted.iter().map(|(_, n)| n).sum::<u64>(),
            noise as u64 + 3
        );
        // The next look starts from the folder as it is: nothing more.
        assert!(watch.collect().is_empty());
    }

    /// A job that never stops changing the folder (here: a folder of 200 files renamed back
    /// and forth, each rename costing the watch more than the job) cannot hold a look up: each
    /// look takes the events queued when it began and returns. (Planted: draining until the
    /// queue is empty never returned.)
    #[test]
    fn a_look_returns_while_events_keep_coming_faster_than_they_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        for i in 0..200 {
            std::fs::write(root.join(format!("d/{i:03}")), "").unwrap();
        }
        let watch = Arc::new(Watch::start(&root).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let renames = Arc::new(AtomicUsize::new(0));
        let churn = {
            let (root, stop, renames) = (root.clone(), stop.clone(), renames.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::fs::rename(root.join("d"), root.join("e")).unwrap();
                    std::fs::rename(root.join("e"), root.join("d")).unwrap();
                    renames.fetch_add(2, Ordering::Relaxed);
                }
            })
        };
        while renames.load(Ordering::Relaxed) < 1_000 {
            std::thread::yield_now();
        }
        let (done, looked) = std::sync::mpsc::channel();
        let looks = {
            let watch = watch.clone();
            std::thread::spawn(move || {
                for _ in 0..3 {
                    let _ = watch.collect();
                    done.send(()).unwrap();
                }
            })
        };
        let mut finished = 0;
        for _ in 0..3 {
            // A guard against a hang, not a timing: a look takes milliseconds.
            match looked.recv_timeout(std::time::Duration::from_secs(120)) {
                Ok(()) => finished += 1,
                Err(_) => break,
            }
        }
        let churned = renames.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        churn.join().unwrap();
        assert_eq!(finished, 3, "looks returned while {churned} renames ran");
        looks.join().unwrap();
    }
}
