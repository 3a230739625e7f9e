//! The command's view of the filesystem, built in its own mount namespace the way bubblewrap
//! builds one: everything read-only and nosuid, then the writable places bound back writable
//! (nodev, nosuid); the temp dirs replaced (workspace mode: the session's own host folder;
//! read-only mode: a fresh tmpfs); a minimal `/dev` of the command's own (host nodes bound, a
//! fresh devpts, a private shm); empty read-only mounts over masked host paths (credential
//! files, host daemons' socket folders); Git metadata bound read-only; in workspace mode an
//! overlayfs of the session's own over each package cache (writes land in the session's
//! folder, the host's cache stays as it is).
//! Async-signal-safe only: raw syscalls on paths the parent prepared.
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use libc::{c_int, c_long, c_uint};

use super::super::step::Step;
use super::remount::{remount_one, remount_tree};
use super::sys::{check, errno, fail, write_all};

const SYS_OPEN_TREE: c_long = 428;
const SYS_MOVE_MOUNT: c_long = 429;
const SYS_MOUNT_SETATTR: c_long = 442;
const SYS_FSOPEN: c_long = 430;
const SYS_FSCONFIG: c_long = 431;
const SYS_FSMOUNT: c_long = 432;
const FSOPEN_CLOEXEC: c_uint = 1;
const FSCONFIG_SET_FLAG: c_uint = 0;
const FSCONFIG_SET_STRING: c_uint = 1;
const FSCONFIG_CMD_CREATE: c_uint = 6;
const FSMOUNT_CLOEXEC: c_uint = 1;
const OPEN_TREE_CLONE: c_uint = 1;
const AT_RECURSIVE: c_uint = 0x8000;
const AT_EMPTY_PATH: c_uint = 0x1000;
const MOVE_MOUNT_F_EMPTY_PATH: c_uint = 0x4;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// What the view holds, prepared in the parent.
#[derive(Debug, Default, Clone)]
pub(crate) struct View {
    /// Host folders bound back writable (the session folder, the temp dir in workspace mode
    /// without a session temp folder).
    pub writable: Vec<CString>,
    /// The temp dirs a command sees replaced (the temp dir, and /tmp when that differs): by
    /// `temp_source` bound writable, or else by a fresh tmpfs each (read-only mode).
    pub temps: Vec<CString>,
    /// Workspace mode: the session's own host folder shown as every temp dir.
    pub temp_source: Option<CString>,
    /// A session folder inside one of the temps: bound back on top, after creating these
    /// folders in the temp (parents first, the folder itself last).
    pub keep_inside_temp: Option<CString>,
    pub keep_parents: Vec<CString>,
    /// Mount a private /dev/shm (without `private_dev`; it exists here).
    pub private_shm: bool,
    /// The command's own /dev: these host nodes (at most 8, see [`DEV_NODES`]) bound into a
    /// tmpfs, a fresh devpts, a private shm and the usual symlinks.
    pub private_dev: Option<Vec<CString>>,
    /// Folders that read as empty (an empty read-only tmpfs), each with at most one path
    /// inside it kept visible, e.g. `/run/systemd` keeping `/run/systemd/resolve`.
    pub masked_dirs: Vec<(CString, Option<CString>)>,
    /// Files that read as empty (`/dev/null` bound over them).
    pub masked_files: Vec<CString>,
    /// Folders bound onto themselves (writable as before): a mount point cannot be renamed or
    /// removed (a repository's folder and its `.git`).
    pub pinned: Vec<CString>,
    /// Folders made (if missing) right before the read-only binds, as mount points for them
    /// (a repository's missing `.git/hooks`): made here, with the command's own rights, not by
    /// the agent.
    pub make_dirs: Vec<CString>,
    /// Paths bound onto themselves read-only (`.git/hooks`, `.git/config`, a `.git` file).
    pub read_only: Vec<CString>,
    /// Package caches shown through a copy-on-write layer (an overlayfs whose lower layer is the
    /// host's folder), mounted before the masks so a mask under a cache still applies. At most
    /// [`MAX_OVERLAYS`] (the plan takes no more). One that cannot be mounted is left out (the
    /// cache stays read-only, as the rest of the view), said in the command's output, unless
    /// [`View::overlays_required`].
    pub overlays: Vec<Overlay>,
    /// A layer that cannot be mounted fails the whole setup ([`Step::CacheLayer`]) instead of
    /// being left out: the probe's way to learn that overlayfs works.
    pub overlays_required: bool,
    /// Package caches the parent could not prepare a layer for (`path: why`): they stay
    /// read-only, said in the first command's notices. Not read by the child.
    pub refused_caches: Vec<String>,
    /// The host inode (device, inode; `(0, 0)` when missing) of each path this view mounts
    /// over or binds (the masks, the pinned and read-only Git paths), when it was planned.
    /// Part of what a zygote is for: a file the host replaces by a rename (an editor's save, a
    /// `git config`) detaches the mounts on the old inode in every other namespace, so a
    /// zygote whose view was built on it no longer masks or protects that path. Not sent to
    /// the child.
    pub mounted_inodes: Vec<(u64, u64)>,
    /// Build the view without `mount_setattr` (Linux 5.12): each mount's flags changed by a
    /// `MS_REMOUNT | MS_BIND` of its own (`remount.rs`), as on Linux 5.10 and 5.11, where the
    /// system call is missing (ENOSYS). Otherwise one `mount_setattr` per tree: cheaper.
    pub without_mount_setattr: bool,
    /// One command's own view (it has [`crate::sandbox::Roots::also_writable`] folders): it
    /// never starts or replaces the session's zygote. Not sent to the child.
    pub one_command: bool,
}

