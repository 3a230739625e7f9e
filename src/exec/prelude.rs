//! The shell prelude: how the session learns where a command's shell ended up (`cd` carries over),
//! and how a script of any size reaches bash. Out of every command's reach.
//!
//! bash reads the file named by `BASH_ENV` before a non-interactive script, so the prelude runs
//! without shifting the user's line numbers or touching their script. It is a sealed file from
//! the sandbox's backend ([`crate::sandbox::sealed_file`]: a sealed memfd on Linux; no one can
//! change it, not even through `/proc/<pid>/fd`) passed as fd [`PRELUDE_FD`], which the
//! prelude closes first. Its EXIT action writes `pwd -P` to fd [`CWD_FD`], the write end of a
//! pipe made for this run alone, so no command can move another run's directory. It chains a
//! trap the user sets on EXIT instead of letting it replace ours; nothing it does is visible in
//! the command's output. Children do not inherit it: it unsets `BASH_ENV`.
//!
//! The one fd a command sees besides 0–2 is [`CWD_FD`] (documented in the README).
//!
//! Owns: the prelude text, the fds it needs, passing long scripts, reading the reported cwd.
//! Must not touch: spawning.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

/// The fd the prelude is read from (closed by the prelude itself).
pub const PRELUDE_FD: i32 = 3;
/// The fd of a long script (closed once read).
pub const SCRIPT_FD: i32 = 4;
/// The fd on which the shell reports its final directory: the write end of a per-run pipe.
pub const CWD_FD: i32 = 63;

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
__acp_bash_start_dir=$PWD __acp_bash_exit_action='__acp_bash_status=$?; [ "$PWD" = "$__acp_bash_start_dir" ] || builtin pwd -P >&{CWD_FD} 2>/dev/null; [ -z "${{__acp_bash_user_exit_trap-}}" ] || builtin eval "$__acp_bash_exit_chain"'
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

    /// Everything one run of `script` needs: bash's arguments, the variables and fds to add, and
    /// the read end of its cwd pipe.
    pub fn shell(&self, script: String) -> std::io::Result<Shell> {
        let (cwd_read, cwd_write) = std::io::pipe()?;
        let cwd_read = OwnedFd::from(cwd_read);
        // SAFETY: fcntl on our fd; the parent reads only what is there when the shell is gone.
        unsafe {
            libc::fcntl(cwd_read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
        }
        let mut pass = vec![
            (self.file.try_clone()?, PRELUDE_FD),
            (OwnedFd::from(cwd_write), CWD_FD),
        ];
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
            env: vec![("BASH_ENV".into(), format!("/dev/fd/{PRELUDE_FD}").into())],
            pass,
            cwd_report: cwd_read,
        })
    }
}

/// One run's shell setup (see [`Prelude::shell`]).
pub struct Shell {
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub pass: Vec<(OwnedFd, i32)>,
    pub cwd_report: OwnedFd,
}

/// The directory the shell reported on its cwd pipe (it reports one only when its directory
/// changed). `None` when there is none, or it no longer exists. Call once the shell has exited.
pub fn reported_cwd(cwd_report: &OwnedFd) -> Option<PathBuf> {
    let mut buf = [0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: a non-blocking read into our buffer.
    let n = unsafe { libc::read(cwd_report.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 {
        return None;
    }
    let text = buf[..n as usize].strip_suffix(b"\n")?;
    if text.contains(&b'\n') {
        return None; // more than one report: not the shell's own
    }
    let path = PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(text));
    (path.is_absolute() && path.is_dir()).then_some(path)
}
