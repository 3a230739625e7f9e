//! Reading one path of the tracked folder safely: never through a symlink, at any component
//! (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the folder's fd, or a component walk
//! with `O_NOFOLLOW` where `openat2` is missing), never a FIFO or a device, never a torn state
//! (the file's `fstat` must be the same before and after the read).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
#[cfg(not(target_os = "linux"))]
use std::os::unix::fs::OpenOptionsExt;
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

/// Opens `rel` beneath the folder `root` without following any symlink on the way, so that a
/// command swapping a folder for a symlink between two looks cannot make the agent read
/// outside the folder: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the folder's fd,
/// or, where the kernel has no `openat2` (before 5.6), one `openat(O_NOFOLLOW)` per component.
/// With `O_PATH | O_NOFOLLOW` in `flags`, a symlink as the last component is opened itself.
#[cfg(target_os = "linux")]
fn open_beneath(root: &Path, rel: &Path, flags: i32) -> std::io::Result<std::fs::File> {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
    fn cstr(bytes: &[u8]) -> std::io::Result<CString> {
        CString::new(bytes).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
    }
    fn check(fd: libc::c_long) -> std::io::Result<OwnedFd> {
        match fd {
            -1 => Err(std::io::Error::last_os_error()),
            fd => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        }
    }
    let flags = flags | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    let root_path = cstr(root.as_os_str().as_bytes())?;
    let dir = check(unsafe {
        libc::open(
            root_path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    } as libc::c_long)?;
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let path = cstr(rel.as_os_str().as_bytes())?;
        // SAFETY: open_how is plain data; zero is a valid value of every field.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = flags as u64;
        how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        match check(fd) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
                // No openat2 (or a seccomp filter refusing it): the component walk below.
                NO_OPENAT2.store(true, Ordering::Relaxed);
            }
            other => return other.map(std::fs::File::from),
        }
    }
    open_by_components(dir, rel, flags)
}

/// [`open_beneath`] without `openat2`: each folder of `rel` opened `O_PATH | O_NOFOLLOW |
/// O_DIRECTORY` from the last (a symlink is refused, never followed), then the last component.
#[cfg(target_os = "linux")]
fn open_by_components(
    mut dir: std::os::fd::OwnedFd,
    rel: &Path,
    flags: i32,
) -> std::io::Result<std::fs::File> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Component;
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .map(|part| match part {
            Component::Normal(name) => Ok(name),
            _ => Err(std::io::Error::from_raw_os_error(libc::EXDEV)),
        })
        .collect::<std::io::Result<_>>()?;
    let Some((last, folders)) = parts.split_last() else {
        return Err(std::io::Error::from_raw_os_error(libc::ENOENT));
    };
    let at = |dir: &OwnedFd, name: &std::ffi::OsStr, flags: i32| {
        let name = std::ffi::CString::new(name.as_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        match unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) } {
            -1 => Err(std::io::Error::last_os_error()),
            fd => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        }
    };
    for folder in folders {
        dir = at(
            &dir,
            folder,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )?;
    }
    at(&dir, last, flags).map(std::fs::File::from)
}

/// Elsewhere: the last component `O_NOFOLLOW`, the folders checked to resolve inside `root`
/// just before (a window remains; change tracking is Linux-only today).
#[cfg(not(target_os = "linux"))]
fn open_beneath(root: &Path, rel: &Path, flags: i32) -> std::io::Result<std::fs::File> {
    let path = root.join(rel);
    match path.parent().map(Path::canonicalize) {
        Some(Ok(parent)) if parent.starts_with(root) => {}
        _ => return Err(std::io::Error::other("outside the folder")),
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags | libc::O_NOFOLLOW)
        .open(path)
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

    /// Without `openat2` (kernels before 5.6), the component walk refuses a symlink on the
    /// way and still opens a symlink itself as the last component.
    #[test]
    fn the_component_walk_refuses_symlinks_on_the_way() {
        use std::os::fd::{FromRawFd, OwnedFd};
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/f"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("d"), root.join("link")).unwrap();
        let dir = || {
            let path = std::ffi::CString::new(root.to_str().unwrap()).unwrap();
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_DIRECTORY) };
            unsafe { OwnedFd::from_raw_fd(fd) }
        };
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        assert!(open_by_components(dir(), Path::new("d/f"), flags).is_ok());
        let refused = open_by_components(dir(), Path::new("link/f"), flags).unwrap_err();
        assert!(
            matches!(refused.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)),
            "{refused}"
        );
        let node =
            open_by_components(dir(), Path::new("link"), libc::O_PATH | libc::O_NOFOLLOW).unwrap();
        assert!(node.metadata().unwrap().file_type().is_symlink());
        assert!(open_by_components(dir(), Path::new("../x"), flags).is_err());
    }
}
