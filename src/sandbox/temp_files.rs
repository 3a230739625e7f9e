//! The portable stand-ins for Linux's sealed and bounded memfds: unlinked files in the temp dir.
//! For every backend without memfds (macOS, and the unsupported one), and unit-tested on every
//! platform. Portable std only.

use std::ffi::CStr;
use std::io;
use std::os::fd::OwnedFd;

/// A new file in the temp dir named after `name` (mode 0600, `create_new`, so nothing planted
/// there is followed), opened read-write and as `reopen` says, then removed.
fn unlinked_temp_file(name: &CStr, contents: &[u8], reopen_read_only: bool) -> io::Result<OwnedFd> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut bytes = [0u8; 8];
    crate::random::random_bytes(&mut bytes);
    let path = std::env::temp_dir().join(format!(
        "{}-{}-{}-{:016x}",
        name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        u64::from_ne_bytes(bytes)
    ));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    let opened = file.write_all(contents).and_then(|()| {
        if reopen_read_only {
            std::fs::File::open(&path)
        } else {
            file.try_clone()
        }
    });
    let removed = std::fs::remove_file(&path);
    let opened = opened?;
    removed?;
    Ok(opened.into())
}

/// The portable stand-in for a sealed memfd: a new file in the temp dir (mode 0600,
/// `create_new`), opened again read-only and removed at once. Until the removal another
/// process of the same user could open it.
pub(crate) fn sealed_file(name: &CStr, contents: &[u8]) -> io::Result<OwnedFd> {
    unlinked_temp_file(name, contents, true)
}

/// The portable stand-in for a bounded memfd: a new file in the temp dir (mode 0600,
/// `create_new`), removed at once, read and written through the one fd. Writes past the
/// bound are not refused: the reader reads no more than it keeps.
pub(crate) fn bounded_file(name: &CStr) -> io::Result<OwnedFd> {
    unlinked_temp_file(name, &[], false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;
    use std::os::fd::AsRawFd as _;

    #[test]
    fn the_portable_files_are_gone_from_disk_and_keep_their_contents() {
        let sealed = sealed_file(c"acp-bash-test", b"hello").unwrap();
        let mut text = String::new();
        std::fs::File::from(sealed)
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "hello");
        let bounded = bounded_file(c"acp-bash-test").unwrap();
        // SAFETY: fstat into a local struct.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::fstat(bounded.as_raw_fd(), &mut stat) }, 0);
        assert_eq!(stat.st_nlink, 0, "the file is still linked");
    }
}
