//! Sealed memfds: a file that exists only as an fd and that no one can change once written,
//! not even through `/proc/<pid>/fd` (the engine's shell prelude and long scripts).

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
