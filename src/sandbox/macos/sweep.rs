//! Cleanup without a PID namespace: every process of a command carries its mark, an
//! environment variable it inherits (`__acp_bash_mark=<session>-<run>`); when the command's
//! shell has exited, and when its session ends, every process that still carries the mark is
//! killed (the process group is killed by the engine as everywhere). What escapes: a process
//! that both leaves the group (`setsid`, `setpgid`) and is started without the mark (`env -i`,
//! an `exec` with a new environment), or one started by launchd on the command's behalf
//! (`launchctl`, `open`; Seatbelt denies those services in workspace and read-only mode).
//!
//! The mark is read from the environment a process was started with (macOS:
//! `sysctl KERN_PROCARGS2`, which shows another process's only to its own user or root), so
//! `unset` in a shell does not remove it from the shell itself, only from what it starts.

/// The variable that marks a command's processes. The prelude's prefix: the engine never
/// takes it as session state.
pub(crate) const MARK_VAR: &str = "__acp_bash_mark";

/// Rounds of a sweep: each kills what it finds; a process forked between the listing and the
/// kill is found by the next round.
const ROUNDS: usize = 8;

/// A process and the environment it was started with (`NAME=value`, NUL-separated).
pub(crate) struct Process {
    pub pid: i32,
    pub environment: Vec<u8>,
}

/// Whether `environment` (NUL-separated `NAME=value` strings) holds the mark `mark` exactly or,
/// where `prefix`, any mark that starts with it.
pub(crate) fn carries(environment: &[u8], mark: &str, prefix: bool) -> bool {
    environment.split(|&b| b == 0).any(|entry| {
        let Some(value) = entry
            .strip_prefix(MARK_VAR.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"="))
        else {
            return false;
        };
        if prefix {
            value.starts_with(mark.as_bytes())
        } else {
            value == mark.as_bytes()
        }
    })
}

/// Kills (SIGKILL) every process `list` returns that carries `mark` (exactly, or as a
/// prefix), round after round until a round finds none. This process is never killed. Returns
/// how many kills were sent.
pub(crate) fn sweep(mark: &str, prefix: bool, list: impl Fn() -> Vec<Process>) -> usize {
    let own = std::process::id() as i32;
    let mut killed = 0;
    for _ in 0..ROUNDS {
        let marked: Vec<i32> = list()
            .into_iter()
            .filter(|p| p.pid != own && p.pid > 0 && carries(&p.environment, mark, prefix))
            .map(|p| p.pid)
            .collect();
        if marked.is_empty() {
            break;
        }
        for pid in marked {
            // SAFETY: kill has no memory-safety preconditions.
            if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                killed += 1;
            }
        }
    }
    killed
}

/// The environment part of a `KERN_PROCARGS2` buffer: an `int` argc, the executable's path,
/// NUL padding, argc arguments, then the environment strings up to an empty one.
pub(crate) fn procargs2_environment(buffer: &[u8]) -> Option<&[u8]> {
    let argc = i32::from_ne_bytes(buffer.get(..4)?.try_into().ok()?);
    let mut rest = &buffer[4..];
    // The executable's path, then its padding.
    let path_end = rest.iter().position(|&b| b == 0)?;
    rest = &rest[path_end..];
    let start = rest.iter().position(|&b| b != 0)?;
    rest = &rest[start..];
    for _ in 0..argc.max(0) {
        let end = rest.iter().position(|&b| b == 0)?;
        rest = rest.get(end + 1..)?;
    }
    // The environment ends at an empty string (two NULs) or the buffer's end.
    let end = rest
        .windows(2)
        .position(|w| w == [0, 0])
        .map_or(rest.len(), |i| i + 1);
    Some(&rest[..end])
}

/// Every process of this user (every process, as root) with the environment it started with:
/// `proc_listallpids`, then `KERN_PROCARGS2` for each. Processes that end meanwhile, or
/// whose environment is not readable, are left out.
#[cfg(target_os = "macos")]
pub(crate) fn processes() -> Vec<Process> {
    // SAFETY: a NULL buffer asks for the count.
    let count = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
    if count <= 0 {
        return Vec::new();
    }
    let mut pids: Vec<libc::pid_t> = vec![0; count as usize + 64];
    let bytes = (pids.len() * std::mem::size_of::<libc::pid_t>()) as libc::c_int;
    // SAFETY: the buffer holds `bytes` bytes.
    let filled = unsafe { libc::proc_listallpids(pids.as_mut_ptr().cast(), bytes) };
    if filled <= 0 {
        return Vec::new();
    }
    pids.truncate(filled as usize);
    // SAFETY: plain getter.
    let uid = unsafe { libc::geteuid() };
    let mut argmax: libc::c_int = 0;
    let mut size = std::mem::size_of::<libc::c_int>();
    let mut mib = [libc::CTL_KERN, libc::KERN_ARGMAX];
    // SAFETY: reads one int into `argmax`.
    let ok = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            2,
            (&mut argmax as *mut libc::c_int).cast(),
            &mut size,
            std::ptr::null_mut(),
            0,
        )
    } == 0;
    let argmax = if ok && argmax > 0 {
        argmax as usize
    } else {
        1 << 20
    };
    let mut buffer = vec![0u8; argmax];
    let mut out = Vec::new();
    for pid in pids.into_iter().filter(|&pid| pid > 0) {
        // SAFETY: proc_bsdinfo is plain data, filled by proc_pidinfo.
        let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        let info_size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
        // SAFETY: the buffer is `info_size` bytes.
        let got = unsafe {
            libc::proc_pidinfo(
                pid,
                libc::PROC_PIDTBSDINFO,
                0,
                (&mut info as *mut libc::proc_bsdinfo).cast(),
                info_size,
            )
        };
        if got != info_size || (uid != 0 && info.pbi_uid != uid) {
            continue;
        }
        let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
        let mut size = buffer.len();
        // SAFETY: reads at most `size` bytes into `buffer`.
        let read = unsafe {
            libc::sysctl(
                mib.as_mut_ptr(),
                3,
                buffer.as_mut_ptr().cast(),
                &mut size,
                std::ptr::null_mut(),
                0,
            )
        };
        if read != 0 {
            continue;
        }
        if let Some(environment) = procargs2_environment(&buffer[..size.min(buffer.len())]) {
            out.push(Process {
                pid,
                environment: environment.to_vec(),
            });
        }
    }
    out
}

