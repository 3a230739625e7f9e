//! Which scripts cannot change the state their shell leaves to the session's next command (its
//! directory and exported variables), so that they may run without the prelude and its report.
//!
//! The prelude and its report cost every command about a third of a millisecond of bash's time
//! (parsing the prelude, then `export -p` one write per variable) and the agent a memory file
//! and a parse. A command such as `cargo test`, `ls -la src` or `git status | head` runs programs
//! that cannot touch their shell's variables or directory; only the shell itself can, through
//! its builtins, its expansions and its compound commands. So a script is taken as stateless
//! only when a small scanner sees none of them:
//! - no character that starts an expansion, a substitution, a comment, a group, an escape or a
//!   here-document anywhere (`$`, `` ` ``, `\`, `(`, `)`, `{`, `}`, `#`, `<<`): no `${X:=1}`, no
//!   `$((X=1))`, no `{fd}>file`, no function definition;
//! - every quote closed;
//! - the first word of each command (after `|`, `&`, `;` or a newline, which also covers `&&`,
//!   `||` and `2>&1`) is a plain word of letters, digits and `_./+:-`: no assignment
//!   (`X=1 cmd`), no redirection before the name (`>f export X=1`), no quotes or globs that could
//!   make a builtin's name (`"export"`, `expor?`), and it is neither a reserved word (`time`,
//!   `if`, `coproc`, …) nor a bash builtin other than a few that set no variable and no directory
//!   ([`HARMLESS_BUILTINS`]).
//!
//! Anything else takes the prelude, as every command did before; so does a run whose environment
//! could carry shell code (`BASH_FUNC_*` functions, `SHELLOPTS`, `BASHOPTS`): see
//! [`env_allows_stateless`]. The oracle is bash itself: `tests/it/exec/stateless.rs` runs the
//! scripts this module accepts through the full prelude and checks that the report shows no
//! change. Why: `notes/2026-12-03-stateless-commands.md`.
//!
//! Owns: the classification. Must not touch: spawning, the report.

/// Scripts longer than this are not looked at (they take the prelude): a one-line command is
/// far shorter, and the scan stays a few microseconds.
const LONGEST_SCANNED: usize = 4096;

/// Every builtin of bash 5.2 (`compgen -b`). A test checks the machine's bash has no other.
pub const BASH_BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

/// The builtins that set no variable and no directory, whatever their arguments. (Not `printf`:
/// `-v` sets one; not `wait`: `-p` does; not `pwd`: it may set `PWD`.)
pub const HARMLESS_BUILTINS: &[&str] = &[
    ":", "true", "false", "echo", "test", "exit", "kill", "type", "times", "help", "ulimit",
    "umask", "hash", "jobs",
];

/// bash 5.2's reserved words (`compgen -k`) that are plain words (the others, `{`, `}`, `!`, `[[`
/// and `]]`, are not, so they never pass as a first word).
pub const RESERVED_WORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "in", "function", "time", "coproc",
];

/// Whether `script` provably leaves its shell's directory and variables as they were (see the
/// module's doc). `false` means only "not shown": such a script takes the prelude.
pub fn cannot_change_state(script: &str) -> bool {
    let bytes = script.as_bytes();
    if bytes.len() > LONGEST_SCANNED
        || bytes
            .iter()
            .any(|b| matches!(b, b'$' | b'`' | b'\\' | b'(' | b')' | b'{' | b'}' | b'#'))
        || script.contains("<<")
    {
        return false;
    }
    let ends_word = |b: u8| matches!(b, b' ' | b'\t' | b'|' | b'&' | b';' | b'\n');
    let mut command_starts = true;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' => {
                i += 1;
                continue;
            }
            b'|' | b'&' | b';' | b'\n' => {
                command_starts = true;
                i += 1;
                continue;
            }
            _ => {}
        }
        let start = i;
        while i < bytes.len() && !ends_word(bytes[i]) {
            let quote = bytes[i];
            i += 1;
            if quote == b'\'' || quote == b'"' {
                match bytes[i..].iter().position(|&b| b == quote) {
                    Some(at) => i += at + 1,
                    None => return false,
                }
            }
        }
        if command_starts {
            // A quote in it fails the name's check: no `"export"`, no `e'x'port`.
            if !is_harmless_command_name(&script[start..i]) {
                return false;
            }
            command_starts = false;
        }
    }
    true
}