/// One copy-on-write layer: the host folder `target` as the lower layer, mounted on itself,
/// writes going to `upper` (with overlayfs's `work` folder beside it, on the same filesystem).
#[derive(Debug, Clone)]
pub(crate) struct Overlay {
    pub target: CString,
    pub upper: CString,
    pub work: CString,
}

/// The host nodes a command's own /dev holds (those that exist on the host).
pub(crate) const DEV_NODES: [&CStr; 6] = [
    c"/dev/null",
    c"/dev/zero",
    c"/dev/full",
    c"/dev/random",
    c"/dev/urandom",
    c"/dev/tty",
];

impl View {
    /// The fresh mounts of this view that commands may write beneath: the Landlock rules the
    /// parent made name host inodes, so these need rules of their own (added in the child).
    pub(crate) fn new_writable_mounts(&self) -> impl Iterator<Item = &CStr> {
        let dev = self.private_dev.is_some();
        let shm = (self.private_shm || dev).then_some(c"/dev/shm");
        let pts = dev.then_some(c"/dev/pts");
        let fresh = self.temp_source.is_none();
        let temps = self
            .temps
            .iter()
            .filter(move |_| fresh)
            .map(|t| t.as_c_str());
        [shm, pts].into_iter().flatten().chain(temps)
    }

    /// The package caches' layers' mount points: each needs a Landlock rule of its own too,
    /// where its overlay was mounted ([`is_overlay`]; a layer left out stays the read-only host
    /// folder and gets none).
    pub(crate) fn overlay_targets(&self) -> impl Iterator<Item = &CStr> {
        self.overlays.iter().map(|o| o.target.as_c_str())
    }
}

/// overlayfs's `f_type` (`OVERLAYFS_SUPER_MAGIC`).
const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;