/// Linux's list (the tests' stand-in for `KERN_PROCARGS2`): `/proc/<pid>/environ`.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let environment = std::fs::read(entry.path().join("environ")).ok()?;
            Some(Process { pid, environment })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_matched_exactly_or_as_a_prefix_and_only_as_the_mark() {
        let env = b"PATH=/bin\0__acp_bash_mark=00ab-7\0HOME=/h\0";
        assert!(carries(env, "00ab-7", false));
        assert!(!carries(env, "00ab-70", false));
        assert!(!carries(env, "00ab-", false));
        assert!(carries(env, "00ab-", true));
        assert!(!carries(env, "00ac-", true));
        assert!(!carries(b"X__acp_bash_mark=00ab-7\0", "00ab-7", false));
        assert!(!carries(b"__acp_bash_marker=00ab-7\0", "00ab-7", false));
        assert!(!carries(b"", "", true));
    }

    #[test]
    fn the_environment_is_found_in_a_procargs2_buffer() {
        let mut buffer = 2i32.to_ne_bytes().to_vec();
        buffer.extend_from_slice(b"/bin/bash\0\0\0\0bash\0-c\0A=1\0__acp_bash_mark=s-1\0\0junk");
        assert_eq!(
            procargs2_environment(&buffer),
            Some(&b"A=1\0__acp_bash_mark=s-1\0"[..])
        );
        // No environment at all, or a buffer cut short.
        let mut bare = 1i32.to_ne_bytes().to_vec();
        bare.extend_from_slice(b"/bin/sh\0\0sh\0");
        assert_eq!(procargs2_environment(&bare), Some(&b""[..]));
        assert_eq!(procargs2_environment(&[1, 0]), None);
        let mut short = 3i32.to_ne_bytes().to_vec();
        short.extend_from_slice(b"/bin/sh\0sh\0");
        assert_eq!(procargs2_environment(&short), None);
    }

    /// For real, on Linux: a process that left the command's group and session (`setsid`)
    /// and still carries the mark is killed by the sweep; one of another run's mark is not,
    /// until the session's sweep (the prefix).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_sweep_kills_what_left_the_group_and_carries_the_mark() {
        use std::io::BufRead as _;
        use std::os::fd::AsRawFd as _;
        let session = format!("{:08x}", std::process::id());
        let start = |run: u32| {
            let (reader, writer) = std::io::pipe().unwrap();
            let mark = format!("{session}-{run}");
            let env = vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                (MARK_VAR.into(), mark.clone().into()),
            ];
            let pid = crate::sandbox::portable::spawn(
                &crate::sandbox::Launch::new(
                    "/bin/bash",
                    [
                        "-c",
                        "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!",
                    ],
                ),
                &env,
                std::path::Path::new("/"),
                writer.as_raw_fd(),
                &[],
            )
            .unwrap();
            drop(writer);
            let mut line = String::new();
            std::io::BufReader::new(reader)
                .read_line(&mut line)
                .unwrap();
            let mut status = 0;
            // SAFETY: reaping our own child (the shell, which exits at once).
            unsafe { libc::waitpid(pid, &mut status, 0) };
            (mark, line.trim().parse::<i32>().unwrap())
        };
        let alive = |pid: i32| {
            // A zombie (killed, not yet reaped by its parent, init) counts as gone.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .unwrap()
                    .trim_start()
                    .starts_with('Z')
            })
        };
        // Each escaped process has become `sleep` before a sweep looks: while a process is in
        // the middle of its exec, its environment reads empty, and a sweep that lists it then
        // misses it (as a loaded machine showed for the session's sweep).
        let exec_done = |pid: i32| {
            (0..2000).any(|_| {
                let done = std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmdline| cmdline.starts_with(b"sleep\0"));
                if !done {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                done
            })
        };
        let (mark, escaped) = start(1);
        let (_, other) = start(2);
        assert!(exec_done(escaped) && exec_done(other));
        assert!(alive(escaped) && alive(other));
        assert!(sweep(&mark, false, processes) >= 1);
        let gone = |pid: i32| {
            (0..2000).any(|_| {
                let gone = !alive(pid);
                if !gone {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                gone
            })
        };
        assert!(gone(escaped), "the escaped process outlived the sweep");
        assert!(alive(other), "another run's process was killed");
        sweep(&format!("{session}-"), true, processes);
        assert!(gone(other), "the session's sweep missed a run's process");
    }
}
