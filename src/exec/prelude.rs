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

/// The prelude's bash source.
pub const PRELUDE: &str = r#"# acp-bash prelude: records the shell's final directory for the next command.
builtin unset BASH_ENV
__acp_bash_cwd_file=${ACP_BASH_CWD_FILE-}
builtin unset ACP_BASH_CWD_FILE
__acp_bash_user_exit_trap=
__acp_bash_status() { return "$1"; }
__acp_bash_on_exit() {
  local status=$?
  [ -n "$__acp_bash_cwd_file" ] && builtin pwd -P >"$__acp_bash_cwd_file" 2>/dev/null
  if [ -n "$__acp_bash_user_exit_trap" ]; then
    __acp_bash_status "$status"
    builtin eval "$__acp_bash_user_exit_trap"
  fi
}
builtin trap __acp_bash_on_exit EXIT
# Keeps the EXIT trap chained when the script sets its own; every other use is the builtin's.
trap() {
  case "${1-}" in -l | -p | -lp | -pl) builtin trap "$@"; return ;; esac
  [ "${1-}" = -- ] && shift
  if [ "$#" -eq 1 ]; then
    case "${1^^}" in EXIT | 0 | SIGEXIT) __acp_bash_user_exit_trap=; return 0 ;; esac
    builtin trap -- "$1"
    return
  fi
  [ "$#" -eq 0 ] && { builtin trap; return; }
  local action=$1 signal others=()
  shift
  for signal in "$@"; do
    case "${signal^^}" in
      EXIT | 0 | SIGEXIT) [ "$action" = - ] && __acp_bash_user_exit_trap= || __acp_bash_user_exit_trap=$action ;;
      *) others+=("$signal") ;;
    esac
  done
  [ "${#others[@]}" -eq 0 ] || builtin trap -- "$action" "${others[@]}"
}
"#;

/// Writes the prelude into `dir` (a private directory) and returns its path.
pub fn install(dir: &Path) -> std::io::Result<PathBuf> {
    let path = dir.join("prelude.bash");
    std::fs::write(&path, PRELUDE)?;
    Ok(path)
}

/// The directory recorded in `cwd_file`, if the shell got to record one that still exists.
/// Leaves the file in place: the run removes it whatever happened.
pub fn recorded_cwd(cwd_file: &Path) -> Option<PathBuf> {
    let text = std::fs::read(cwd_file).ok()?;
    let text = text.strip_suffix(b"\n")?;
    #[cfg(unix)]
    let path = PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(text));
    #[cfg(not(unix))]
    let path = PathBuf::from(String::from_utf8_lossy(text).into_owned());
    (path.is_absolute() && path.is_dir()).then_some(path)
}
