//! The shell prelude: how the session learns where a command's shell ended up (`cd` carries over)
//! and what it exported (variables carry over, see [`super::shell_state`]), and how a script of
//! any size reaches bash. Out of every command's reach.
//!
//! bash reads the file named by `BASH_ENV` before a non-interactive script, so the prelude runs
//! without shifting the user's line numbers or touching their script. It is a sealed file from
//! the sandbox's backend ([`crate::sandbox::sealed_file`]: a sealed memfd on Linux; no one can
//! change it, not even through `/proc/<pid>/fd`) passed as fd [`PRELUDE_FD`], which the
//! prelude closes first. Its EXIT action writes its report to fd [`CWD_FD`], a file made for
//! this run alone ([`crate::sandbox::bounded_file`]: a memfd whose size is sealed), so no
//! command can move another run's directory or variables: bash's `export -p`, a NUL, then
//! `pwd -P` when the directory changed (else nothing). No NUL can be in a variable or a path,
//! so the frame survives any byte of either; a report without its NUL (the shell was killed
//! while writing), or that a command's own writes to the fd broke, changes no variable. One
//! `printf` is all the frame costs (each is ~35k instructions). bash writes `export -p` one
//! line per variable; into a file no write wakes the agent (a pipe woke it for each), and none
//! blocks: a write past [`REPORT_FILE_BYTES`] fails, so a writer that never stops holds no more
//! than that. The engine reads what was written (it ends at the fd's shared offset) once the
//! shell has exited ([`read_report`]), and keeps at most [`MAX_REPORT_BYTES`] of it.
//!
//! It chains a trap the user sets on EXIT instead of letting it replace ours; nothing it does is
//! visible in the command's output. Children do not inherit it: it unsets `BASH_ENV`.
//!
//! The one fd a command sees besides 0–2 is [`CWD_FD`] (documented in the README). A script that
//! cannot change its shell's state ([`super::stateless`]), or a run whose state is not kept, runs
//! without the prelude and the report: bash alone, with fds 0–2 only.
//!
//! Owns: the prelude text, the fds it needs, passing long scripts, reading the report.
//! Must not touch: spawning, what the state means (that is `shell_state`).

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// The fd the prelude is read from (closed by the prelude itself).
pub const PRELUDE_FD: i32 = 3;
/// The fd of a long script (closed once read).
pub const SCRIPT_FD: i32 = 4;
/// The fd on which the shell reports its final directory and exported variables: the write end
/// of a per-run pipe.
pub const CWD_FD: i32 = 63;

/// Bytes of a report the engine keeps (the rest is read and dropped, and the report refused): a
/// listing of the whole exported environment, quoted, with room for the 256 KiB of variables a
/// session carries over ([`super::shell_state::MAX_STATE_BYTES`]) and the agent's own.
pub const MAX_REPORT_BYTES: usize = 4 * 1024 * 1024;

/// The size the report file is sealed at: a write past it fails (EPERM) after writing what fits,
/// which leaves the written end past [`MAX_REPORT_BYTES`], so a report the kernel cut is always
/// seen as over the bound. Twice the bound: the kernel may refuse a whole chunk of up to a large
/// folio (2 MiB) at the end instead of writing part of it. Sparse: only what is written uses
/// memory.
pub const REPORT_FILE_BYTES: u64 = 2 * MAX_REPORT_BYTES as u64;

/// Scripts longer than this go through [`SCRIPT_FD`] instead of `bash -c`'s argument (the kernel
/// refuses one argument over 128 KiB).
const LONGEST_ARGUMENT: usize = 100 * 1024;

/// `trap` as the script sees it (eval'd by the prelude's `trap` function, with its arguments):
/// the builtin, except that an EXIT action is kept for [`EXIT_CHAIN`] instead of replacing the
/// prelude's, and listings show the script's EXIT action (or none), never the prelude's.
/// (No single quotes: it is embedded in one.)
const TRAP_WRAPPER: &str = r#"if [ "$#" -eq 0 ] || [ "$1" = -p ] || [ "$1" = -l ] || [ "$1" = -lp ] || [ "$1" = -pl ]; then
  if [ -n "${__acp_bash_user_exit_trap-}" ]; then builtin trap -- "$__acp_bash_user_exit_trap" EXIT; else builtin trap - EXIT; fi
  builtin trap "$@"
  local __acp_bash_listed=$?
  builtin trap -- "$__acp_bash_exit_action" EXIT
  return "$__acp_bash_listed"
fi
[ "$1" = -- ] && shift
if [ "$#" -eq 1 ]; then
  case "${1^^}" in EXIT | 0 | SIGEXIT) __acp_bash_user_exit_trap=; return 0 ;; esac
  builtin trap -- "$1"
  return
