//! Undo: putting back what one kept command changed, when every file it changed is still as the
//! command left it; otherwise nothing is touched and the conflicting files are named.

use std::path::{Path, PathBuf};

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

/// Puts `content` at `root/rel` (removes it for [`Content::Absent`]), never through a symlink
/// and never outside `root`.
fn put(root: &Path, rel: &Path, content: &Content) -> std::io::Result<()> {
    let path = root.join(rel);
    let parent = path.parent().unwrap_or(root);
    if let Content::Absent = content {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        };
    }
    std::fs::create_dir_all(parent)?;
    if !parent.canonicalize()?.starts_with(root) {
        return Err(std::io::Error::other("outside the session folder"));
    }
    let _ = std::fs::remove_file(&path);
    match content {
        Content::Text(text) => {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)?;
            file.write_all(text.as_bytes())
        }
        Content::Symlink { target } => std::os::unix::fs::symlink(target, &path),
        _ => Err(std::io::Error::other("not restorable")),
    }
}

impl ChangeTracker {
    /// Reverts the kept command `which`: checks every file it changed is as it left it (and
    /// that no later kept command changed it), then puts each back; returns what the revert
    /// changed (for its own diff card). Nothing is written when it refuses.
    pub fn undo(&self, which: &Which) -> Result<(Recorded, Changes), UndoError> {
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
        let mut failed = Vec::new();
        for file in &record.changes.files {
            let result = match &file.kind {
                ChangeKind::Renamed { from } => put(&root, &file.path, &Content::Absent)
                    .and_then(|()| put(&root, from, &file.old)),
                _ => put(&root, &file.path, &file.old),
            };
            if let Err(error) = result {
                failed.push((file.path.clone(), error.to_string()));
            }
        }
        let reverted = self.finish();
        self.forget(record.number);
        if !failed.is_empty() {
            tracing::warn!(?failed, "some files could not be put back");
        }
        Ok((record, reverted))
    }
}
