//! Sealed memfds: a file that exists only as an fd and that no one can change once written,
//! not even through `/proc/<pid>/fd` (the engine's shell prelude and long scripts); and
//! bounded ones, which anyone holding the fd may write but never grow past their size (a run's
//! shell-state report).

use std::ffi::CStr;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A sealed memfd holding `contents` (read-only for everyone, forever), or a plain error.
pub(crate) fn sealed_memfd(name: &CStr, contents: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: memfd_create with a valid name; the fd is ours.
    let fd =
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(fd);
    file.write_all(contents)?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl on our fd.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file.into())
}

/// An empty memfd whose size is sealed at `bound` bytes (sparse: no page is used until written).
/// A write that would go past `bound` writes what fits and then fails with EPERM, so the file
/// never holds more than `bound` bytes, and it cannot be shrunk or sealed further by whoever
/// holds it. What was written ends at the fd's offset (shared by every dup of it).
pub(crate) fn bounded_memfd(name: &CStr, bound: u64) -> io::Result<OwnedFd> {
    // SAFETY: memfd_create with a valid name; the fd is ours.
    let fd =
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let size = libc::off_t::try_from(bound)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bound too large"))?;
    // SAFETY: ftruncate and fcntl on our fd.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}
