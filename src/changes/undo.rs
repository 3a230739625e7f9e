//! Undo: putting back what one kept command changed, when every file it changed is still as the
//! command left it; otherwise nothing is touched and the conflicting files are named.

use std::path::{Path, PathBuf};

use super::beneath::{folder_of, Folder};
use super::read::{look, Content};
use super::{ChangeKind, ChangeTracker, Changes, Recorded};

/// Which kept command to undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Which {
    /// The `n`th most recent (1: the last).
    Back(usize),
    /// The command of this tool call.
    Call(String),
}

/// Why an undo did nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UndoError {
    /// No kept command matches (none kept, or past the bound).
    Nothing(String),
    /// These files changed since (relative paths, with why), or their earlier content was not
    /// kept: nothing was reverted.
    Conflict(Vec<(PathBuf, String)>),
}

fn state_is(root: &Path, rel: &Path, want: &Content) -> Result<(), String> {
    let now = look(root, rel, true).map(|(_, content)| content);
    let same = match (want, &now) {
        (Content::Absent, None) => true,
        (Content::Text(a), Some(Content::Text(b))) => a == b,
        (Content::Symlink { target: a }, Some(Content::Symlink { target: b })) => a == b,
        _ => false,
    };
    match same {
        true => Ok(()),
        false => Err(match now {
            None => "deleted since".to_string(),
            Some(_) => "changed since".to_string(),
        }),
    }
}

fn restorable(content: &Content) -> bool {
    matches!(
        content,
        Content::Absent | Content::Text(_) | Content::Symlink { .. }
    )
}

/// One write of an undo, its folder already opened beneath the tracked folder.
struct Put<'a> {
    rel: &'a Path,
    folder: Folder,
    content: &'a Content,
    mode: Option<u32>,
}

impl Put<'_> {
    /// Puts the content at the path ([`Content::Absent`]: removes it), through the folder
    /// held: never through a symlink, never outside the tracked folder.
    fn run(&self) -> std::io::Result<()> {
        match self.content {
            Content::Absent => self.folder.remove(),
            Content::Text(text) => self.folder.write_file(text.as_bytes(), self.mode),
            Content::Symlink { target } => self.folder.write_symlink(target),
            _ => Err(std::io::Error::other("its earlier content was not kept")),
        }
    }
}

/// What an undo did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Undone {
    /// The command whose changes were put back (no longer kept).
    pub record: Recorded,
    /// What the revert changed (for its own diff card).
    pub reverted: Changes,
    /// The files that could not be put back, with why (empty when all were).
    pub failed: Vec<(PathBuf, String)>,
}

/// Why a folder on a file's way could not be opened, for the user.
fn unreachable_folder(error: &std::io::Error) -> String {
    match error.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) | Some(libc::EXDEV) => format!(
            "a folder on its way is now a symlink or a file ({error}); acp-bash never writes \
             through one"
        ),
        _ => format!("its folder could not be opened ({error})"),
    }
}

impl ChangeTracker {
    /// Reverts the kept command `which`: checks every file it changed is as it left it (and
    /// that no later kept command changed it), opens each file's folder beneath the tracked
    /// folder (never through a symlink), then puts each back through the folder it holds.
    /// Nothing is written when it refuses; a write that fails after that is named in
    /// [`Undone::failed`].
    pub fn undo(&self, which: &Which) -> Result<Undone, UndoError> {
        // What changed since the last command (an editor, a job) is looked at as it is now.
        self.begin();
        let kept = self.kept();
        let at = match which {
            Which::Back(n) if *n >= 1 && *n <= kept.len() => Some(kept.len() - n),
            Which::Call(id) => kept.iter().position(|r| &r.call_id == id),
            _ => None,
        };
        let Some(at) = at else {
            return Err(UndoError::Nothing(match kept.len() {
                0 => "no command's changes are kept to undo".to_string(),
                n => format!("only the last {n} commands' changes are kept"),
            }));
        };
        let record = kept[at].clone();
        let root = self.root().to_path_buf();
        let mut conflicts = Vec::new();
        for file in &record.changes.files {
            let later = kept[at + 1..].iter().any(|r| {
                r.changes.files.iter().any(|f| {
                    f.path == file.path
                        || matches!(&f.kind, ChangeKind::Renamed { from } if *from == file.path)
                })
            });
            if later {
                conflicts.push((file.path.clone(), "changed by a later command".to_string()));
                continue;
            }
            if let Err(why) = state_is(&root, &file.path, &file.new) {
                conflicts.push((file.path.clone(), why));
                continue;
            }
            if !restorable(&file.old) {
                conflicts.push((
                    file.path.clone(),
                    "its earlier content was not kept (binary, over 1 MiB, or past the bound)"
                        .to_string(),
                ));
            }
            if let ChangeKind::Renamed { from } = &file.kind {
                if let Err(why) = state_is(&root, from, &Content::Absent) {
                    conflicts.push((from.clone(), why));
                }
            }
        }
        if !record.changes.counted.is_empty() || record.changes.overflowed {
            conflicts.push((
                PathBuf::from("."),
                "the command changed more files than are kept one by one".to_string(),
            ));
        }
        if !conflicts.is_empty() {
            return Err(UndoError::Conflict(conflicts));
        }
        // Every folder is opened before anything is written: a folder swapped for a symlink
        // refuses the whole undo, and one swapped after its open no longer matters.
        let mut steps: Vec<(&Path, &Content, Option<u32>)> = Vec::new();
        for file in &record.changes.files {
            match &file.kind {
                ChangeKind::Renamed { from } => {
                    steps.push((&file.path, &Content::Absent, None));
                    steps.push((from, &file.old, file.old_mode));
                }
                _ => steps.push((&file.path, &file.old, file.old_mode)),
            }
        }
        let mut puts = Vec::new();
        for (rel, content, mode) in steps {
            match folder_of(&root, rel) {
                Ok(folder) => puts.push(Put {
                    rel,
                    folder,
                    content,
                    mode,
                }),
                Err(error) => conflicts.push((rel.to_path_buf(), unreachable_folder(&error))),
            }
        }
        if !conflicts.is_empty() {
            return Err(UndoError::Conflict(conflicts));
        }
        let mut failed = Vec::new();
        for put in &puts {
            if let Err(error) = put.run() {
                failed.push((put.rel.to_path_buf(), error.to_string()));
            }
        }
        drop(puts);
        let reverted = self.finish();
        self.forget(record.number);
        if !failed.is_empty() {
            tracing::warn!(?failed, "some files could not be put back");
        }
        Ok(Undone {
            record,
            reverted,
            failed,
        })
    }
}
