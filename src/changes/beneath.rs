//! Paths beneath the tracked folder, opened, created, replaced and removed without ever
//! following a symlink, at any component, so that a command (or a `/bg` job) swapping a folder
//! for a symlink at any moment cannot make the agent, which runs unsandboxed, read or write
//! outside the folder.
//!
//! Reads: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the folder's fd, or, where the
//! kernel has no `openat2` (before 5.6, or a seccomp filter refusing it), one
//! `openat(O_NOFOLLOW)` per component. Writes (`/undo`): the file's folder is opened the same
//! way and held; every write is then `openat`/`renameat`/`unlinkat`/`symlinkat` relative to
//! that fd, so a swap after the open changes nothing about where the write lands. A file is
//! replaced whole: its new content goes to a temporary file in the same folder, synced, then
//! renamed over it (a crash leaves the old file or the new one, never half of one).

#[cfg(target_os = "linux")]
pub(super) use linux::*;
#[cfg(not(target_os = "linux"))]
pub(super) use other::*;

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::{CString, OsStr, OsString};
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Component, Path, PathBuf};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    /// Set once `openat2` was refused (`ENOSYS`, or `EPERM` from a seccomp filter).
    static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
    /// A folder, opened only to be looked up from, never through a symlink.
    const FOLDER: i32 = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

    fn os_error(code: i32) -> std::io::Error {
        std::io::Error::from_raw_os_error(code)
    }

    fn cstr(bytes: &[u8]) -> std::io::Result<CString> {
        CString::new(bytes).map_err(|_| os_error(libc::EINVAL))
    }

    fn owned(fd: libc::c_long) -> std::io::Result<OwnedFd> {
        match fd {
            -1 => Err(std::io::Error::last_os_error()),
            // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
            fd => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        }
    }

    fn done(result: libc::c_int) -> std::io::Result<()> {
        match result {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        }
    }

    /// The tracked folder itself (its path is canonical: no symlink on the way; the last
    /// component is not followed either).
    fn open_root(root: &Path) -> std::io::Result<OwnedFd> {
        let path = cstr(root.as_os_str().as_bytes())?;
        owned(unsafe { libc::open(path.as_ptr(), FOLDER) } as libc::c_long)
    }

    /// `openat2(dir, rel, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`; `None` where the
    /// kernel has no `openat2` (the caller walks the components instead).
    fn openat2_beneath(dir: &OwnedFd, rel: &Path, flags: i32) -> Option<std::io::Result<OwnedFd>> {
        if NO_OPENAT2.load(Ordering::Relaxed) {
            return None;
        }
        let path = match cstr(rel.as_os_str().as_bytes()) {
            Ok(path) => path,
            Err(e) => return Some(Err(e)),
        };
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
        match owned(fd) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
                NO_OPENAT2.store(true, Ordering::Relaxed);
                None
            }
            other => Some(other),
        }
    }

    /// The components of `rel`, each a plain name (`..`, `/` and `.` are refused: `EXDEV`).
    fn names(rel: &Path) -> std::io::Result<Vec<&OsStr>> {
        rel.components()
            .map(|part| match part {
                Component::Normal(name) => Ok(name),
                _ => Err(os_error(libc::EXDEV)),
            })
            .collect()
    }

    /// `openat(dir, name, flags)`.
    fn at(dir: &OwnedFd, name: &OsStr, flags: i32) -> std::io::Result<OwnedFd> {
        let name = cstr(name.as_bytes())?;
        owned(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) } as libc::c_long)
    }

    /// Opens each of `folders` from `dir` in turn, `O_NOFOLLOW | O_DIRECTORY` (a symlink or a
    /// file on the way is refused, never followed); stops at the first that does not exist.
    /// Returns the last folder opened and how many of `folders` were.
    fn walk(mut dir: OwnedFd, folders: &[&OsStr]) -> std::io::Result<(OwnedFd, usize)> {
        for (opened, folder) in folders.iter().enumerate() {
            match at(&dir, folder, FOLDER) {
                Ok(next) => dir = next,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok((dir, opened)),
                Err(e) => return Err(e),
            }
        }
        Ok((dir, folders.len()))
    }

    /// Opens `rel` beneath the folder `root` without following any symlink on the way (see
    /// the module docs). With `O_PATH` in `flags`, a symlink as the last component is opened
    /// itself.
    pub(in crate::changes) fn open_beneath(
        root: &Path,
        rel: &Path,
        flags: i32,
    ) -> std::io::Result<std::fs::File> {
        let flags = flags | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        let dir = open_root(root)?;
        if let Some(opened) = openat2_beneath(&dir, rel, flags) {
            return opened.map(std::fs::File::from);
        }
        open_by_components(dir, rel, flags)
    }

    /// [`open_beneath`] without `openat2`: the folders of `rel` walked from `dir`, then the
    /// last component.
    pub(in crate::changes) fn open_by_components(
        dir: OwnedFd,
        rel: &Path,
        flags: i32,
    ) -> std::io::Result<std::fs::File> {
        let names = names(rel)?;
        let Some((last, folders)) = names.split_last() else {
            return Err(os_error(libc::ENOENT));
        };
        let (dir, opened) = walk(dir, folders)?;
        if opened < folders.len() {
            return Err(os_error(libc::ENOENT));
        }
        at(&dir, last, flags).map(std::fs::File::from)
    }

    /// The folder of one path beneath the tracked folder, opened (not through a symlink) and
    /// held: every write to the path goes through it. The folders missing on the way are made
    /// only when a file is written there.
    #[derive(Debug)]
    pub(in crate::changes) struct Folder {
        /// The deepest folder of the path that exists.
        fd: OwnedFd,
        /// The folders under it still to make, in order.
        missing: Vec<OsString>,
        /// The file's name in its folder.
        name: OsString,
    }

    /// Opens the folder of `rel` beneath `root` (see [`Folder`]). Fails when a component on
    /// the way is a symlink or not a folder (`ELOOP`, `ENOTDIR`, `EXDEV`).
    pub(in crate::changes) fn folder_of(root: &Path, rel: &Path) -> std::io::Result<Folder> {
        let names = names(rel)?;
        let Some((name, folders)) = names.split_last() else {
            return Err(os_error(libc::EINVAL));
        };
        let dir = open_root(root)?;
        let name = name.to_os_string();
        if folders.is_empty() {
            return Ok(Folder {
                fd: dir,
                missing: Vec::new(),
                name,
            });
        }
        let path: PathBuf = folders.iter().collect();
        match openat2_beneath(&dir, &path, FOLDER) {
            Some(Ok(fd)) => {
                return Ok(Folder {
                    fd,
                    missing: Vec::new(),
                    name,
                })
            }
            // Some folder on the way is missing: the walk finds which.
            Some(Err(e)) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Some(Err(e)) => return Err(e),
            None => {}
        }
        let (fd, opened) = walk(dir, folders)?;
        Ok(Folder {
            fd,
            missing: folders[opened..].iter().map(|f| f.to_os_string()).collect(),
            name,
        })
    }

    /// A name for a temporary file in a folder, unique in this process.
    fn temporary_name() -> CString {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        CString::new(format!(".acp-bash-undo.{}.{n}", std::process::id()))
            .expect("no NUL in a number")
    }

    impl Folder {
        /// The file's folder, the missing folders made first (each made with `mkdirat`, then
        /// opened `O_NOFOLLOW`: one swapped for a symlink meanwhile is refused).
        fn made(&self) -> std::io::Result<OwnedFd> {
            let mut dir = self.fd.try_clone()?;
            for folder in &self.missing {
                let name = cstr(folder.as_bytes())?;
                match done(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) }) {
                    Err(e) if e.raw_os_error() != Some(libc::EEXIST) => return Err(e),
                    _ => {}
                }
                dir = at(&dir, folder, FOLDER)?;
            }
            Ok(dir)
        }

        fn name(&self) -> std::io::Result<CString> {
            cstr(self.name.as_bytes())
        }

        /// Removes the file (a symlink itself, never its target); nothing when it is not there.
        pub(in crate::changes) fn remove(&self) -> std::io::Result<()> {
            if !self.missing.is_empty() {
                return Ok(());
            }
            let name = self.name()?;
            match done(unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), 0) }) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                other => other,
            }
        }

        /// The permission bits of the file there now, when it is a regular file.
        fn mode_now(&self, dir: &OwnedFd) -> Option<u32> {
            let name = self.name().ok()?;
            // SAFETY: stat is plain data, filled by the kernel.
            let mut stat: libc::stat = unsafe { std::mem::zeroed() };
            let looked = unsafe {
                libc::fstatat(
                    dir.as_raw_fd(),
                    name.as_ptr(),
                    &mut stat,
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            (looked == 0 && stat.st_mode & libc::S_IFMT == libc::S_IFREG)
                .then_some(stat.st_mode & 0o7777)
        }

        /// Renames the temporary `temp` over the file (removing `temp` when that fails).
        fn rename_over(&self, dir: &OwnedFd, temp: &CString) -> std::io::Result<()> {
            let name = self.name()?;
            let renamed = done(unsafe {
                libc::renameat(
                    dir.as_raw_fd(),
                    temp.as_ptr(),
                    dir.as_raw_fd(),
                    name.as_ptr(),
                )
            });
            if renamed.is_err() {
                unsafe { libc::unlinkat(dir.as_raw_fd(), temp.as_ptr(), 0) };
            }
            renamed
        }

        /// Replaces the file with `bytes` (whatever is there now, a symlink included, is
        /// replaced, never followed): written to a temporary file in the folder, synced, then
        /// renamed over it. Its permission bits are `mode`, else those of the regular file there
        /// now, else the default for a new file.
        pub(in crate::changes) fn write_file(
            &self,
            bytes: &[u8],
            mode: Option<u32>,
        ) -> std::io::Result<()> {
            let dir = self.made()?;
            let mode = mode.or_else(|| self.mode_now(&dir));
            let temp = temporary_name();
            let fd = owned(unsafe {
                libc::openat(
                    dir.as_raw_fd(),
                    temp.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o666 as libc::c_uint,
                )
            } as libc::c_long)?;
            let mut file = std::fs::File::from(fd);
            let written = (|| {
                file.write_all(bytes)?;
                if let Some(mode) = mode {
                    done(unsafe { libc::fchmod(file.as_raw_fd(), mode) })?;
                }
                file.sync_all()
            })();
            drop(file);
            if let Err(e) = written {
                unsafe { libc::unlinkat(dir.as_raw_fd(), temp.as_ptr(), 0) };
                return Err(e);
            }
            self.rename_over(&dir, &temp)
        }

        /// Replaces the file with a symlink to `target` (made under a temporary name, then
        /// renamed over it).
        pub(in crate::changes) fn write_symlink(&self, target: &Path) -> std::io::Result<()> {
            let dir = self.made()?;
            let temp = temporary_name();
            let target = cstr(target.as_os_str().as_bytes())?;
            done(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), temp.as_ptr()) })?;
            self.rename_over(&dir, &temp)
        }
    }
}

