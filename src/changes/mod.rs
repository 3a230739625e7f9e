//! Change tracking: which files of a session folder a command created, modified, deleted or
//! renamed, with their contents before and after, and the undo store.
//!
//! Owns [`ChangeTracker`] (one per session folder): an inotify watch on every directory of the
//! folder gives the set of paths touched since the last look (near zero cost when nothing
//! changed: one non-blocking read), and a baseline of what each file was (its `lstat` and, for
//! text files up to [`MAX_DIFF_BYTES`], its content, within [`MAX_BASELINE_BYTES`]) gives the
//! old side of each change. A command's writes reach the real files as they happen: nothing here
//! stands between a command and the disk, so killing the agent loses none of them
//! (`notes/2026-12-06-change-tracking.md`). The baseline and the undo store live in the agent's
//! memory, out of every command's reach. Must not touch: ACP, presentation (the diff text and
//! the summary line are [`crate::present::changes`]'), running commands.
//!
//! Linux only (inotify); elsewhere [`ChangeTracker::start`] says it is not available.

mod beneath;
#[cfg(target_os = "linux")]
mod gitignore;
mod read;
mod undo;
#[cfg(target_os = "linux")]
mod watch;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use read::Content;
pub use undo::{UndoError, Undone, Which};

/// Files larger than this are named with their sizes, not diffed.
pub const MAX_DIFF_BYTES: u64 = 1024 * 1024;
/// The most file content the baseline keeps in memory; files seen beyond it are tracked by
/// their `lstat` only (their change is shown without the old text).
pub const MAX_BASELINE_BYTES: usize = 64 * 1024 * 1024;
/// The most files of one command shown one by one; the rest are counted by folder.
pub const MAX_ITEMISED: usize = 200;
/// The most paths followed one by one between two looks; beyond it, the next look walks the
/// folder (as after the kernel's queue overflowed) and counts the rest by top-level folder, each
/// once (a command that creates a million files costs the agent no more memory).
pub const MAX_DIRTY: usize = 20_000;
/// The undo store keeps the changes of at most this many commands…
pub const UNDO_COMMANDS: usize = 20;
/// … and at most this many bytes of file content (old and new sides together).
pub const UNDO_BYTES: usize = 64 * 1024 * 1024;

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeKind {
    /// It did not exist before.
    Created,
    /// Its content (or its type, or a symlink's target) changed.
    Modified,
    /// It is gone.
    Deleted,
    /// It was moved here from `from` (relative to the folder), its content kept or changed.
    Renamed {
        /// Where it was.
        from: PathBuf,
    },
}

/// One changed file of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileChange {
    /// Its path relative to the tracked folder (bytes as the file system has them).
    pub path: PathBuf,
    /// Its absolute path.
    pub absolute: PathBuf,
    /// What happened.
    pub kind: ChangeKind,
    /// What it was ([`Content::Absent`] for a new file).
    pub old: Content,
    /// What it is ([`Content::Absent`] once deleted).
    pub new: Content,
    /// Its permission bits before (`None` for a new file, or where not known): `/undo` puts
    /// them back with the content.
    pub old_mode: Option<u32>,
}

/// Everything one command changed in the tracked folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Changes {
    /// The changed files, one by one (at most [`MAX_ITEMISED`]), sorted by path.
    pub files: Vec<FileChange>,
    /// Changes counted by folder, not itemised: the folders the repository ignores
    /// (`target/`, `node_modules/`) and whatever passed the bounds, with how many paths each.
    pub counted: Vec<(PathBuf, u64)>,
    /// The kernel's event queue overflowed: more changed than could be followed one by one.
    pub overflowed: bool,
}

impl Changes {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.counted.is_empty() && !self.overflowed
    }

    /// How many files changed in all (itemised and counted).
    pub fn count(&self) -> u64 {
        self.files.len() as u64 + self.counted.iter().map(|(_, n)| n).sum::<u64>()
    }
}

/// Why a folder's changes are not tracked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A command's changes, kept for undo, numbered from 1 in the session.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Recorded {
    /// Its number among the tracked commands of the session (1 = the first).
    pub number: u64,
    /// The call it came from.
    pub call_id: String,
    /// What it changed.
    pub changes: Changes,
}

/// The tracker of one session folder: see the module docs.
#[non_exhaustive]
pub struct ChangeTracker {
    root: PathBuf,
    #[cfg(target_os = "linux")]
    watch: watch::Watch,
    undo: Mutex<UndoStore>,
}

#[derive(Default)]
struct UndoStore {
    kept: VecDeque<Recorded>,
    bytes: usize,
    next: u64,
}

fn content_bytes(content: &Content) -> usize {
    match content {
        Content::Text(text) => text.len(),
        _ => 0,
    }
}

fn changes_bytes(changes: &Changes) -> usize {
    changes
        .files
        .iter()
        .map(|f| content_bytes(&f.old) + content_bytes(&f.new))
        .sum()
}

