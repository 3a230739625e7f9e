//! Reading one path of the tracked folder safely: never through a symlink, at any component
//! (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the folder's fd, or a component walk
//! with `O_NOFOLLOW` where `openat2` is missing), never a FIFO or a device, never a torn state
//! (the file's `fstat` must be the same before and after the read).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::beneath::open_beneath;
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

/// The `lstat` of `root/rel` and its content (read when `keep` and it is a text file within
/// the bound). `None` when it does not exist (or does not resolve beneath `root` without a
/// symlink).
pub(super) fn look(root: &Path, rel: &Path, keep: bool) -> Option<(Stat, Content)> {
    #[cfg(target_os = "linux")]
    let node = open_beneath(root, rel, libc::O_PATH).ok()?;
    #[cfg(not(target_os = "linux"))]
    let node = {
        let _ = open_beneath(root, rel, libc::O_NONBLOCK);
        std::fs::File::open(root.join(rel)).ok()?
    };
    let stat = Stat::of(&node.metadata().ok()?);
    if stat.is_symlink() {
        return Some((
            stat,
            Content::Symlink {
                target: link_target(&node, root, rel),
            },
        ));
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
        match read_settled(root, rel) {
            Ok(Some((stat, bytes))) => return Some((stat, classify(bytes))),
            Ok(None) => continue,
            Err(_) => return Some((stat, Content::NotKept { size: stat.size })),
        }
    }
    Some((stat, Content::NotKept { size: stat.size }))
}

/// Where the symlink `node` (opened `O_PATH | O_NOFOLLOW`) points, as written.
fn link_target(node: &std::fs::File, root: &Path, rel: &Path) -> PathBuf {
    #[cfg(target_os = "linux")]
    {
        let _ = (root, rel);
        use std::os::fd::AsRawFd;
        use std::os::unix::ffi::OsStringExt;
        let mut buffer = vec![0u8; libc::PATH_MAX as usize];
        let read = unsafe {
            libc::readlinkat(
                node.as_raw_fd(),
                c"".as_ptr(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
            )
        };
        if read < 0 {
            return PathBuf::new();
        }
        buffer.truncate(read as usize);
        PathBuf::from(std::ffi::OsString::from_vec(buffer))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = node;
        std::fs::read_link(root.join(rel)).unwrap_or_default()
    }
}

/// The bytes of the file `root/rel` and its `fstat`, when the `fstat` was the same before and
/// after the read (`None`: it changed meanwhile).
fn read_settled(root: &Path, rel: &Path) -> std::io::Result<Option<(Stat, Vec<u8>)>> {
    let mut file = open_beneath(
        root,
        rel,
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
    )?;
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// A command swaps a folder for a symlink to elsewhere (`renameat2(RENAME_EXCHANGE)`, as
    /// fast as it can) while the agent looks at a file in it: the agent never reads the file
    /// elsewhere, through the symlink, at any moment; it reads the folder's own file or
    /// nothing. (Planted: the old check-then-open read the outside file within a few thousand
    /// looks.)
    #[test]
    fn a_folder_swapped_for_a_symlink_while_it_is_read_never_leads_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("work");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("d/f"), "inside\n").unwrap();
        std::fs::write(outside.join("f"), "OUTSIDE SECRET\n").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("swap")).unwrap();
        let root = root.canonicalize().unwrap();
        // A static symlink on the way is refused too.
        assert_eq!(look(&root, Path::new("swap/f"), true), None);
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            let (d, swap) = (root.join("d"), root.join("swap"));
            std::thread::spawn(move || {
                use std::os::unix::ffi::OsStrExt;
                let d = std::ffi::CString::new(d.as_os_str().as_bytes()).unwrap();
                let swap = std::ffi::CString::new(swap.as_os_str().as_bytes()).unwrap();
                let mut swaps = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let done = unsafe {
                        libc::renameat2(
                            libc::AT_FDCWD,
                            d.as_ptr(),
                            libc::AT_FDCWD,
                            swap.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    };
                    if done != 0 {
                        break;
                    }
                    swaps += 1;
                }
                swaps
            })
        };
        let (mut inside, mut refused) = (0, 0);
        for _ in 0..20_000 {
            match look(&root, Path::new("d/f"), true) {
                Some((_, Content::Text(text))) => {
                    assert_eq!(text, "inside\n", "read through the swapped-in symlink");
                    inside += 1;
                }
                // Gone before it could be read (the file's own size: not the outside one).
                Some((stat, Content::NotKept { size: 7 })) if stat.size == 7 => refused += 1,
                None => refused += 1,
                Some(other) => panic!("{other:?}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert!(swaps > 1_000, "the swap raced the looks ({swaps} swaps)");
        assert!(
            inside > 0 && refused > 0,
            "{inside} read, {refused} refused"
        );
    }
}