/// Whether `path` is (the root of) an overlayfs now.
pub(crate) fn is_overlay(path: &CStr) -> bool {
    // SAFETY: statfs into a zeroed buffer of ours.
    unsafe {
        let mut buf: libc::statfs = std::mem::zeroed();
        libc::statfs(path.as_ptr(), &mut buf) == 0 && buf.f_type as i64 == OVERLAYFS_SUPER_MAGIC
    }
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

/// Makes every mount of the detached tree `tree` writable, nosuid and nodev (`mount_setattr`;
/// 0, or -1 with errno).
fn make_tree_writable(tree: RawFd) -> i64 {
    setattr(
        tree,
        c"",
        AT_EMPTY_PATH | AT_RECURSIVE,
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        MOUNT_ATTR_RDONLY,
    )
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
    mount_tmpfs(target, libc::MS_NOSUID | libc::MS_NODEV, c"mode=1777")
}

fn mount_tmpfs(target: &CStr, flags: libc::c_ulong, options: &CStr) -> i64 {
    // SAFETY: mount with valid strings.
    unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            options.as_ptr().cast(),
        ) as i64
    }
}

/// A detached copy of the one mount at `path` (not its submounts), or -1.
fn clone_one(path: &CStr) -> RawFd {
    // SAFETY: open_tree with a valid path.
    unsafe {
        libc::syscall(
            SYS_OPEN_TREE,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as c_uint,
        ) as RawFd
    }
}

/// A copy of the tree `tree` (an fd of `open_tree` or `fsmount`), or -1: only once that tree is
/// attached (a copy of a detached tree is EINVAL before Linux 6.15).
fn copy_tree(tree: RawFd) -> RawFd {
    // SAFETY: open_tree on an fd with an empty path.
    unsafe {
        libc::syscall(
            SYS_OPEN_TREE,
            tree,
            c"".as_ptr(),
            OPEN_TREE_CLONE | AT_RECURSIVE | AT_EMPTY_PATH | libc::O_CLOEXEC as c_uint,
        ) as RawFd
    }
}

fn close(fd: RawFd) {
    // SAFETY: closing our own fd.
    unsafe { libc::close(fd) };
}

/// Binds `path` onto itself (recursively), read-only when `read_only`: the path becomes a
/// mount point, which cannot be renamed or removed (EBUSY).
fn bind_onto_itself(path: &CStr, read_only: bool, classic: bool) -> i64 {
    let tree = clone_tree(path);
    if tree < 0 {
        return -1;
    }
    if classic {
        // The flags of an attached mount, by its path (a detached one cannot be remounted).
        let mut r = attach(tree, path);
        close(tree);
        if r >= 0 && read_only {
            r = remount_tree(path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0);
        }
        return r;
    }
    let mut r = 0;
    if read_only {
        r = setattr(
            tree,
            c"",
            AT_EMPTY_PATH | AT_RECURSIVE,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
            0,
        );
    }
    if r >= 0 {
        r = attach(tree, path);
    }
    close(tree);
    r
}

/// Creates an empty file at `path` (a mount point for a bound node). `O_NOCTTY`: the zygote,
/// which builds the view, leads a session without a controlling terminal and must never get one.
fn touch(path: &CStr) -> i64 {
    // SAFETY: open with a valid path.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NOCTTY,
            0o666,
        )
    };
    if fd < 0 {
        return -1;
    }
    close(fd);
    0
}

fn mkdir(path: &CStr, mode: libc::mode_t) -> i64 {
    // SAFETY: mkdir with a valid path.
    let r = unsafe { libc::mkdir(path.as_ptr(), mode) };
    if r < 0 && errno() == libc::EEXIST {
        0
    } else {
        r as i64
    }
}

fn symlink(target: &CStr, link: &CStr) -> i64 {
    // SAFETY: symlink with valid strings.
    unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) as i64 }
}