impl ChangeTracker {
    /// Starts tracking `root`: watches every directory under it (not `.git`) and reads the
    /// baseline (blocking: call it off the async runtime's threads).
    pub fn start(root: &Path) -> Result<ChangeTracker, Unavailable> {
        #[cfg(target_os = "linux")]
        {
            let root = root
                .canonicalize()
                .map_err(|e| Unavailable(format!("{}: {e}", root.display())))?;
            let watch = watch::Watch::start(&root)?;
            Ok(ChangeTracker {
                root,
                watch,
                undo: Mutex::new(UndoStore::default()),
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = root;
            Err(Unavailable(
                "change tracking needs inotify (Linux)".to_string(),
            ))
        }
    }

    /// The folder tracked (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Before a command: whatever changed since the last look (the user's editor, a
    /// background job) is taken into the baseline and not attributed to the command.
    pub fn begin(&self) {
        #[cfg(target_os = "linux")]
        {
            let _ = self.watch.collect();
        }
    }

    /// After a command: what changed since [`ChangeTracker::begin`], now in the baseline.
    pub fn finish(&self) -> Changes {
        #[cfg(target_os = "linux")]
        {
            self.watch.collect()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Changes::default()
        }
    }

    /// Keeps `changes` of call `call_id` for undo (bounded: [`UNDO_COMMANDS`], [`UNDO_BYTES`]);
    /// returns its number.
    pub fn keep(&self, call_id: &str, changes: &Changes) -> u64 {
        let mut undo = self.undo.lock().unwrap();
        undo.next += 1;
        let number = undo.next;
        let bytes = changes_bytes(changes);
        undo.kept.push_back(Recorded {
            number,
            call_id: call_id.to_string(),
            changes: changes.clone(),
        });
        undo.bytes += bytes;
        while undo.kept.len() > UNDO_COMMANDS || (undo.bytes > UNDO_BYTES && undo.kept.len() > 1) {
            if let Some(old) = undo.kept.pop_front() {
                undo.bytes -= changes_bytes(&old.changes);
            }
        }
        number
    }

    /// The kept commands' changes, oldest first.
    pub fn kept(&self) -> Vec<Recorded> {
        self.undo.lock().unwrap().kept.iter().cloned().collect()
    }

    /// Forgets kept command `number` (it was undone).
    pub fn forget(&self, number: u64) {
        let mut undo = self.undo.lock().unwrap();
        if let Some(at) = undo.kept.iter().position(|r| r.number == number) {
            if let Some(old) = undo.kept.remove(at) {
                undo.bytes -= changes_bytes(&old.changes);
            }
        }
    }

    /// How many bytes of file content the baseline holds now (for tests of the bound).
    pub fn baseline_bytes(&self) -> usize {
        #[cfg(target_os = "linux")]
        {
            self.watch.baseline_bytes()
        }
        #[cfg(not(target_os = "linux"))]
        {
            0
        }
    }

    /// How many paths the baseline knows (for tests of the bound).
    pub fn baseline_entries(&self) -> usize {
        #[cfg(target_os = "linux")]
        {
            self.watch.baseline_entries()
        }
        #[cfg(not(target_os = "linux"))]
        {
            0
        }
    }
}

impl std::fmt::Debug for ChangeTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeTracker")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
impl FileChange {
    /// A change of `path` under `/w`, both sides absent (set them).
    pub(crate) fn for_tests(path: &str, kind: ChangeKind) -> FileChange {
        FileChange {
            path: PathBuf::from(path),
            absolute: Path::new("/w").join(path),
            kind,
            old: Content::Absent,
            new: Content::Absent,
            old_mode: None,
        }
    }
}

#[cfg(test)]
impl Changes {
    /// These files changed.
    pub(crate) fn for_tests(files: Vec<FileChange>) -> Changes {
        Changes {
            files,
            ..Changes::default()
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod undo_store_bounds {
    use super::*;

    fn text_change(path: &str, bytes: usize) -> FileChange {
        let mut change = FileChange::for_tests(path, ChangeKind::Created);
        change.new = Content::Text("x".repeat(bytes));
        change
    }

    fn numbers(tracker: &ChangeTracker) -> Vec<u64> {
        tracker.kept().iter().map(|r| r.number).collect()
    }

    /// The store keeps the last [`UNDO_COMMANDS`] commands: the 25th kept pushes out the
    /// first five, and numbering goes on (a number names one command for the session).
    #[test]
    fn the_last_twenty_commands_are_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let tracker = ChangeTracker::start(tmp.path()).unwrap();
        for n in 1..=25 {
            let changes = Changes::for_tests(vec![text_change(&format!("f{n}"), 10)]);
            assert_eq!(tracker.keep(&format!("call-{n}"), &changes), n);
        }
        assert_eq!(numbers(&tracker), (6..=25).collect::<Vec<u64>>());
        assert_eq!(tracker.kept()[0].call_id, "call-6");
    }

    /// Past [`UNDO_BYTES`] of kept content the oldest commands go, but the newest one is kept
    /// even when it alone is larger; a forgotten (undone) command frees its bytes.
    #[test]
    fn kept_content_stays_under_sixty_four_mib() {
        let tmp = tempfile::tempdir().unwrap();
        let tracker = ChangeTracker::start(tmp.path()).unwrap();
        let mib = 1024 * 1024;
        // 30 files of 1 MiB: 30 MiB a command.
        let big = |tag: &str| {
            Changes::for_tests(
                (0..30)
                    .map(|i| text_change(&format!("{tag}{i}"), mib))
                    .collect(),
            )
        };
        tracker.keep("a", &big("a"));
        tracker.keep("b", &big("b"));
        assert_eq!(numbers(&tracker), vec![1, 2], "60 MiB: both kept");
        tracker.keep("c", &big("c"));
        assert_eq!(numbers(&tracker), vec![2, 3], "90 MiB: the oldest went");
        tracker.forget(2);
        tracker.keep("d", &big("d"));
        assert_eq!(
            numbers(&tracker),
            vec![3, 4],
            "the undone one's bytes were freed"
        );
        let huge = Changes::for_tests(
            (0..70)
                .map(|i| text_change(&format!("h{i}"), mib))
                .collect(),
        );
        tracker.keep("huge", &huge);
        assert_eq!(
            numbers(&tracker),
            vec![5],
            "alone over the bound, the newest stays"
        );
    }
}
