//! Reading one path of the tracked folder safely: never through a symlink (the last component
//! is opened `O_NOFOLLOW`, and the parent must still resolve inside the folder), never a FIFO or
//! a device, never a torn state (the file's `fstat` must be the same before and after the read).

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::MAX_DIFF_BYTES;

/// A file's content on one side of a change, as far as it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// The file does not exist (the old side of a new file, the new side of a deleted one).
    Absent,
    /// A text file of at most [`MAX_DIFF_BYTES`].
    Text(String),
    /// A file that is not UTF-8 text: named with its size.
    Binary {
        /// Its size in bytes.
        size: u64,
    },
    /// A file larger than [`MAX_DIFF_BYTES`]: named with its size.
    Large {
        /// Its size in bytes.
        size: u64,
    },
    /// A symbolic link: named with its target, never followed.
    Symlink {
        /// Where it points, as written.
        target: PathBuf,
    },
    /// A file whose earlier content was not kept (past the baseline's bound, or it changed
    /// while being read).
    NotKept {
        /// Its size in bytes.
        size: u64,
    },
    /// A directory, FIFO, socket or device: named only.
    Special,
}

impl Content {
    /// The size in bytes, where known.
    pub fn size(&self) -> Option<u64> {
        match self {
            Content::Text(text) => Some(text.len() as u64),
            Content::Binary { size } | Content::Large { size } | Content::NotKept { size } => {
                Some(*size)
            }
            _ => None,
        }
    }
}

/// What `lstat` said of a path: enough to tell whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub mode: u32,
    /// The file's type (from the mode's `S_IFMT` bits, whose width differs between platforms).
    pub kind: std::fs::FileType,
}

impl Stat {
    pub fn of(meta: &std::fs::Metadata) -> Stat {
        Stat {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            mode: meta.mode(),
            kind: meta.file_type(),
        }
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn is_dir(&self) -> bool {
        self.kind.is_dir()
    }

    pub fn is_file(&self) -> bool {
        self.kind.is_file()
    }

    pub fn is_symlink(&self) -> bool {
        self.kind.is_symlink()
    }
}

/// Whether `path`'s parent still resolves inside `root` (a command may have swapped a folder
/// for a symlink to elsewhere).
fn parent_inside(root: &Path, path: &Path) -> bool {
    match path.parent().map(Path::canonicalize) {
        Some(Ok(parent)) => parent.starts_with(root),
        _ => false,
    }
}

/// The `lstat` of `root/rel` and its content (read when `keep` and it is a text file within
/// the bound). `None` when it does not exist (or no longer resolves inside `root`).
pub(super) fn look(root: &Path, rel: &Path, keep: bool) -> Option<(Stat, Content)> {
    let path = root.join(rel);
    if !parent_inside(root, &path) {
        return None;
    }
    let meta = std::fs::symlink_metadata(&path).ok()?;
    let stat = Stat::of(&meta);
    if stat.is_symlink() {
        let target = std::fs::read_link(&path).unwrap_or_default();
        return Some((stat, Content::Symlink { target }));
    }
    if !stat.is_file() {
        return Some((stat, Content::Special));
    }
    if stat.size > MAX_DIFF_BYTES {
        return Some((stat, Content::Large { size: stat.size }));
    }
    if !keep {
        return Some((stat, Content::NotKept { size: stat.size }));
    }
    // A file that keeps changing while it is read is shown by its size: never a torn mix.
    for _ in 0..3 {
        match read_settled(&path) {
            Ok(Some((stat, bytes))) => return Some((stat, classify(bytes))),
            Ok(None) => continue,
            Err(_) => return Some((stat, Content::NotKept { size: stat.size })),
        }
    }
    Some((stat, Content::NotKept { size: stat.size }))
}

/// The bytes of the file at `path` and its `fstat`, when the `fstat` was the same before and
/// after the read (`None`: it changed meanwhile).
fn read_settled(path: &Path) -> std::io::Result<Option<(Stat, Vec<u8>)>> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let before = Stat::of(&file.metadata()?);
    if !before.is_file() || before.size > MAX_DIFF_BYTES {
        return Err(std::io::Error::other("not a small regular file"));
    }
    let mut bytes = Vec::with_capacity(before.size as usize);
    (&mut file)
        .take(MAX_DIFF_BYTES + 1)
        .read_to_end(&mut bytes)?;
    let after = Stat::of(&file.metadata()?);
    if before != after || bytes.len() as u64 != after.size {
        return Ok(None);
    }
    Ok(Some((after, bytes)))
}

/// Text when it is UTF-8 without NUL bytes; else binary.
fn classify(bytes: Vec<u8>) -> Content {
    let size = bytes.len() as u64;
    if memchr::memchr(0, &bytes).is_some() {
        return Content::Binary { size };
    }
    match String::from_utf8(bytes) {
        Ok(text) => Content::Text(text),
        Err(_) => Content::Binary { size },
    }
}