/// The command's own /dev (see [`View::private_dev`]), as bubblewrap's `--dev` builds one.
fn build_dev(nodes: &[CString], classic: bool, error_fd: RawFd) {
    let step = Step::PrivateDev;
    // Detached copies of the host nodes, taken before the tmpfs hides them (mknod is not
    // allowed in a user namespace; binding a host node is).
    let mut clones = [-1 as RawFd; 8];
    for (slot, node) in clones.iter_mut().zip(nodes) {
        *slot = clone_one(node);
        if *slot < 0 {
            fail(error_fd, step, errno());
        }
    }
    check(
        error_fd,
        step,
        mount_tmpfs(
            c"/dev",
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"mode=0755,size=64k",
        ),
    );
    for (&tree, node) in clones.iter().zip(nodes) {
        check(error_fd, step, touch(node));
        check(error_fd, step, attach(tree, node));
        close(tree);
    }
    check(error_fd, step, mkdir(c"/dev/pts", 0o755));
    // SAFETY: mount with valid strings.
    let pts = unsafe {
        libc::mount(
            c"devpts".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"newinstance,ptmxmode=0666,mode=620".as_ptr().cast(),
        )
    };
    check(error_fd, step, pts as i64);
    check(error_fd, step, symlink(c"pts/ptmx", c"/dev/ptmx"));
    check(error_fd, step, mkdir(c"/dev/shm", 0o1777));
    check(error_fd, Step::PrivateShm, tmpfs(c"/dev/shm"));
    for (target, link) in [
        (c"/proc/self/fd", c"/dev/fd"),
        (c"/proc/self/fd/0", c"/dev/stdin"),
        (c"/proc/self/fd/1", c"/dev/stdout"),
        (c"/proc/self/fd/2", c"/dev/stderr"),
    ] {
        check(error_fd, step, symlink(target, link));
    }
    // Nothing more is made in /dev: the tmpfs itself goes read-only (its submounts keep theirs).
    let r = if classic {
        remount_one(c"/dev", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC, 0)
    } else {
        setattr(
            libc::AT_FDCWD,
            c"/dev",
            0,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC,
            0,
        )
    };
    check(error_fd, step, r);
}

/// An empty read-only tmpfs over `dir`, keeping `keep` (a path inside it) visible. A `dir`
/// gone since the parent looked is nothing to hide.
fn mask_dir(dir: &CStr, keep: Option<&CStr>, classic: bool, error_fd: RawFd) {
    let step = Step::Mask;
    let kept = match keep {
        Some(path) => clone_tree(path),
        None => -1,
    };
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    if mount_tmpfs(dir, flags, c"mode=0755,size=16k") < 0 {
        let err = errno();
        if kept >= 0 {
            close(kept);
        }
        if err == libc::ENOENT {
            return;
        }
        fail(error_fd, step, err);
    }
    if let (Some(path), true) = (keep, kept >= 0) {
        check(error_fd, step, mkdir(path, 0o755));
        check(error_fd, step, attach(kept, path));
        close(kept);
    }
    let r = if classic {
        remount_one(dir, MOUNT_ATTR_RDONLY, 0)
    } else {
        setattr(libc::AT_FDCWD, dir, 0, MOUNT_ATTR_RDONLY, 0)
    };
    check(error_fd, step, r);
}

/// A detached, empty, read-only tmpfs (nosuid, nodev, noexec), or -1: one superblock that every
/// masked folder gets a bind of (cheaper per command than a tmpfs each).
fn empty_read_only_tmpfs() -> RawFd {
    // SAFETY: the new mount API with valid strings; fds closed on every path.
    unsafe {
        let fs = libc::syscall(SYS_FSOPEN, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC) as RawFd;
        if fs < 0 {
            return -1;
        }
        let set = libc::syscall(
            SYS_FSCONFIG,
            fs,
            FSCONFIG_SET_STRING,
            c"mode".as_ptr(),
            c"0755".as_ptr(),
            0,
        );
        let created = set >= 0
            && libc::syscall(
                SYS_FSCONFIG,
                fs,
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_char>(),
                0,
            ) >= 0;
        let mount = if created {
            libc::syscall(
                SYS_FSMOUNT,
                fs,
                FSMOUNT_CLOEXEC,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            ) as RawFd
        } else {
            -1
        };
        libc::close(fs);
        mount
    }
}

