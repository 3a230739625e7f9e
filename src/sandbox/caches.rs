//! Package caches that workspace commands get a copy-on-write layer of their session's own
//! over: writes land in the session's folder, later commands of the session see them, the
//! host's cache is never changed. Platform-neutral: the list and the lookup; the backend mounts
//! the layers (Linux: overlayfs in the command's user namespace). The list and the reason for
//! each entry are in `notes/2026-12-01-package-caches.md`.

use std::path::{Path, PathBuf};

/// Package-cache folders under the home (relative to it) that workspace commands may write
/// into through a layer of the session's own, where they exist. Not `~/.cargo` or `~/.m2` as a
/// whole (`credentials.toml`, `settings.xml`), not `~/.gradle` (`gradle.properties`), not
/// `~/.cargo/bin` or `~/.local/lib` (installed programs, not caches).
pub const PACKAGE_CACHES: [&str; 11] = [
    ".cargo/registry",
    ".cargo/git",
    ".rustup",
    ".npm",
    ".cache",
    ".local/share/pnpm",
    ".yarn/berry",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    "go/pkg/mod",
];

/// The [`PACKAGE_CACHES`] of `home` that exist now as folders: `(name, canonical path)`, the
/// name being the entry with `/` as `-` (the layer's folder name). None lies under another
/// one; paths an overlay option cannot carry (`,` `:` `\`) are left out.
pub fn package_caches(home: &Path) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    let Ok(home) = home.canonicalize() else {
        return found;
    };
    for rel in PACKAGE_CACHES {
        let Some(path) = super::masks::canonical_under(&home, Path::new(rel)) else {
            continue;
        };
        let text = path.to_string_lossy();
        if !path.is_dir() || text.contains([',', ':', '\\']) || path == Path::new("/") {
            continue;
        }
        if found
            .iter()
            .any(|(_, p)| path.starts_with(p) || p.starts_with(&path))
        {
            continue;
        }
        found.push((rel.replace('/', "-"), path));
    }
    found
}

/// Removes a session's own folder (`dir`, with its temp dir and cache layers). overlayfs leaves
/// its `work/work` folder (and a `volatile` mount's `work/incompat/volatile`) of mode 0 behind,
/// and a command may leave folders of any mode in its temp dir, which an ordinary user cannot
/// list or empty (root can): when the first try fails, every folder under `dir` is made this
/// user's to list and change (through descriptors, never through a symlink), and it tries again. Both
/// removals unlink symlinks and never follow them.
pub fn remove_session_folder(dir: &Path) -> std::io::Result<()> {
    if std::fs::remove_dir_all(dir).is_ok() {
        return Ok(());
    }
    #[cfg(unix)]
    open_up(dir);
    std::fs::remove_dir_all(dir)
}

/// `u+rwx` on `dir` and on every folder under it. Each folder is reached from its parent's
/// descriptor by name with `O_NOFOLLOW` (a symlink a command planted anywhere in the folder,
/// or swapped in for a folder meanwhile, is never followed), and its mode is changed through
/// a descriptor of the folder itself, never by path: nothing outside `dir` changes.
#[cfg(unix)]
fn open_up(dir: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return;
    };
    if let Some(folder) = open_folder(None, &path) {
        open_up_at(folder);
    }
}

#[cfg(unix)]
fn open_up_at(mut folder: nix::dir::Dir) {
    use std::os::fd::AsRawFd;
    let names: Vec<std::ffi::CString> = folder
        .iter()
        .flatten()
        .filter(|entry| {
            let name = entry.file_name().to_bytes();
            name != b"." && name != b".."
        })
        .filter(|entry| {
            // A file or a symlink needs nothing; an unknown type is looked at by `open_folder`.
            matches!(entry.file_type(), None | Some(nix::dir::Type::Directory))
        })
        .map(|entry| entry.file_name().to_owned())
        .collect();
    let fd = folder.as_raw_fd();
    for name in names {
        if let Some(child) = open_folder(Some(fd), &name) {
            open_up_at(child);
        }
    }
}

/// The folder `name` (relative to `parent`, or the working directory's), made `u+rwx` when it
/// was not, opened for listing; `None` for anything that is not a folder (a symlink included)
/// or cannot be opened.
#[cfg(unix)]
fn open_folder(parent: Option<std::os::fd::RawFd>, name: &std::ffi::CStr) -> Option<nix::dir::Dir> {
    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;
    make_ours(parent, name);
    nix::dir::Dir::openat(
        parent,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// `u+rwx` on the folder `name` where it lacks any of them, through an `O_PATH` descriptor of
/// the folder itself (`/proc/self/fd`): a symlink is never opened as a folder.
#[cfg(target_os = "linux")]
fn make_ours(parent: Option<std::os::fd::RawFd>, name: &std::ffi::CStr) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let parent = parent.unwrap_or(libc::AT_FDCWD);
    // SAFETY: openat with a valid C string; the fd is owned below.
    let fd = unsafe {
        libc::openat(
            parent,
            name.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return;
    }
    // SAFETY: a fresh fd of ours.
    let folder = unsafe { OwnedFd::from_raw_fd(fd) };
    let Ok(meta) = nix::sys::stat::fstat(folder.as_raw_fd()) else {
        return;
    };
    let mode = meta.st_mode & 0o7777;
    if mode & 0o700 == 0o700 {
        return;
    }
    let magic = format!("/proc/self/fd/{}\0", folder.as_raw_fd());
    // SAFETY: chmod of the magic link of an fd we hold (it resolves to that folder's inode).
    unsafe { libc::chmod(magic.as_ptr().cast(), (mode | 0o700) as libc::mode_t) };
}

/// `u+rwx` on the folder `name` where it lacks any of them (`AT_SYMLINK_NOFOLLOW`: a symlink's
/// own mode, never its target's).
#[cfg(all(unix, not(target_os = "linux")))]
fn make_ours(parent: Option<std::os::fd::RawFd>, name: &std::ffi::CStr) {
    use nix::sys::stat::{fstatat, SFlag};
    let parent_fd = parent.unwrap_or(libc::AT_FDCWD);
    let Ok(meta) = fstatat(parent, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) else {
        return;
    };
    let kind = SFlag::from_bits_truncate(meta.st_mode) & SFlag::S_IFMT;
    let mode = meta.st_mode & 0o7777;
    if kind != SFlag::S_IFDIR || mode & 0o700 == 0o700 {
        return;
    }
    // SAFETY: fchmodat with a valid C string.
    unsafe {
        libc::fchmodat(
            parent_fd,
            name.as_ptr(),
            (mode | 0o700) as libc::mode_t,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
}
