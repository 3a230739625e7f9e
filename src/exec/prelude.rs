//! The shell prelude: how the session learns where a command's shell ended up (`cd` carries over).
//!
//! bash reads the file named by `BASH_ENV` before a non-interactive script, so the prelude runs
//! without shifting the user's line numbers or touching their script. It records `pwd -P` into a
//! private file from an EXIT trap, and chains a trap the user sets on EXIT instead of letting it
//! replace ours. Nothing it does is visible in the command's output. Children do not inherit it:
//! it unsets `BASH_ENV` and the variable naming the file.
//!
//! Owns: the prelude text and reading the recorded directory back. Must not touch: spawning.

use std::path::{Path, PathBuf};

/// The environment variable that passes the private cwd file's path to the prelude.
pub const CWD_FILE_VAR: &str = "ACP_BASH_CWD_FILE";

/// The prelude's bash source (what `BASH_ENV` names). bash pays for every line it parses, in
/// every command (about 0.1 ms per 300k instructions here), so the prelude is a few commands and
/// no comments. Its EXIT action writes `pwd -P` only when the shell's directory changed: no file
/// means "where it started". The trap wrapper and the chaining of a user's EXIT trap live in files
/// of their own ([`TRAP_WRAPPER`], [`EXIT_CHAIN`]), read only by the commands that need them.
pub const PRELUDE: &str = r#"__acp_bash_cwd_file=$ACP_BASH_CWD_FILE __acp_bash_start_dir=$PWD __acp_bash_exit_action='__acp_bash_status=$?; [ "$PWD" = "$__acp_bash_start_dir" ] || builtin pwd -P >"$__acp_bash_cwd_file" 2>/dev/null; [ -z "${__acp_bash_user_exit_trap-}" ] || builtin source "${__acp_bash_cwd_file%/*}/exit-chain.bash"'
builtin unset BASH_ENV ACP_BASH_CWD_FILE
builtin trap -- "$__acp_bash_exit_action" EXIT
trap() { builtin source "${__acp_bash_cwd_file%/*}/trap-wrapper.bash" "$@"; }
"#;

/// `trap` as the script sees it (sourced by the prelude's `trap` function, with its arguments):
/// the builtin, except that an EXIT action is kept for [`EXIT_CHAIN`] instead of replacing the
/// prelude's, and listings show the script's EXIT action (or none), never the prelude's.
pub const TRAP_WRAPPER: &str = r#"if [ "$#" -eq 0 ] || [ "$1" = -p ] || [ "$1" = -l ] || [ "$1" = -lp ] || [ "$1" = -pl ]; then
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
pub const EXIT_CHAIN: &str = r#"__acp_bash_return() { return "$1"; }
__acp_bash_return "$__acp_bash_status"
builtin eval "$__acp_bash_user_exit_trap"
"#;

/// Writes the prelude and the files it sources into `dir` (a private directory, which also holds
/// the cwd files: the prelude finds its files next to the cwd file) and returns the prelude's path.
pub fn install(dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::write(dir.join("trap-wrapper.bash"), TRAP_WRAPPER)?;
    std::fs::write(dir.join("exit-chain.bash"), EXIT_CHAIN)?;
    let path = dir.join("prelude.bash");
    std::fs::write(&path, PRELUDE)?;
    Ok(path)
}

/// Takes the directory the shell recorded in `cwd_file` (it records one only when its directory
/// changed), removing the file. `None` when there is none, or it no longer exists.
pub fn take_recorded_cwd(cwd_file: &Path) -> Option<PathBuf> {
    let text = std::fs::read(cwd_file).ok()?;
    let _ = std::fs::remove_file(cwd_file);
    let text = text.strip_suffix(b"\n")?;
    #[cfg(unix)]
    let path = PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(text));
    #[cfg(not(unix))]
    let path = PathBuf::from(String::from_utf8_lossy(text).into_owned());
    (path.is_absolute() && path.is_dir()).then_some(path)
}