/// The empty read-only tmpfs over `dir` (see [`empty_read_only_tmpfs`]); a `dir` gone since is
/// nothing to hide. The first mask attaches the detached mount itself; every later one gets a
/// copy of it, taken once it is attached. A copy of a mount that is still detached (one made
/// by `fsmount`, or an earlier `open_tree` clone) is refused with EINVAL before Linux 6.15
/// (Debian 13's 6.12 refuses it): the view never takes one (`notes/2026-12-06-kernel-floor.md`).
fn mask_dir_with(empty: RawFd, attached: &mut bool, dir: &CStr, error_fd: RawFd) {
    let copy = if *attached { copy_tree(empty) } else { empty };
    if copy < 0 {
        fail(error_fd, Step::Mask, errno());
    }
    if attach(copy, dir) < 0 {
        if errno() != libc::ENOENT {
            fail(error_fd, Step::Mask, errno());
        }
    } else {
        *attached = true;
    }
    if copy != empty {
        close(copy);
    }
}

/// A detached overlayfs (`userxattr`: the trusted xattrs are not ours in a user namespace;
/// nosuid, nodev; `volatile` where the kernel has it, see below) with `overlay.target` as its
/// lower layer and its upper and work folders, or -1 (errno set).
///
/// `volatile` (Linux 5.10): an overlay with an upper layer otherwise syncs the *whole* upper
/// filesystem when it goes away (`ovl_sync_fs` → `sync_filesystem` of the upper superblock),
/// and it goes away when the command's last process exits, so every workspace command waited
/// for a `syncfs` of the filesystem holding the session folder per package cache: two
/// `ext4_sync_fs` per layer and the writeback of every dirty page on that filesystem, the
/// agent's and other programs' alike (`notes/2026-12-01-per-command-cost.md`). The upper folder
/// is the session's scratch, removed with the session: nothing in it needs to survive a crash,
/// which is all `volatile` gives up. Each command has a work folder of its own, so the marker a
/// volatile mount leaves there (`work/incompat/volatile`) never blocks a later mount. A kernel
/// without the option refuses the flag (EINVAL) and gets the overlay without it.
fn make_overlay(overlay: &Overlay) -> RawFd {
    // SAFETY: the new mount API with valid strings; fds closed on every path.
    unsafe {
        let fs = libc::syscall(SYS_FSOPEN, c"overlay".as_ptr(), FSOPEN_CLOEXEC) as RawFd;
        if fs < 0 {
            return -1;
        }
        let mut ok = true;
        for (key, value) in [
            (c"lowerdir", &overlay.target),
            (c"upperdir", &overlay.upper),
            (c"workdir", &overlay.work),
        ] {
            ok = ok
                && libc::syscall(
                    SYS_FSCONFIG,
                    fs,
                    FSCONFIG_SET_STRING,
                    key.as_ptr(),
                    value.as_ptr(),
                    0,
                ) >= 0;
        }
        ok = ok
            && libc::syscall(
                SYS_FSCONFIG,
                fs,
                FSCONFIG_SET_FLAG,
                c"userxattr".as_ptr(),
                std::ptr::null::<libc::c_char>(),
                0,
            ) >= 0
            && {
                // Best effort: refused on kernels before 5.10, which sync as before.
                libc::syscall(
                    SYS_FSCONFIG,
                    fs,
                    FSCONFIG_SET_FLAG,
                    c"volatile".as_ptr(),
                    std::ptr::null::<libc::c_char>(),
                    0,
                );
                true
            }
            && libc::syscall(
                SYS_FSCONFIG,
                fs,
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_char>(),
                0,
            ) >= 0;
        let mount = if ok {
            libc::syscall(
                SYS_FSMOUNT,
                fs,
                FSMOUNT_CLOEXEC,
                MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            ) as RawFd
        } else {
            -1
        };
        let err = errno();
        libc::close(fs);
        *libc::__errno_location() = err;
        mount
    }
}

