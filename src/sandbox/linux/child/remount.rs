//! The view's mount flags without `mount_setattr` (Linux 5.12): the classic way, as bubblewrap
//! does it, for Linux 5.10 and 5.11 (Debian 11). A mount's flags change by a
//! `mount(NULL, point, NULL, MS_REMOUNT | MS_BIND | flags)` of that one mount point; a tree's by
//! one such remount per mount point at or under its root, listed by `/proc/self/mountinfo`.
//! Each remount keeps the flags the mount has (`nosuid`, `nodev`, `noexec`, `nosymfollow`,
//! read from `statfs`; the atime flags are kept by the kernel when none is given): in a user
//! namespace those the host set are locked, and dropping one is refused (EPERM).
//!
//! Async-signal-safe only: `mountinfo` is read through a buffer on the stack, a line at a time,
//! and parsed in place; nothing is allocated.
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::ffi::CStr;

use libc::c_ulong;

#[cfg(not(target_pointer_width = "64"))]
compile_error!("remount.rs reads the kernel's 64-bit `struct statfs`");

use super::sys::errno;

/// `mount_setattr`'s `MOUNT_ATTR_*` flags this module maps (the view uses no others).
const ATTR_RDONLY: u64 = 0x1;
const ATTR_NOSUID: u64 = 0x2;
const ATTR_NODEV: u64 = 0x4;
const ATTR_NOEXEC: u64 = 0x8;

/// `MS_NOSYMFOLLOW` (Linux 5.10; not in every libc).
const MS_NOSYMFOLLOW: c_ulong = 256;
/// `ST_NOSYMFOLLOW` in `statfs`'s `f_flags`.
const ST_NOSYMFOLLOW: u64 = 0x2000;
/// `ST_VALID`: `f_flags` is filled in (every kernel since 2.6.36).
const ST_VALID: u64 = 0x20;

/// `MOUNT_ATTR_*` flags as `mount(2)`'s `MS_*`.
fn ms_flags(attr: u64) -> c_ulong {
    let mut flags = 0;
    for (a, ms) in [
        (ATTR_RDONLY, libc::MS_RDONLY),
        (ATTR_NOSUID, libc::MS_NOSUID),
        (ATTR_NODEV, libc::MS_NODEV),
        (ATTR_NOEXEC, libc::MS_NOEXEC),
    ] {
        if attr & a != 0 {
            flags |= ms;
        }
    }
    flags
}

/// The kernel's `struct statfs` on 64-bit Linux (libc keeps `f_flags` private).
#[repr(C)]
struct KernelStatfs {
    f_type: i64,
    f_bsize: i64,
    f_blocks: u64,
    f_bfree: u64,
    f_bavail: u64,
    f_files: u64,
    f_ffree: u64,
    f_fsid: [i32; 2],
    f_namelen: i64,
    f_frsize: i64,
    f_flags: i64,
    f_spare: [i64; 4],
}

/// The per-mount flags of the mount at `path` now (`statfs`'s `f_flags`), as `MS_*` without
/// the atime ones.
fn current_flags(path: &CStr) -> Result<c_ulong, ()> {
    // SAFETY: the raw statfs system call into a zeroed buffer of ours of the kernel's layout.
    let st = unsafe {
        let mut buf: KernelStatfs = std::mem::zeroed();
        if libc::syscall(
            libc::SYS_statfs,
            path.as_ptr(),
            &mut buf as *mut KernelStatfs,
        ) < 0
        {
            return Err(());
        }
        buf.f_flags as u64
    };
    if st & ST_VALID == 0 {
        return Ok(0);
    }
    let mut flags = 0;
    for (s, ms) in [
        (libc::ST_RDONLY, libc::MS_RDONLY),
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (ST_NOSYMFOLLOW, MS_NOSYMFOLLOW),
    ] {
        if st & s != 0 {
            flags |= ms;
        }
    }
    Ok(flags)
}