/// Elsewhere (change tracking is Linux-only today): reads check the folders resolve inside
/// `root` just before opening the last component `O_NOFOLLOW` (a window remains); nothing is
/// written.
#[cfg(not(target_os = "linux"))]
mod other {
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    fn unsupported() -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "writing beneath a folder safely needs Linux",
        )
    }

    pub(in crate::changes) fn open_beneath(
        root: &Path,
        rel: &Path,
        flags: i32,
    ) -> std::io::Result<std::fs::File> {
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

    /// Never made here.
    #[derive(Debug)]
    pub(in crate::changes) struct Folder;

    pub(in crate::changes) fn folder_of(_root: &Path, _rel: &Path) -> std::io::Result<Folder> {
        Err(unsupported())
    }

    impl Folder {
        pub(in crate::changes) fn remove(&self) -> std::io::Result<()> {
            Err(unsupported())
        }

        pub(in crate::changes) fn write_file(
            &self,
            _bytes: &[u8],
            _mode: Option<u32>,
        ) -> std::io::Result<()> {
            Err(unsupported())
        }

        pub(in crate::changes) fn write_symlink(&self, _target: &Path) -> std::io::Result<()> {
            Err(unsupported())
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

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

    /// Writes through a [`Folder`]: a file replaced whole keeps its mode (or takes the one
    /// given), a symlink where the file was is replaced, not followed, missing folders are
    /// made, no temporary file is left, and a symlink or `..` on the way is refused.
    #[test]
    fn writes_land_in_the_folder_and_never_through_a_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("work");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("f"), "outside\n").unwrap();
        let root = root.canonicalize().unwrap();
        let (d, f) = (root.join("d"), root.join("d/f"));
        // The mode of the file there is kept; a given mode wins.
        std::fs::write(&f, "now\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o751)).unwrap();
        let folder = folder_of(&root, Path::new("d/f")).unwrap();
        folder.write_file(b"before\n", None).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "before\n");
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&f), 0o751);
        folder.write_file(b"again\n", Some(0o600)).unwrap();
        assert_eq!(mode(&f), 0o600);
        // The file itself is now a symlink to the outside: it is replaced, not followed.
        std::fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), &f).unwrap();
        folder.write_file(b"inside\n", None).unwrap();
        assert!(std::fs::symlink_metadata(&f).unwrap().is_file());
        assert_eq!(
            std::fs::read_to_string(outside.join("f")).unwrap(),
            "outside\n"
        );
        std::fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), &f).unwrap();
        folder.remove().unwrap();
        assert!(std::fs::symlink_metadata(&f).is_err());
        assert!(outside.join("f").exists());
        folder.remove().unwrap();
        // A symlink target is written as given.
        folder.write_symlink(Path::new("../x")).unwrap();
        assert_eq!(std::fs::read_link(&f).unwrap(), Path::new("../x"));
        // Missing folders are made, only when written to.
        let deep = folder_of(&root, Path::new("n/e/w")).unwrap();
        deep.remove().unwrap();
        assert!(!root.join("n").exists());
        deep.write_file(b"w\n", None).unwrap();
        assert_eq!(std::fs::read_to_string(root.join("n/e/w")).unwrap(), "w\n");
        // The folder held is where writes land, whatever its name is now.
        let held = folder_of(&root, Path::new("d/g")).unwrap();
        std::fs::rename(&d, root.join("moved")).unwrap();
        std::os::unix::fs::symlink(&outside, &d).unwrap();
        held.write_file(b"g\n", None).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("moved/g")).unwrap(),
            "g\n"
        );
        assert!(!outside.join("g").exists());
        // A symlink on the way, or `..`, is refused.
        let refused = folder_of(&root, Path::new("d/h")).unwrap_err();
        assert!(
            matches!(
                refused.raw_os_error(),
                Some(libc::ELOOP | libc::ENOTDIR | libc::EXDEV)
            ),
            "{refused}"
        );
        assert!(folder_of(&root, Path::new("../outside/f")).is_err());
        // No temporary file is left anywhere.
        let names = |p: &Path| -> Vec<String> {
            std::fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        for folder in [root.clone(), root.join("moved"), root.join("n/e"), outside] {
            assert!(
                names(&folder)
                    .iter()
                    .all(|n| !n.starts_with(".acp-bash-undo")),
                "{:?}",
                names(&folder)
            );
        }
    }
}
