//! Command classification: what a bash command does, for display only.
//!
//! Owns [`classify`]: a command that is one read (`cat f`, `head -n 40 f`, `sed -n '1,80p' f`,
//! `nl -ba f`, `bat f`), one search (`rg`, `grep`, `git grep`, `fd`, `find -name`) or one listing
//! (`ls`, `tree`, `rg --files`, `git ls-files`, `find` without a name test) is shown as that, with
//! the paths it names. `cd DIR &&` prefixes are followed and formatting stages of a pipeline
//! (`| head`, `| wc -l`, `| sort`) are dropped; anything else, or more than one action, is
//! [`None`]: the caller keeps the terminal card.
//!
//! The command is parsed by a real shell grammar (tree-sitter-bash,
//! `notes/2026-12-06-command-classification.md`), and only commands made of literal words are
//! classified: a variable, a substitution, a redirection, an unquoted glob or tilde makes the
//! answer [`None`], since what such a word becomes is known only when bash runs it. The paths
//! are those bash would open: quotes and escapes are undone as bash undoes them.
//!
//! Display only: the script is only read here, and what runs is the caller's, unchanged. Pure:
//! no file system, no processes. Must not touch: running commands, ACP.

mod commands;
mod words;

use std::path::{Component, Path, PathBuf};

/// Scripts longer than this are not classified (a read or a search is one short line; the
/// parse stays cheap whatever the model sends).
pub const MAX_CLASSIFIED_BYTES: usize = 4096;

/// What a classified command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// It reads one file.
    Read,
    /// It searches files for a pattern or names.
    Search,
    /// It lists files.
    List,
}

/// A path a classified command names, as bash would open it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Location {
    /// The absolute path (lexically normalised; never resolved on disk).
    pub path: PathBuf,
    /// The line the command names (`sed -n '80,120p' f`: 80), when it names one.
    pub line: Option<u32>,
}

/// How a classified command is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Classified {
    /// What it does.
    pub kind: CallKind,
    /// One line: `Read src/a.rs`, `Search 'foo' in src`, `List .` (paths relative to where the
    /// command runs when they are inside it; control characters escaped).
    pub title: String,
    /// The paths it reads, searches or lists.
    pub locations: Vec<Location>,
}

/// What `script`, run in `cwd` (absolute), does, when it is one read, search or listing; else
/// `None` (show it as a terminal).
pub fn classify(script: &str, cwd: &Path) -> Option<Classified> {
    if script.len() > MAX_CLASSIFIED_BYTES || !cwd.is_absolute() {
        return None;
    }
    let segments = words::parse(script)?;
    let mut dir = cwd.to_path_buf();
    let mut segments = segments.into_iter().peekable();
    // `cd DIR && …`: each leading cd moves where the rest runs.
    while let Some(segment) = segments.peek() {
        match segment.as_slice() {
            [command] if command.first().map(String::as_str) == Some("cd") => {
                let [_, target] = command.as_slice() else {
                    return None;
                };
                if target.starts_with('-') || target.is_empty() {
                    return None;
                }
                dir = normalize(&dir.join(target));
                segments.next();
            }
            _ => break,
        }
    }
    let pipeline = segments.next()?;
    if segments.next().is_some() {
        return None;
    }
    let (first, rest) = pipeline.split_first()?;
    if !rest.iter().all(commands::is_formatting) {
        return None;
    }
    let action = commands::action(first)?;
    Some(action.shown(&dir, cwd))
}

/// What one command does: the words it was given, read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    Read { path: String, line: Option<u32> },
    Search { query: String, paths: Vec<String> },
    List { paths: Vec<String> },
}

impl Action {
    /// The action as shown, its paths relative to `dir` (where it runs) made absolute and shown
    /// relative to `cwd` (where the call runs).
    fn shown(self, dir: &Path, cwd: &Path) -> Classified {
        let absolute = |path: &str| normalize(&dir.join(path));
        let at = |paths: &[String]| -> Vec<PathBuf> {
            if paths.is_empty() {
                vec![dir.to_path_buf()]
            } else {
                paths.iter().map(|p| absolute(p)).collect()
            }
        };
        let names = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| display(p, cwd))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Action::Read { path, line } => {
                let path = absolute(&path);
                Classified {
                    kind: CallKind::Read,
                    title: format!("Read {}", display(&path, cwd)),
                    locations: vec![Location { path, line }],
                }
            }
            Action::Search { query, paths } => {
                let paths = at(&paths);
                Classified {
                    kind: CallKind::Search,
                    title: format!("Search '{}' in {}", escape(&query), names(&paths)),
                    locations: paths
                        .into_iter()
                        .map(|path| Location { path, line: None })
                        .collect(),
                }
            }
            Action::List { paths } => {
                let paths = at(&paths);
                Classified {
                    kind: CallKind::List,
                    title: format!("List {}", names(&paths)),
                    locations: paths
                        .into_iter()
                        .map(|path| Location { path, line: None })
                        .collect(),
                }
            }
        }
    }
}

/// `path` without `.` and with each `..` taking off the component before it (lexically, as
/// bash's `cd` does by default; the root's parent is the root).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` for a title: `.` for `cwd` itself, relative inside it, absolute elsewhere; control
/// characters escaped, so that a title stays one line.
fn display(path: &Path, cwd: &Path) -> String {
    let shown = match path.strip_prefix(cwd) {
        Ok(rest) if rest.as_os_str().is_empty() => ".".to_string(),
        Ok(rest) => rest.to_string_lossy().into_owned(),
        Err(_) => path.to_string_lossy().into_owned(),
    };
    escape(&shown)
}

/// `text` with control characters as escapes (`\n`, `\u{1b}`): a title is one line and no
/// terminal sequence.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests;
