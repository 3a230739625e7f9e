//! What a command's file changes look like: the edit card's files (old and new text, or a name
//! with sizes), its title, the unified ```` ```diff ```` block for plain clients, the Git-style
//! patch (absolute paths) for ACP v2, and the one line the model reads. Pure, over
//! [`crate::changes::Changes`]; diffs by the `similar` crate. Must not touch: ACP, tracking.

use std::path::{Path, PathBuf};
use std::time::Duration;

use similar::{ChangeTag, TextDiff};

use crate::changes::{ChangeKind, Changes, Content};

/// The most bytes of the ```` ```diff ```` block (and of the v2 patch); the rest is counted.
pub const MAX_DIFF_BLOCK_BYTES: usize = 24 * 1024;
/// The most files the model's summary line names; the rest are counted.
pub const SUMMARY_FILES: usize = 10;

/// What happened to a file, as a client shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FileOp {
    /// New.
    Add,
    /// Gone.
    Delete,
    /// Changed in place.
    Modify,
    /// Moved (from [`FileView::old_path`]).
    Move,
}

/// What kind of file it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FileType {
    /// Text, diffed.
    Text,
    /// Binary, or over 1 MiB: named with sizes.
    Binary,
    /// A symbolic link: named with its target.
    Symlink,
    /// Anything else, or not known.
    Other,
}

/// One changed file, as shown.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct FileView {
    /// Its absolute path (as UTF-8: bytes that are not are replaced).
    pub path: PathBuf,
    /// Where it was, for a move.
    pub old_path: Option<PathBuf>,
    /// Its path relative to the session folder, printable (control characters escaped).
    pub name: String,
    /// What happened.
    pub op: FileOp,
    /// What kind of file.
    pub file_type: FileType,
    /// The old text when it is shown as a diff (`None`: a new file, or not diffable).
    pub old_text: Option<String>,
    /// The new text when it is shown as a diff (`None`: not diffable; a deleted file has `""`).
    pub new_text: Option<String>,
    /// Lines added and removed (text files).
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
    /// Why it is not diffed, with sizes (`binary, 10 B → 12 B`), when it is not.
    pub note: Option<String>,
}

impl FileView {
    /// Whether it is shown as a diff (old and new text).
    pub fn diffed(&self) -> bool {
        self.new_text.is_some()
    }
}

/// A command's changes, as shown: the edit card, the diff block, the model's line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ChangeView {
    /// `Changed 3 files` (or, for an undo, `Reverted 3 files`).
    pub title: String,
    /// The files one by one.
    pub files: Vec<FileView>,
    /// What is counted rather than itemised (`target/: 1234 files (ignored by .gitignore)`).
    pub counted: Vec<String>,
    /// The line the model reads after the command's result (`[changed: a.rs +3 −1, b new]`).
    pub summary: String,
    /// A unified diff of the text files, relative paths, bounded ([`MAX_DIFF_BLOCK_BYTES`]).
    pub unified: String,
    /// The same as a Git patch with absolute paths (ACP v2's `patch`), bounded.
    pub patch: String,
}

impl ChangeView {
    /// This view as a session's history keeps it: whole when its texts (the files' old and new
    /// texts, the unified diff and the patch) come to at most `max` bytes; else each file named
    /// with what happened to it, without its texts.
    pub fn for_history(&self, max: usize) -> ChangeView {
        let texts: usize = self
            .files
            .iter()
            .map(|f| {
                f.old_text.as_ref().map_or(0, String::len)
                    + f.new_text.as_ref().map_or(0, String::len)
            })
            .sum::<usize>()
            + self.unified.len()
            + self.patch.len();
        if texts <= max {
            return self.clone();
        }
        let mut kept = self.clone();
        for file in &mut kept.files {
            if file.diffed() {
                file.note = Some(format!(
                    "(text, +{} −{}; the diff is not kept in the session's history)",
                    file.added, file.removed
                ));
            }
            file.old_text = None;
            file.new_text = None;
        }
        kept.unified.clear();
        kept.patch.clear();
        kept
    }