fi
local __acp_bash_action=$1 __acp_bash_signal __acp_bash_others=()
shift
for __acp_bash_signal in "$@"; do
  case "${__acp_bash_signal^^}" in
    EXIT | 0 | SIGEXIT) [ "$__acp_bash_action" = - ] && __acp_bash_user_exit_trap= || __acp_bash_user_exit_trap=$__acp_bash_action ;;
    *) __acp_bash_others+=("$__acp_bash_signal") ;;
  esac
done
[ "${#__acp_bash_others[@]}" -eq 0 ] || builtin trap -- "$__acp_bash_action" "${__acp_bash_others[@]}"
"#;

/// Runs the script's own EXIT action after the prelude's, with `$?` as the shell is exiting.
const EXIT_CHAIN: &str = r#"__acp_bash_return() { return "$1"; }
__acp_bash_return "$__acp_bash_status"
builtin eval "$__acp_bash_user_exit_trap"
"#;

/// The prelude's bash source. bash pays for every line it parses, in every command, so it is a
/// few commands; the trap wrapper and the exit chain are single-quoted strings (scanned, not
/// parsed) eval'd only by the commands that need them.
fn prelude_text() -> String {
    format!(
        r#"exec {PRELUDE_FD}<&-
__acp_bash_start_dir=$PWD __acp_bash_exit_action='__acp_bash_status=$?; {{ builtin export -p; builtin printf "\0"; [ "$PWD" = "$__acp_bash_start_dir" ] || builtin pwd -P; }} 2>/dev/null >&{CWD_FD}; [ -z "${{__acp_bash_user_exit_trap-}}" ] || builtin eval "$__acp_bash_exit_chain"'
__acp_bash_trap_wrapper='{TRAP_WRAPPER}' __acp_bash_exit_chain='{EXIT_CHAIN}'
builtin unset BASH_ENV
builtin trap -- "$__acp_bash_exit_action" EXIT
trap() {{ builtin eval "$__acp_bash_trap_wrapper"; }}
"#
    )
}

/// The engine's prelude, made once.
pub struct Prelude {
    file: OwnedFd,
}

impl Prelude {
    pub fn new() -> std::io::Result<Prelude> {
        Ok(Prelude {
            file: crate::sandbox::sealed_file(c"acp-bash-prelude", prelude_text().as_bytes())?,
        })
    }

    /// The prelude's fd for one run: the engine's own where opening `/dev/fd/N` reads it
    /// from the start (Linux); elsewhere (macOS) `/dev/fd/N` shares the fd's offset, which the
    /// first run would leave at the end, so each run gets a copy of its own.
    fn for_one_run(&self) -> std::io::Result<OwnedFd> {
        if crate::sandbox::DEV_FD_REOPENS {
            self.file.try_clone()
        } else {
            crate::sandbox::sealed_file(c"acp-bash-prelude", prelude_text().as_bytes())
        }
    }

    /// Everything one run of `script` needs: bash's arguments, the variables and fds to add, and
    /// the engine's fd of its report file. Without `report` (a script that cannot change its
    /// shell's state, or a run whose state is not kept: see [`super::stateless`]), bash runs the
    /// script alone: no prelude, no report, no fd but 0–2 (and a long script's, until read).
    pub fn shell(&self, script: String, report: bool) -> std::io::Result<Shell> {
        let (report, mut pass, env) = if report {
            let file = crate::sandbox::bounded_file(c"acp-bash-report", REPORT_FILE_BYTES)?;
            let pass = vec![
                (self.for_one_run()?, PRELUDE_FD),
                (file.try_clone()?, CWD_FD),
            ];
            let env = vec![("BASH_ENV".into(), format!("/dev/fd/{PRELUDE_FD}").into())];
            (Some(file), pass, env)
        } else {
            (None, Vec::new(), Vec::new())
        };
        let args: Vec<OsString> = if script.len() <= LONGEST_ARGUMENT {
            vec!["-c".into(), script.into()]
        } else {
            pass.push((
                crate::sandbox::sealed_file(c"acp-bash-script", script.as_bytes())?,
                SCRIPT_FD,
            ));
            let boot = format!(
                "__acp_bash_script=$(< /dev/fd/{SCRIPT_FD}); exec {SCRIPT_FD}<&-; builtin eval \"$__acp_bash_script\""
            );
            vec!["-c".into(), boot.into()]
        };
        Ok(Shell {
            args,
            env,
            pass,
            report,
        })
    }
}

/// One run's shell setup (see [`Prelude::shell`]).
pub struct Shell {
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub pass: Vec<(OwnedFd, i32)>,
    /// The engine's fd of the run's report file (the shell's fd [`CWD_FD`] is a dup of it: they
    /// share the offset), when the run has one.
    pub report: Option<OwnedFd>,
}