/// The one mount at `path` (the topmost there) remounted with its flags, plus `set`, minus
/// `clear` (`MOUNT_ATTR_*`): what `mount_setattr(AT_FDCWD, path, 0, …)` does. 0, or -1 (errno).
pub(crate) fn remount_one(path: &CStr, set: u64, clear: u64) -> i64 {
    let Ok(flags) = current_flags(path) else {
        return -1;
    };
    let flags = (flags | ms_flags(set)) & !ms_flags(clear);
    // SAFETY: mount with a valid path and null source, type and data.
    unsafe {
        libc::mount(
            std::ptr::null(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_BIND | flags,
            std::ptr::null(),
        ) as i64
    }
}

/// The longest path a mount point can have, with its NUL.
const PATH_BYTES: usize = libc::PATH_MAX as usize + 1;
/// The buffer `mountinfo` is read through: a line longer than this (a container's overlayfs
/// with many layers lists them all) is read up to here, which holds its mount point (the fifth
/// field; the long ones are the last), and its rest skipped.
const READ_BYTES: usize = 16 * 1024;

/// Every mount at or under `root` remounted as [`remount_one`] does: what
/// `mount_setattr(AT_FDCWD, root, AT_RECURSIVE, …)` does. `root` itself must work; a mount
/// below it that this process cannot reach by its path (a folder it may not search: EACCES; one
/// hidden under a later mount: ENOENT or EINVAL, no mount point there) is left as it is, as
/// bubblewrap leaves it: nothing can reach it through the view either. 0, or -1 (errno).
pub(crate) fn remount_tree(root: &CStr, set: u64, clear: u64) -> i64 {
    if remount_one(root, set, clear) < 0 {
        return -1;
    }
    // SAFETY: open with a valid path.
    let fd = unsafe {
        libc::open(
            c"/proc/self/mountinfo".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return -1;
    }
    let mut buf = [0u8; READ_BYTES];
    let mut path = [0u8; PATH_BYTES];
    let mut held = 0usize; // bytes of buf holding the start of unparsed lines
    let mut skipping = false; // the rest of an overlong line
    let mut result = 0;
    'read: while let Some(free) = buf.get_mut(held..) {
        // SAFETY: reading into our own buffer's free part.
        let n = unsafe { libc::read(fd, free.as_mut_ptr().cast(), free.len()) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            result = -1;
            break;
        }
        let end = held + n as usize;
        let mut start = 0;
        while let Some(newline) = buf
            .get(start..end)
            .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
        {
            let line = buf.get(start..start + newline).unwrap_or_default();
            if !skipping && remount_line(line, root, set, clear, &mut path) < 0 {
                result = -1;
                break 'read;
            }
            skipping = false;
            start += newline + 1;
        }
        if n == 0 {
            // The end: a last line without its newline.
            let line = buf.get(start..end).unwrap_or_default();
            if !skipping && !line.is_empty() && remount_line(line, root, set, clear, &mut path) < 0
            {
                result = -1;
            }
            break;
        }
        if start == 0 && end == buf.len() {
            // A line longer than the buffer: its start holds the mount point.
            if !skipping && remount_line(&buf, root, set, clear, &mut path) < 0 {
                result = -1;
                break;
            }
            skipping = true;
            held = 0;
            continue;
        }
        buf.copy_within(start..end, 0);
        held = end - start;
    }
    let err = errno();
    // SAFETY: closing our own fd.
    unsafe { libc::close(fd) };
    if result < 0 {
        // SAFETY: restoring this thread's errno.
        unsafe { *libc::__errno_location() = err };
    }
    result
}

/// One `mountinfo` line: its mount point remounted when it is `root` or under it. 0 when done
/// or not to be done (see [`remount_tree`]), -1 (errno) when refused.
fn remount_line(
    line: &[u8],
    root: &CStr,
    set: u64,
    clear: u64,
    path: &mut [u8; PATH_BYTES],
) -> i64 {
    // The fifth field, space separated: the mount point, with ' ', '\t', '\n' and '\\' as
    // octal escapes (`\040`).
    let Some(field) = line.split(|&b| b == b' ').nth(4) else {
        return 0;
    };
    let Some(len) = unescape(field, path) else {
        return 0;
    };
    let point = path.get(..len).unwrap_or_default();
    let root = root.to_bytes();
    let under = root == b"/"
        || point == root
        || (point.starts_with(root) && point.get(root.len()) == Some(&b'/'));
    if !under || point == root {
        return 0;
    }
    let Ok(point) = CStr::from_bytes_with_nul(path.get(..=len).unwrap_or_default()) else {
        return 0;
    };
    if remount_one(point, set, clear) < 0 {
        return match errno() {
            libc::EACCES | libc::ENOENT | libc::EINVAL | libc::ENOTDIR => 0,
            _ => -1,
        };
    }
    0
}

/// `field` with `mountinfo`'s octal escapes undone, NUL-terminated in `out`; its length, or
/// `None` when it does not fit (or holds a NUL).
fn unescape(field: &[u8], out: &mut [u8; PATH_BYTES]) -> Option<usize> {
    let mut len = 0;
    let mut i = 0;
    while let Some(&b) = field.get(i) {
        let mut byte = b;
        i += 1;
        if b == b'\\' {
            if let Some(digits) = field.get(i..i + 3) {
                if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                    byte = digits.iter().fold(0u16, |n, d| n * 8 + u16::from(d - b'0')) as u8;
                    i += 3;
                }
            }
        }
        if byte == 0 {
            return None;
        }
        *out.get_mut(len)? = byte;
        len += 1;
    }
    *out.get_mut(len)? = 0;
    Some(len)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        let mut out = [0u8; PATH_BYTES];
        let len = unescape(br"/mnt/a\040b\134c\011d", &mut out).unwrap();
        assert_eq!(&out[..len], b"/mnt/a b\\c\td");
        assert_eq!(out[len], 0);
        let len = unescape(br"/x\04", &mut out).unwrap();
        assert_eq!(&out[..len], br"/x\04");
        assert_eq!(unescape(br"/\000", &mut out), None);
    }

    #[test]
    fn mount_attrs_map_to_mount_flags() {
        assert_eq!(
            ms_flags(ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC
        );
        assert_eq!(ms_flags(0), 0);
    }
}
