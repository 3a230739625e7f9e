//! The bytes between the agent and its zygotes (see `zygote.rs`): one `SOCK_SEQPACKET` message
//! per setup or command, fds beside it as `SCM_RIGHTS`. Both ends are the same build (the
//! zygote is this binary, re-exec'd), so the format is only checked, not versioned beyond
//! [`PROTOCOL`].

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::child::view::{Overlay, View};

/// The protocol's name, the zygote's `argv[1]`: a binary of another build refuses to serve.
pub(crate) const PROTOCOL: &str = concat!("acp-bash-zygote/", env!("CARGO_PKG_VERSION"), "/3");

/// The message that tells a zygote to let its spare PID 1 go and to make none until its next
/// command (`sandbox::warm`: only the sessions used most recently keep a spare). No answer:
/// a command message is always longer than this one byte.
pub(crate) const LET_SPARE_GO: &[u8] = b"S";

/// The largest message either side sends (a setup with many masks and Git repositories, a
/// command with a large environment). Bigger: the command takes the per-command path.
pub(crate) const MAX_MESSAGE: usize = 192 * 1024;

/// At most this many fds travel with one message.
pub(crate) use super::child::sys::MAX_FDS;

/// Appends fields to a message.
#[derive(Default)]
pub(crate) struct Writer(pub Vec<u8>);

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
    }
    fn cstr(&mut self, v: &CString) {
        self.bytes(v.as_bytes());
    }
    fn opt(&mut self, v: &Option<CString>) {
        match v {
            Some(v) => {
                self.u8(1);
                self.cstr(v);
            }
            None => self.u8(0),
        }
    }
    fn list(&mut self, v: &[CString]) {
        self.u32(v.len() as u32);
        for item in v {
            self.cstr(item);
        }
    }
}

/// Reads fields of a message; `None` once it is short or malformed.
pub(crate) struct Reader<'a>(pub &'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }
    pub(crate) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub(crate) fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        Some(self.take(n)?.to_vec())
    }
    pub(crate) fn cstr(&mut self) -> Option<CString> {
        CString::new(self.bytes()?).ok()
    }
    fn opt(&mut self) -> Option<Option<CString>> {
        match self.u8()? {
            0 => Some(None),
            _ => Some(Some(self.cstr()?)),
        }
    }
    pub(crate) fn list(&mut self) -> Option<Vec<CString>> {
        let n = self.u32()? as usize;
        if n > self.0.len() {
            return None;
        }
        (0..n).map(|_| self.cstr()).collect()
    }
}

/// The view, field by field (a new field of [`View`] does not compile here until it travels).
/// Without `with_work`, the overlays' work folders are left out: they are new for every
/// command (see `view_plan::cache_layers`) and only the first one a zygote gets is used.
pub(crate) fn write_view(w: &mut Writer, view: &View, with_work: bool) {
    let View {
        writable,
        temps,
        temp_source,
        keep_inside_temp,
        keep_parents,
        private_shm,
        private_dev,
        masked_dirs,
        masked_files,
        pinned,
        make_dirs,
        read_only,
        overlays,
        overlays_required,
        refused_caches: _, // the agent's notices only
        mounted_inodes: _, // the agent's key for the zygote only
        one_command: _,    // never sent to a zygote (`zygote::suits`)
        without_mount_setattr,
    } = view;
    w.list(writable);
    w.list(temps);
    w.opt(temp_source);
    w.opt(keep_inside_temp);
    w.list(keep_parents);
    w.u8(u8::from(*private_shm));
    match private_dev {
        Some(nodes) => {
            w.u8(1);
            w.list(nodes);
        }
        None => w.u8(0),
    }
    w.u32(masked_dirs.len() as u32);
    for (dir, keep) in masked_dirs {
        w.cstr(dir);
        w.opt(keep);
    }
    w.list(masked_files);
    w.list(pinned);
    w.list(make_dirs);
    w.list(read_only);
    w.u32(overlays.len() as u32);
    for Overlay {
        target,
        upper,
        work,
    } in overlays
    {
        w.cstr(target);
        w.cstr(upper);
        if with_work {
            w.cstr(work);
        }
    }
    w.u8(u8::from(*overlays_required));
    w.u8(u8::from(*without_mount_setattr));
}

/// [`write_view`]'s inverse.
pub(crate) fn read_view(r: &mut Reader) -> Option<View> {
    let writable = r.list()?;
    let temps = r.list()?;
    let temp_source = r.opt()?;
    let keep_inside_temp = r.opt()?;
    let keep_parents = r.list()?;
    let private_shm = r.u8()? != 0;
    let private_dev = match r.u8()? {
        0 => None,
        _ => Some(r.list()?),
    };
    let n = r.u32()? as usize;
    let mut masked_dirs = Vec::new();
    for _ in 0..n.min(r.0.len()) {
        masked_dirs.push((r.cstr()?, r.opt()?));
    }
    let masked_files = r.list()?;
    let pinned = r.list()?;
    let make_dirs = r.list()?;
    let read_only = r.list()?;
    let n = r.u32()? as usize;
    let mut overlays = Vec::new();
    for _ in 0..n.min(r.0.len()) {
        overlays.push(Overlay {
            target: r.cstr()?,
            upper: r.cstr()?,
            work: r.cstr()?,
        });
    }
    let overlays_required = r.u8()? != 0;
    let without_mount_setattr = r.u8()? != 0;
    Some(View {
        writable,
        temps,
        temp_source,
        keep_inside_temp,
        keep_parents,
        private_shm,
        private_dev,
        masked_dirs,
        masked_files,
        pinned,
        make_dirs,
        read_only,
        overlays,
        overlays_required,
        refused_caches: Vec::new(),
        mounted_inodes: Vec::new(),
        one_command: false,
        without_mount_setattr,
    })
}

/// Sends `bytes` with `fds` as one message.
pub(crate) fn send(socket: BorrowedFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "too many fds"));
    }
    let mut control = [0u64; 1 + (MAX_FDS * 4).div_ceil(8) + 2];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr and its control buffer are locals that outlive the sendmsg call; CMSG_*
    // compute offsets inside that buffer, which is large enough for MAX_FDS fds.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            let space = libc::CMSG_SPACE(std::mem::size_of_val(fds) as u32) as usize;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(cmsg).cast::<RawFd>(),
                fds.len(),
            );
        }
        loop {
            let n = libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
            if n >= 0 {
                return Ok(());
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
}

/// Receives one message into `buf`: its length (0: the other end closed) and its fds (each
/// close-on-exec). A truncated message or control part is an error.
pub(crate) fn recv(socket: BorrowedFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut raw = [-1 as RawFd; MAX_FDS];
    let (n, count, flags) = super::child::sys::recv_with_fds(socket.as_raw_fd(), buf, &mut raw);
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fds the kernel just gave this process, each taken over once.
    let fds = raw
        .iter()
        .take(count)
        .map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect();
    if flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a zygote message was truncated",
        ));
    }
    Ok((n as usize, fds))
}