/// A plain word that names no reserved word and no builtin but a harmless one.
fn is_harmless_command_name(word: &str) -> bool {
    word.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_./+:-".contains(&b))
        && !RESERVED_WORDS.contains(&word)
        && (!BASH_BUILTINS.contains(&word) || HARMLESS_BUILTINS.contains(&word))
}

/// Whether a run's environment lets a stateless script stay so: no exported function (bash
/// imports `BASH_FUNC_name%%`, and a function such as an HPC `module` exports variables in the
/// shell itself) and no shell options from the environment (`SHELLOPTS`, `BASHOPTS`: `xtrace`
/// expands `PS4`, which may assign).
pub fn env_allows_stateless<'a>(mut names: impl Iterator<Item = &'a std::ffi::OsStr>) -> bool {
    names.all(|name| {
        let name = name.as_encoded_bytes();
        !name.starts_with(b"BASH_FUNC_") && name != b"SHELLOPTS" && name != b"BASHOPTS"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everyday_commands_are_stateless() {
        for script in [
            "true",
            "",
            "   ",
            "ls -la src",
            "cargo test --locked --features=cli",
            "git log --format=%H -n 3 | head -1",
            "cargo build && cargo test || echo failed",
            "grep -rn 'export X=1' src; echo done",
            "echo \"a b\" > out.txt 2>&1",
            "sleep 1 &",
            "./configure --prefix=/usr/local",
            "g++ -O2 main.cc -o main",
            "exit 3",
        ] {
            assert!(
                cannot_change_state(script),
                "{script:?} should be stateless"
            );
        }
    }

    #[test]
    fn anything_that_may_change_the_shell_is_not() {
        for script in [
            "export X=1",
            "cd /tmp",
            "X=1",
            "X=1 true",
            "true; export X=1",
            "true && cd /",
            "true || unset HOME",
            "true | read X",
            "true & declare -x X=1",
            "true\nexport X=1",
            "\"export\" X=1",
            "e'x'port X=1",
            "expor? X=1",
            "expor* X=1",
            ">/dev/null export X=1",
            "2>x export X=1",
            "time export X=1",
            "! export X=1",
            "if true; then export X=1; fi",
            "for X in 1; do true; done",
            "coproc true",
            "echo ${X:=1}",
            "echo $((X=1))",
            "echo `export X=1`",
            "ls {fd}>x",
            "f() { export X=1; }; f",
            "source .venv/bin/activate",
            ". ./env.sh",
            "eval export X=1",
            "builtin export X=1",
            "command export X=1",
            "exec bash",
            "printf -v X 1",
            "wait -p X",
            "read X < file",
            "mapfile X < file",
            "set -a",
            "shopt -s expand_aliases",
            "trap 'export X=1' EXIT",
            "enable -f x.so f",
            "pushd /tmp",
            "popd",
            "pwd",
            "echo 'unclosed",
            "echo \\",
            "true # export X=1",
            "cat <<EOF\nx\nEOF",
            "cat <<<word",
            "[[ -n x ]]",
            "[ -n x ]",
            "{ export X=1; }",
            "(export X=1)",
            "lét X=1",
        ] {
            assert!(
                !cannot_change_state(script),
                "{script:?} should take the prelude"
            );
        }
        assert!(!cannot_change_state(&"true ".repeat(LONGEST_SCANNED)));
    }

    #[test]
    fn the_scan_takes_scripts_up_to_its_limit_and_no_longer() {
        let longest = format!("true{}", " ".repeat(LONGEST_SCANNED - 4));
        assert_eq!(longest.len(), LONGEST_SCANNED);
        assert!(cannot_change_state(&longest));
        assert!(!cannot_change_state(&format!("{longest} ")));
    }

    #[test]
    fn an_environment_with_functions_or_shell_options_takes_the_prelude() {
        use std::ffi::OsStr;
        let names = |list: &'static [&'static str]| list.iter().map(OsStr::new);
        assert!(env_allows_stateless(names(&["PATH", "HOME", "BASH_FUNCX"])));
        assert!(!env_allows_stateless(names(&[
            "PATH",
            "BASH_FUNC_module%%"
        ])));
        assert!(!env_allows_stateless(names(&["SHELLOPTS"])));
        assert!(!env_allows_stateless(names(&["BASHOPTS"])));
    }
}