    /// The unified diff in a ```` ```diff ```` fence that no line of it can close.
    pub fn diff_block(&self) -> String {
        let mut text = String::new();
        for line in self.notes() {
            text.push_str(&line);
            text.push('\n');
        }
        text.push_str(&self.unified);
        let fence = "`".repeat(longest_backtick_run(&text).max(2) + 1);
        let newline = if text.ends_with('\n') { "" } else { "\n" };
        format!("{fence}diff\n{text}{newline}{fence}")
    }

    /// One line per file that is not diffed and per counted folder.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .files
            .iter()
            .filter(|f| !f.diffed())
            .map(|f| format!("# {} {}", f.name, f.note.as_deref().unwrap_or("")))
            .collect();
        notes.extend(self.counted.iter().map(|c| format!("# {c}")));
        notes
    }
}

fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// `rel` printable on one line: lossy UTF-8, control characters as escapes (`\n`, `\x1b`).
pub fn printable(rel: &Path) -> String {
    let lossy = rel.to_string_lossy();
    let mut out = String::with_capacity(lossy.len());
    for c in lossy.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A size in words: `12 B`, `3.4 KiB`, `2.0 MiB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    }
}

fn side(content: &Content) -> String {
    match content {
        Content::Absent => "none".to_string(),
        Content::Text(text) => size(text.len() as u64),
        Content::Binary { size: s } | Content::Large { size: s } | Content::NotKept { size: s } => {
            size(*s)
        }
        Content::Symlink { target } => format!("→ {}", printable(target)),
        Content::Special => "special file".to_string(),
    }
}

fn file_type(content: &Content) -> FileType {
    match content {
        Content::Text(_) => FileType::Text,
        Content::Binary { .. } | Content::Large { .. } => FileType::Binary,
        Content::Symlink { .. } => FileType::Symlink,
        _ => FileType::Other,
    }
}

fn text_diff<'a>(old: &'a str, new: &'a str) -> TextDiff<'a, 'a, 'a, str> {
    similar::TextDiff::configure()
        .timeout(Duration::from_millis(200))
        .diff_lines(old, new)
}

/// How `changes` look; `verb` is `Changed` (a command) or `Reverted` (an undo).
pub fn present_changes(changes: &Changes, verb: &str) -> ChangeView {
    let mut files = Vec::new();
    let mut unified = String::new();
    let mut patch = String::new();
    let mut left_out = 0usize;
    for change in &changes.files {
        let name = printable(&change.path);
        let path = PathBuf::from(change.absolute.to_string_lossy().into_owned());
        let (op, old_path) = match &change.kind {
            ChangeKind::Created => (FileOp::Add, None),
            ChangeKind::Deleted => (FileOp::Delete, None),
            ChangeKind::Modified => (FileOp::Modify, None),
            ChangeKind::Renamed { from } => {
                let root = strip_suffix(&change.absolute, &change.path);
                (
                    FileOp::Move,
                    Some(PathBuf::from(
                        root.join(from).to_string_lossy().into_owned(),
                    )),
                )
            }
        };
        let shown_type = match op {
            FileOp::Delete => file_type(&change.old),
            _ => file_type(&change.new),
        };
        let texts = match (&change.old, &change.new) {
            (Content::Absent, Content::Text(new)) => Some((None, new.as_str())),
            (Content::Text(old), Content::Absent) => Some((Some(old.as_str()), "")),
            (Content::Text(old), Content::Text(new)) => Some((Some(old.as_str()), new.as_str())),
            _ => None,
        };
        let mut view = FileView {
            path: path.clone(),
            old_path: old_path.clone(),
            name: name.clone(),
            op,
            file_type: shown_type,
            old_text: None,
            new_text: None,
            added: 0,
            removed: 0,
            note: None,
        };
        match texts {
            Some((old, new)) => {
                let diff = text_diff(old.unwrap_or(""), new);
                for op in diff.iter_all_changes() {
                    match op.tag() {
                        ChangeTag::Insert => view.added += 1,
                        ChangeTag::Delete => view.removed += 1,
                        ChangeTag::Equal => {}
                    }
                }
                let old_name = match (&op, &change.kind) {
                    (FileOp::Add, _) => "/dev/null".to_string(),
                    (_, ChangeKind::Renamed { from }) => format!("a/{}", printable(from)),
                    _ => format!("a/{name}"),
                };
                let new_name = match op {
                    FileOp::Delete => "/dev/null".to_string(),
                    _ => format!("b/{name}"),
                };
                let hunk = diff
                    .unified_diff()
                    .context_radius(3)
                    .header(&old_name, &new_name)
                    .to_string();
                let abs = printable(&path);
                let old_abs = match (&op, &old_path) {
                    (FileOp::Add, _) => "/dev/null".to_string(),
                    (_, Some(from)) => printable(from),
                    _ => abs.clone(),
                };
                let new_abs = if op == FileOp::Delete {
                    "/dev/null".to_string()
                } else {
                    abs.clone()
                };
                let git = format!(
                    "diff --git {} {}\n{}",
                    old_path.as_deref().map(printable).unwrap_or(abs.clone()),
                    abs,
                    diff.unified_diff()
                        .context_radius(3)
                        .header(&old_abs, &new_abs)
                );
                if unified.len() + hunk.len() <= MAX_DIFF_BLOCK_BYTES {
                    unified.push_str(&hunk);
                    patch.push_str(&git);
                } else {
                    left_out += 1;
                }
                view.old_text = old.map(str::to_string);
                view.new_text = Some(new.to_string());
            }
            None => {
                let what = match shown_type {
                    FileType::Binary
                        if matches!(change.new, Content::Large { .. })
                            || matches!(change.old, Content::Large { .. }) =>
                    {
                        "over 1 MiB"
                    }
                    FileType::Binary => "binary",
                    FileType::Symlink => "symlink, not followed",
                    _ => "not diffed",
                };
                view.note = Some(format!(
                    "({what}, {} → {})",
                    side(&change.old),
                    side(&change.new)
                ));
            }
        }
        files.push(view);
    }
    if left_out > 0 {
        unified.push_str(&format!(
            "# … the diffs of {left_out} more file(s) are left out of this block\n"
        ));
    }
    let counted: Vec<String> = changes
        .counted
        .iter()
        .map(|(folder, n)| {
            format!(
                "{}/: {n} file(s) changed, counted not itemised",
                printable(folder)
            )
        })
        .chain(
            changes
                .overflowed
                .then(|| "more changed than could be followed one by one".to_string()),
        )
        .collect();
    let total = changes.count();
    let title = format!("{verb} {total} file{}", if total == 1 { "" } else { "s" });
    let summary = summary_line(&files, &counted, verb);
    ChangeView {
        title,
        files,
        counted,
        summary,
        unified,
        patch,
    }
}

fn strip_suffix(absolute: &Path, rel: &Path) -> PathBuf {
    let mut root = absolute.to_path_buf();
    for _ in rel.components() {
        root.pop();
    }
    root
}

fn summary_line(files: &[FileView], counted: &[String], verb: &str) -> String {
    let mut parts: Vec<String> = files
        .iter()
        .take(SUMMARY_FILES)
        .map(|f| {
            let what = match (f.op, f.diffed()) {
                (FileOp::Add, _) => "new".to_string(),
                (FileOp::Delete, _) => "deleted".to_string(),
                (FileOp::Move, _) => format!(
                    "moved from {}",
                    f.old_path.as_deref().map(printable).unwrap_or_default()
                ),
                (FileOp::Modify, true) => format!("+{} −{}", f.added, f.removed),
                (FileOp::Modify, false) => f.note.clone().unwrap_or_default(),
            };
            format!("{} {what}", f.name)
        })
        .collect();
    if files.len() > SUMMARY_FILES {
        parts.push(format!("and {} more", files.len() - SUMMARY_FILES));
    }
    parts.extend(counted.iter().cloned());
    format!("[{}: {}]", verb.to_lowercase(), parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::FileChange;

    fn change(path: &str, kind: ChangeKind, old: Content, new: Content) -> FileChange {
        let mut c = FileChange::for_tests(path, kind);
        c.old = old;
        c.new = new;
        c
    }

    #[test]
    fn the_summary_names_each_file_with_its_lines() {
        let changes = Changes::for_tests(vec![
            change(
                "src/a.rs",
                ChangeKind::Modified,
                Content::Text("a\nb\nc\n".into()),
                Content::Text("a\nB\nc\nd\ne\n".into()),
            ),
            change(
                "b.txt",
                ChangeKind::Created,
                Content::Absent,
                Content::Text("x\n".into()),
            ),
            change(
                "c.txt",
                ChangeKind::Deleted,
                Content::Text("y\n".into()),
                Content::Absent,
            ),
        ]);
        let view = present_changes(&changes, "Changed");
        assert_eq!(view.title, "Changed 3 files");
        assert_eq!(
            view.summary,
            "[changed: src/a.rs +3 −1, b.txt new, c.txt deleted]"
        );
        assert!(
            view.unified.contains("--- a/src/a.rs\n+++ b/src/a.rs\n"),
            "{}",
            view.unified
        );
        assert!(view.unified.contains("--- /dev/null\n+++ b/b.txt\n"));
        assert!(view
            .patch
            .contains("diff --git /w/src/a.rs /w/src/a.rs\n--- /w/src/a.rs\n"));
        assert_eq!(view.files[1].old_text, None);
        assert_eq!(view.files[2].new_text.as_deref(), Some(""));
    }

    #[test]
    fn binaries_and_large_files_are_named_with_sizes() {
        let changes = Changes::for_tests(vec![
            change(
                "a.bin",
                ChangeKind::Modified,
                Content::Binary { size: 10 },
                Content::Binary { size: 2048 },
            ),
            change(
                "big.log",
                ChangeKind::Created,
                Content::Absent,
                Content::Large { size: 3 << 20 },
            ),
        ]);
        let view = present_changes(&changes, "Changed");
        assert_eq!(
            view.files[0].note.as_deref(),
            Some("(binary, 10 B → 2.0 KiB)")
        );
        assert_eq!(
            view.files[1].note.as_deref(),
            Some("(over 1 MiB, none → 3.0 MiB)")
        );
        assert!(!view.files[0].diffed());
        assert!(view.unified.is_empty());
    }

    #[test]
    fn hostile_names_stay_on_one_line_and_the_fence_holds() {
        assert_eq!(
            printable(Path::new("a\nb\u{1b}[31m`c`")),
            "a\\nb\\x1b[31m`c`"
        );
        let changes = Changes::for_tests(vec![change(
            "f",
            ChangeKind::Created,
            Content::Absent,
            Content::Text("```\n````\n".into()),
        )]);
        let block = present_changes(&changes, "Changed").diff_block();
        assert!(block.starts_with("`````diff\n"), "{block}");
        assert!(block.ends_with("\n`````"));
    }

    #[test]
    fn the_diff_block_is_bounded() {
        let files = (0..100)
            .map(|i| {
                change(
                    &format!("f{i}"),
                    ChangeKind::Created,
                    Content::Absent,
                    Content::Text("line\n".repeat(200)),
                )
            })
            .collect();
        let view = present_changes(&Changes::for_tests(files), "Changed");
        assert!(view.unified.len() <= MAX_DIFF_BLOCK_BYTES + 100);
        assert!(view.unified.contains("more file(s) are left out"));
        assert!(view.summary.ends_with("and 90 more]"), "{}", view.summary);
    }
}
