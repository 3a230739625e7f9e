//! The command's view of the filesystem, built in its own mount namespace the way bubblewrap
//! builds one: everything read-only and nosuid, then the writable places bound back writable
//! (nodev, nosuid), a private /dev/shm and, in read-only mode, a private temp dir.
//! Async-signal-safe only: raw syscalls on paths the parent prepared.
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use libc::{c_long, c_uint};

use super::super::step::Step;
use super::sys::{check, errno, fail};

const SYS_OPEN_TREE: c_long = 428;
const SYS_MOVE_MOUNT: c_long = 429;
const SYS_MOUNT_SETATTR: c_long = 442;
const OPEN_TREE_CLONE: c_uint = 1;
const AT_RECURSIVE: c_uint = 0x8000;
const AT_EMPTY_PATH: c_uint = 0x1000;
const MOVE_MOUNT_F_EMPTY_PATH: c_uint = 0x4;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// What the view holds, prepared in the parent.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// Host folders bound back writable (the session folder, the temp dir in workspace mode).
    pub writable: Vec<CString>,
    /// Read-only mode: a fresh tmpfs mounted here (the temp dir).
    pub private_temp: Option<CString>,
    /// A session folder inside `private_temp`: bound back (read-only) on top of the tmpfs, after
    /// creating these folders in it (parents first, the folder itself last).
    pub keep_inside_temp: Option<CString>,
    pub keep_parents: Vec<CString>,
    /// Mount a private /dev/shm (it exists here).
    pub private_shm: bool,
}

fn setattr(dirfd: RawFd, path: &CStr, flags: c_uint, set: u64, clear: u64) -> i64 {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr with a valid path and attr struct.
    unsafe {
        libc::syscall(
            SYS_MOUNT_SETATTR,
            dirfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    }
}

/// A detached recursive copy of the mount tree at `path` (close-on-exec fd), or -1.
fn clone_tree(path: &CStr) -> RawFd {
    // SAFETY: open_tree with a valid path.
    unsafe {
        libc::syscall(
            SYS_OPEN_TREE,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as c_uint,
        ) as RawFd
    }
}

fn attach(tree: RawFd, target: &CStr) -> i64 {
    // SAFETY: move_mount of a detached tree onto an existing path.
    unsafe {
        libc::syscall(
            SYS_MOVE_MOUNT,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    }
}

fn tmpfs(target: &CStr) -> i64 {
    // SAFETY: mount with valid strings.
    unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            c"mode=1777".as_ptr().cast(),
        ) as i64
    }
}

/// Builds the view in the current (new) mount namespace.
pub(crate) fn build(view: &View, error_fd: RawFd) {
    let root = c"/";
    let empty = c"";
    check(
        error_fd,
        Step::ReadOnlyView,
        setattr(
            libc::AT_FDCWD,
            root,
            AT_RECURSIVE,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
            0,
        ),
    );
    for dir in &view.writable {
        let tree = clone_tree(dir);
        if tree < 0 {
            fail(error_fd, Step::WritablePlace, errno());
        }
        check(
            error_fd,
            Step::WritablePlace,
            setattr(
                tree,
                empty,
                AT_EMPTY_PATH | AT_RECURSIVE,
                MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                MOUNT_ATTR_RDONLY,
            ),
        );
        check(error_fd, Step::WritablePlace, attach(tree, dir));
        // SAFETY: closing our fd.
        unsafe { libc::close(tree) };
    }
    if let Some(temp) = &view.private_temp {
        let kept = match &view.keep_inside_temp {
            Some(dir) => {
                let tree = clone_tree(dir);
                if tree < 0 {
                    fail(error_fd, Step::PrivateTemp, errno());
                }
                tree
            }
            None => -1,
        };
        check(error_fd, Step::PrivateTemp, tmpfs(temp));
        if let (Some(dir), true) = (&view.keep_inside_temp, kept >= 0) {
            for parent in view.keep_parents.iter().chain([dir]) {
                // SAFETY: mkdir with a valid path; an existing folder is fine.
                let made = unsafe { libc::mkdir(parent.as_ptr(), 0o755) };
                if made < 0 && errno() != libc::EEXIST {
                    fail(error_fd, Step::PrivateTemp, errno());
                }
            }
            check(error_fd, Step::PrivateTemp, attach(kept, dir));
            // SAFETY: closing our fd.
            unsafe { libc::close(kept) };
        }
    }
    if view.private_shm {
        check(error_fd, Step::PrivateShm, tmpfs(c"/dev/shm"));
    }
}