/// A cache's layer could not be made or mounted (`err`): the setup fails where the layers are
/// [`View::overlays_required`], else the command's output (fd 2, already its pipe) says that
/// this cache stays read-only, in the engine's notice format.
fn layer_failed(view: &View, overlay: &Overlay, err: c_int, error_fd: RawFd) {
    if view.overlays_required {
        fail(error_fd, Step::CacheLayer, err);
    }
    let too_long = err == libc::EINVAL
        && [&overlay.target, &overlay.upper, &overlay.work]
            .iter()
            .any(|p| p.to_bytes().len() > 255);
    let mut digits = [0u8; 12];
    let mut at = digits.len();
    let mut n = err.unsigned_abs();
    while let Some(slot) = at.checked_sub(1).and_then(|i| digits.get_mut(i)) {
        *slot = b'0' + (n % 10) as u8;
        at -= 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for part in [
        b"[acp-bash: workspace mode: the package cache ".as_slice(),
        overlay.target.to_bytes(),
        b" stays read-only for this command: its copy-on-write layer could not be mounted \
          (overlayfs, errno "
            .as_slice(),
        digits.get(at..).unwrap_or_default(),
        if too_long {
            b": a path longer than the 255 bytes overlayfs takes".as_slice()
        } else {
            b"".as_slice()
        },
        b"); installs that fill it fail, use full mode for them; `acp-bash doctor` checks \
          the layers]\n"
            .as_slice(),
    ] {
        write_all(2, part);
    }
}

/// `/dev/null` bound over `file` (it reads as empty). A `file` gone since is nothing to hide.
fn mask_file(file: &CStr, error_fd: RawFd) {
    let null = clone_one(c"/dev/null");
    if null < 0 {
        fail(error_fd, Step::Mask, errno());
    }
    if attach(null, file) < 0 && errno() != libc::ENOENT {
        fail(error_fd, Step::Mask, errno());
    }
    close(null);
}

/// The most package caches one view layers (see [`View::overlays`]).
pub(crate) const MAX_OVERLAYS: usize = 16;

/// Builds the view in the current (new) mount namespace.
pub(crate) fn build(view: &View, error_fd: RawFd) {
    // The caches' overlays are made first, detached: overlayfs refuses an upper folder on a
    // read-only mount, and the next step makes every mount read-only (the overlay keeps a
    // private clone of the upper folder's mount, writable).
    // A layer that fails is left out (its cache stays read-only, the rest of the view holds)
    // and said in the command's output.
    let mut overlays = [-1 as RawFd; MAX_OVERLAYS];
    for (slot, overlay) in overlays.iter_mut().zip(&view.overlays) {
        *slot = make_overlay(overlay);
        if *slot < 0 {
            layer_failed(view, overlay, errno(), error_fd);
        }
    }
    let classic = view.without_mount_setattr;
    let read_only = if classic {
        remount_tree(c"/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0)
    } else {
        setattr(
            libc::AT_FDCWD,
            c"/",
            AT_RECURSIVE,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
            0,
        )
    };
    check(error_fd, Step::ReadOnlyView, read_only);
    for dir in &view.writable {
        let tree = clone_tree(dir);
        if tree < 0 {
            fail(error_fd, Step::WritablePlace, errno());
        }
        if classic {
            // Attached first: a detached copy cannot be remounted.
            check(error_fd, Step::WritablePlace, attach(tree, dir));
            close(tree);
            check(
                error_fd,
                Step::WritablePlace,
                remount_tree(dir, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, MOUNT_ATTR_RDONLY),
            );
            continue;
        }
        check(error_fd, Step::WritablePlace, make_tree_writable(tree));
        check(error_fd, Step::WritablePlace, attach(tree, dir));
        close(tree);
    }
    if !view.temps.is_empty() {
        build_temps(view, error_fd);
    }
    match &view.private_dev {
        Some(nodes) => build_dev(nodes, classic, error_fd),
        None if view.private_shm => check(error_fd, Step::PrivateShm, tmpfs(c"/dev/shm")),
        None => {}
    }
    for (&tree, overlay) in overlays.iter().zip(&view.overlays) {
        if tree >= 0 {
            if attach(tree, &overlay.target) < 0 {
                layer_failed(view, overlay, errno(), error_fd);
            }
            close(tree);
        }
    }
    let (mut empty, mut attached) = (-1, false);
    for (dir, keep) in &view.masked_dirs {
        if keep.is_some() {
            mask_dir(dir, keep.as_deref(), classic, error_fd);
            continue;
        }
        if empty < 0 {
            empty = empty_read_only_tmpfs();
        }
        if empty >= 0 {
            mask_dir_with(empty, &mut attached, dir, error_fd);
        } else {
            mask_dir(dir, None, classic, error_fd);
        }
    }
    if empty >= 0 {
        close(empty);
    }
    for file in &view.masked_files {
        mask_file(file, error_fd);
    }
    for path in &view.pinned {
        check(
            error_fd,
            Step::GitMetadata,
            bind_onto_itself(path, false, classic),
        );
    }
    for dir in &view.make_dirs {
        check(error_fd, Step::GitMetadata, mkdir(dir, 0o755));
    }
    for path in &view.read_only {
        check(
            error_fd,
            Step::GitMetadata,
            bind_onto_itself(path, true, classic),
        );
    }
}

/// The temp dirs replaced (see [`View::temps`]), the session folder kept inside.
/// For a fork of the session's zygote, in its own copy of the zygote's mount namespace: a
/// fresh private temp dir (read-only mode's tmpfs, when no session folder stands for it) and a
/// fresh `/dev/shm` over the zygote's, so that a command's files there are not the next
/// command's, as when each command built the whole view.
pub(crate) fn refresh_private(view: &View, error_fd: RawFd) {
    if view.temp_source.is_none() && !view.temps.is_empty() {
        build_temps(view, error_fd);
    }
    if view.private_dev.is_some() || view.private_shm {
        check(error_fd, Step::PrivateShm, tmpfs(c"/dev/shm"));
    }
}

fn build_temps(view: &View, error_fd: RawFd) {
    let step = Step::PrivateTemp;
    let kept = match &view.keep_inside_temp {
        Some(dir) => {
            let tree = clone_tree(dir);
            if tree < 0 {
                fail(error_fd, step, errno());
            }
            tree
        }
        None => -1,
    };
    let source = match &view.temp_source {
        Some(dir) => {
            let tree = clone_tree(dir);
            if tree < 0 {
                fail(error_fd, step, errno());
            }
            if !view.without_mount_setattr {
                check(error_fd, step, make_tree_writable(tree));
            }
            tree
        }
        None => -1,
    };
    for (i, temp) in view.temps.iter().enumerate() {
        if source >= 0 {
            // The first temp gets the clone itself; later ones a copy of it once it is attached
            // (a copy of a detached clone is refused before Linux 6.15, see `mask_dir_with`).
            let copy = if i == 0 { source } else { copy_tree(source) };
            if copy < 0 {
                fail(error_fd, step, errno());
            }
            check(error_fd, step, attach(copy, temp));
            if copy != source {
                close(copy);
            }
            if i == 0 && view.without_mount_setattr {
                // Writable once attached (a detached mount cannot be remounted); the later
                // temps' copies are taken of it as it is then.
                check(
                    error_fd,
                    step,
                    remount_tree(
                        temp,
                        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                        MOUNT_ATTR_RDONLY,
                    ),
                );
            }
        } else {
            check(error_fd, step, tmpfs(temp));
        }
    }
    if source >= 0 {
        close(source);
    }
    if let (Some(dir), true) = (&view.keep_inside_temp, kept >= 0) {
        for parent in view.keep_parents.iter().chain([dir]) {
            check(error_fd, step, mkdir(parent, 0o755));
        }
        check(error_fd, step, attach(kept, dir));
        close(kept);
    }
}