/// What the engine read of a run's report ([`read_report`]).
#[derive(Debug, Default)]
pub struct Received {
    /// The report, up to [`MAX_REPORT_BYTES`].
    pub bytes: Vec<u8>,
    /// Bytes read past [`MAX_REPORT_BYTES`] and dropped.
    pub dropped: usize,
}

impl Received {
    fn total(&self) -> usize {
        self.bytes.len() + self.dropped
    }
}

/// What was written to a run's report file `report` (see [`Prelude::shell`]): it ends at the
/// fd's offset, which every dup of the fd shares. Call once the shell has exited: what it wrote
/// is there then. Reads at most [`MAX_REPORT_BYTES`]; the rest counts as dropped.
pub fn read_report(report: &OwnedFd) -> std::io::Result<Received> {
    use std::os::fd::AsRawFd;
    // SAFETY: lseek on an fd we own; it changes nothing (SEEK_CUR by 0).
    let end = unsafe { libc::lseek(report.as_raw_fd(), 0, libc::SEEK_CUR) };
    let end = usize::try_from(end).map_err(|_| std::io::Error::last_os_error())?;
    let kept = end.min(MAX_REPORT_BYTES);
    // Not zeroed, and read through the fd itself (no dup): `pread` into the spare capacity,
    // and only what the kernel wrote is taken as set.
    let mut bytes: Vec<u8> = Vec::with_capacity(kept);
    // A writer still holding the fd may have changed the file since: what is read is what is
    // there (as a pipe gave what was in it), never more than `kept`.
    while bytes.len() < kept {
        let read = bytes.len();
        // SAFETY: reads at most `kept - read` bytes into the spare capacity of `bytes` (its
        // capacity is at least `kept`), at the file offset `read`, from an fd we own.
        let n = unsafe {
            libc::pread(
                report.as_raw_fd(),
                bytes.as_mut_ptr().add(read).cast(),
                kept - read,
                read as libc::off_t,
            )
        };
        match usize::try_from(n) {
            Ok(0) => break,
            // SAFETY: the kernel wrote these `n` bytes (n ≤ kept - read).
            Ok(n) => unsafe { bytes.set_len(read + n) },
            Err(_) => {
                let error = std::io::Error::last_os_error();
                if error.kind() != std::io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
    Ok(Received {
        bytes,
        dropped: end - kept,
    })
}

/// A run's report, taken apart.
#[derive(Debug, Default)]
pub struct Report {
    /// The directory the shell ended in, when it changed directory and that directory exists.
    pub cwd: Option<PathBuf>,
    /// The exported variables with a value; `None` when there was no report (the shell was
    /// killed before its EXIT action, or could not write), `Err` (why) when it is not one the
    /// engine can take.
    pub exported: Option<Result<std::collections::BTreeMap<String, OsString>, String>>,
}

/// Takes `received` apart: `export -p` NUL `[pwd -P]` (see the module's doc).
pub fn parse_report(received: &Received) -> Report {
    if received.total() == 0 {
        return Report::default();
    }
    let malformed = || {
        Err(
            "the shell's report was not one the prelude writes (did the command write to fd \
             63?)"
                .to_string(),
        )
    };
    let Some(nul) = received.bytes.iter().position(|&b| b == 0) else {
        let exported = if received.dropped > 0 {
            Err(format!(
                "the shell's report of its exported variables was over {} MiB",
                MAX_REPORT_BYTES / (1024 * 1024)
            ))
        } else {
            malformed()
        };
        return Report {
            cwd: None,
            exported: Some(exported),
        };
    };
    let (listing, cwd_part) = (&received.bytes[..nul], &received.bytes[nul + 1..]);
    // Nothing, or a path and its newline: anything else was not written by `pwd`.
    let cwd_whole = !cwd_part.contains(&0)
        && (cwd_part.is_empty() || (cwd_part.starts_with(b"/") && cwd_part.ends_with(b"\n")));
    let exported = if received.dropped > 0 {
        Err(format!(
            "the shell's report of its exported variables was over {} MiB",
            MAX_REPORT_BYTES / (1024 * 1024)
        ))
    } else if cwd_whole {
        super::shell_state::parse_export_listing(listing)
    } else {
        malformed()
    };
    Report {
        cwd: (cwd_whole && received.dropped == 0)
            .then(|| reported_cwd(cwd_part))
            .flatten(),
        exported: Some(exported),
    }
}

/// The directory in the report's last part (`pwd -P` and a newline; empty when the directory
/// did not change). `None` when there is none, or it no longer exists.
fn reported_cwd(text: &[u8]) -> Option<PathBuf> {
    let text = text.strip_suffix(b"\n")?;
    if text.contains(&b'\n') {
        return None; // more than one line: not the shell's own
    }
    let path = PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(text));
    (path.is_absolute() && path.is_dir()).then_some(path)
}
