//! The shell state that carries over from one command of a session to the next, besides the
//! directory: exported variables (set, changed or `unset`, including what
//! `source .venv/bin/activate` sets) and the previous directory that `cd -` goes to.
//!
//! The prelude's EXIT action reports bash's `export -p` on the run's private pipe
//! (see the `prelude` module); [`parse_export_listing`] reads it. A run changes the session's state
//! by what changed between its start and its end, name by name, so of two overlapping runs each
//! keeps its own changes (the last to end wins a name both changed), as with `cd`.
//!
//! What is kept is the difference from the engine's environment ([`ShellState::vars`]): a later
//! agent process that restores a session applies it over its own environment, and no variable of
//! the agent's reaches the session record unless a command changed it.
//!
//! Never captured (the engine owns them): the names in [`ENGINE_OWNED`], the engine's set-list
//! ([`super::env::ALWAYS_SET`] and the policy's), a run's own `env_set` and `env_keep` names, names
//! that are not shell identifiers, and any value equal to one the scrub removed from the agent's
//! environment. The exact rule and why: `notes/2026-12-01-shell-state.md`.
//!
//! Owns: the state's shape and bounds, the rule of owned names, parsing the listing, applying a
//! run's changes. Must not touch: the pipe, spawning.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// Bytes the session's carried-over variables may hold in all (names and values).
pub const MAX_STATE_BYTES: usize = 256 * 1024;

/// Bytes one carried-over variable may hold (`NAME=value`): the kernel refuses to start a program
/// with one environment string of 128 KiB or more (`MAX_ARG_STRLEN`, its NUL included), so a
/// larger one would make every later command of the session fail to start.
pub const MAX_VAR_BYTES: usize = 128 * 1024 - 1;

/// Names the engine sets or handles itself, never taken from a command as the session's state:
/// - `BASH_ENV`: the prelude's own file.
/// - `PWD`, `OLDPWD`: the directory carries over through its own report, the previous directory
///   as [`ShellState::previous_dir`] (the agent's own `OLDPWD` never reaches a command).
/// - `SHLVL`, `_`: bash sets them in every shell.
/// - `TMPDIR`: where temp files go is the sandbox's (a session's own temp folder is per mode).
/// - `SHELLOPTS`, `BASHOPTS`: exported, they would carry shell options over, which are not
///   state that carries over (a script's `set -e` is its own).
pub const ENGINE_OWNED: &[&str] = &[
    "BASH_ENV",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "TMPDIR",
    "SHELLOPTS",
    "BASHOPTS",
];

/// The prefix of the prelude's own shell variables.
const PRELUDE_PREFIX: &str = "__acp_bash_";

/// The shell state a session's next command starts with, besides its directory.
///
/// Made by the session's runs, read with [`Session::shell_state`](super::Session::shell_state),
/// restored with [`Session::restore_shell_state`](super::Session::restore_shell_state). The same
/// in every sandbox mode: it is the shell's state, not the sandbox's.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ShellState {
    /// Exported variables that differ from the engine's environment: `Some(value)` set to that
    /// value, `None` unset (a variable of the engine's environment a command removed).
    pub vars: BTreeMap<String, Option<OsString>>,
    /// The previous directory (`$OLDPWD`, where `cd -` goes), once a command has left one.
    pub previous_dir: Option<PathBuf>,
}

impl ShellState {
    /// No variable changed and no previous directory.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty() && self.previous_dir.is_none()
    }

    /// Bytes its variables hold in the environment (`NAME=value` each).
    pub fn bytes(&self) -> usize {
        self.vars
            .iter()
            .map(|(name, value)| name.len() + value.as_ref().map_or(0, |v| v.len() + 1))
            .sum()
    }
}

/// Whether `name` is a shell identifier (`[A-Za-z_][A-Za-z0-9_]*`): the only names bash lists,
/// and so the only ones a command can change.
pub fn is_identifier(name: &[u8]) -> bool {
    matches!(name.first(), Some(c) if c.is_ascii_alphabetic() || *c == b'_')
        && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// The names one run never captures: [`ENGINE_OWNED`], the prelude's, the engine's set-list and
/// the run's own `env_set` and `env_keep` names.
pub(super) struct Owned<'a> {
    pub(super) set_list: Vec<&'a str>,
    pub(super) per_run: Vec<&'a str>,
}

impl Owned<'_> {
    pub(super) fn contains(&self, name: &str) -> bool {
        ENGINE_OWNED.contains(&name)
            || name.starts_with(PRELUDE_PREFIX)
            || self.set_list.contains(&name)
            || self.per_run.contains(&name)
    }
}

/// The variables of `env` a command could change: shell identifiers the engine does not own.
pub(super) fn changeable(
    env: &[(OsString, OsString)],
    owned: &Owned<'_>,
) -> BTreeMap<String, OsString> {
    env.iter()
        .filter_map(|(name, value)| {
            let name = name.to_str()?;
            (is_identifier(name.as_bytes()) && !owned.contains(name))
                .then(|| (name.to_string(), value.clone()))
        })
        .collect()
}

/// What a run's end does to the session's state.
pub(super) struct Changes {
    /// Each variable that changed between the run's start and end: `None` unset.
    pub(super) vars: Vec<(String, Option<OsString>)>,
    /// Names whose new value is one the scrub removed from the agent's environment (not kept).
    pub(super) scrubbed: Vec<String>,
}

/// The changes between `start` and `end` (both from [`changeable`]), leaving out new values that
/// are one of `scrubbed_values`.
pub(super) fn changes(
    start: &BTreeMap<String, OsString>,
    end: &BTreeMap<String, OsString>,
    scrubbed_values: &[&OsStr],
) -> Changes {
    let mut changes = Changes {
        vars: Vec::new(),
        scrubbed: Vec::new(),
    };
    for name in start
        .keys()
        .chain(end.keys().filter(|n| !start.contains_key(*n)))
    {
        let (before, after) = (start.get(name), end.get(name));
        if before == after {
            continue;
        }
        if after.is_some_and(|value| scrubbed_values.contains(&value.as_os_str())) {
            changes.scrubbed.push(name.clone());
            continue;
        }
        changes.vars.push((name.clone(), after.cloned()));
    }
    changes
}

/// Why a run's variables were not kept: one is over [`MAX_VAR_BYTES`], or all are over
/// [`MAX_STATE_BYTES`].
pub(super) fn over_bound(state: &ShellState) -> Option<String> {
    if let Some((name, value)) = state.vars.iter().find(|(name, value)| {
        name.len() + 1 + value.as_ref().map_or(0, |v| v.len()) > MAX_VAR_BYTES
    }) {
        let bytes = name.len() + 1 + value.as_ref().map_or(0, |v| v.len());
        return Some(format!(
            "the exported variable {name} holds {bytes} bytes, over the {} KiB one variable may \
             hold (the kernel would refuse to start any command with it)",
            (MAX_VAR_BYTES + 1) / 1024
        ));
    }
    let bytes = state.bytes();
    (bytes > MAX_STATE_BYTES).then(|| {
        format!(
            "the exported variables that differ from the agent's environment hold {bytes} bytes, \
             over the {} KiB acp-bash carries over",
            MAX_STATE_BYTES / 1024
        )
    })
}

/// The exported variables with a value in bash's `export -p` listing (either form: `declare -x
/// NAME="value"`, or `export NAME="value"` in POSIX mode), by name. Arrays, name references and
/// variables without a value are left out: bash passes none of them to a program it starts.
///
/// Every byte of a value survives: bash quotes values with `"…"` or `$'…'`, and the parser reads
/// those, `'…'` and bare words, across lines too (older bash quotes newlines literally). Anything
/// else is an error: a listing that is not bash's is not taken at all.
pub fn parse_export_listing(listing: &[u8]) -> Result<BTreeMap<String, OsString>, String> {
    let mut vars = BTreeMap::new();
    let mut parser = Parser {
        text: listing,
        at: 0,
    };
    while !parser.done() {
        // Counted only for the message: counting before every entry made parsing quadratic
        // (about 100 instructions per byte of a 5 KB listing, in every command).
        let start = parser.at;
        let entry = parser.entry().map_err(|why| {
            let line = 1 + listing[..start].iter().filter(|&&c| c == b'\n').count();
            format!("line {line} of the listing: {why}")
        })?;
        if let Some((name, value)) = entry {
            vars.insert(name, OsString::from_vec(value));
        }
    }
    Ok(vars)
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    fn done(&self) -> bool {
        self.at >= self.text.len()
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn eat(&mut self, expected: &[u8]) -> bool {
        let found = self.text[self.at..].starts_with(expected);
        if found {
            self.at += expected.len();
        }
        found
    }

    /// A bare run of bytes other than space and newline.
    fn word(&mut self) -> &'a [u8] {
        let start = self.at;
        while matches!(self.peek(), Some(c) if c != b' ' && c != b'\n' && c != b'=') {
            self.at += 1;
        }
        &self.text[start..self.at]
    }

    /// One line (or more, when quotes span lines): `(declare|export) [-flags] NAME[=VALUE]\n`.
    fn entry(&mut self) -> Result<Option<(String, Vec<u8>)>, String> {
        if !(self.eat(b"declare ") || self.eat(b"export ")) {
            return Err("expected `declare ` or `export `".into());
        }
        let mut flags: &[u8] = b"";
        if self.peek() == Some(b'-') {
            flags = self.word();
            if flags.len() < 2 || !flags[1..].iter().all(u8::is_ascii_alphabetic) {
                return Err("expected attribute flags after `-`".into());
            }
            if !self.eat(b" ") {
                return Err("expected a space after the flags".into());
            }
        }
        let name = self.word().to_vec();
        if !is_identifier(&name) {
            return Err("expected a variable name".into());
        }
        let name = String::from_utf8(name).expect("an identifier is ASCII");
        let value = if self.eat(b"=") {
            if self.peek() == Some(b'(') {
                self.skip_compound()?;
                None
            } else {
                Some(self.value()?)
            }
        } else {
            None
        };
        if !self.eat(b"\n") {
            return Err(format!("expected the end of the line after {name}"));
        }
        let scalar = !flags.iter().any(|f| matches!(f, b'a' | b'A' | b'n' | b'f'));
        Ok(value.filter(|_| scalar).map(|value| (name, value)))
    }

    /// A shell word up to an unquoted newline: quoted and bare parts, joined.
    fn value(&mut self) -> Result<Vec<u8>, String> {
        let mut value = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\n') => return Ok(value),
                Some(b' ') => return Err("an unquoted space in a value".into()),
                Some(b'"') => {
                    self.at += 1;
                    self.double_quoted(&mut value)?;
                }
                Some(b'\'') => {
                    self.at += 1;
                    let end = self.text[self.at..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .ok_or("an unterminated '…' string")?;
                    value.extend_from_slice(&self.text[self.at..self.at + end]);
                    self.at += end + 1;
                }
                Some(b'$') if self.text.get(self.at + 1) == Some(&b'\'') => {
                    self.at += 2;
                    self.ansi_c_quoted(&mut value)?;
                }
                Some(b'\\') => {
                    let next = *self.text.get(self.at + 1).ok_or("a trailing backslash")?;
                    value.push(next);
                    self.at += 2;
                }
                Some(c) => {
                    value.push(c);
                    self.at += 1;
                }
            }
        }
    }

    /// The rest of a `"…"` string: `\` escapes `"`, `\`, `$`, `` ` `` and newline (which it
    /// removes), and stands for itself before anything else.
    fn double_quoted(&mut self, value: &mut Vec<u8>) -> Result<(), String> {
        loop {
            match self.peek().ok_or("an unterminated \"…\" string")? {
                b'"' => {
                    self.at += 1;
                    return Ok(());
                }
                b'\\' => {
                    let next = *self
                        .text
                        .get(self.at + 1)
                        .ok_or("an unterminated \"…\" string")?;
                    match next {
                        b'"' | b'\\' | b'$' | b'`' => value.push(next),
                        b'\n' => {}
                        _ => value.extend_from_slice(&[b'\\', next]),
                    }
                    self.at += 2;
                }
                _ => {
                    // The plain bytes up to the next quote or backslash, at once.
                    let rest = &self.text[self.at..];
                    let plain = rest
                        .iter()
                        .position(|&c| c == b'"' || c == b'\\')
                        .unwrap_or(rest.len());
                    value.extend_from_slice(&rest[..plain]);
                    self.at += plain;
                }
            }
        }
    }

    /// The rest of a `$'…'` string, with bash's escapes.
    fn ansi_c_quoted(&mut self, value: &mut Vec<u8>) -> Result<(), String> {
        const UNTERMINATED: &str = "an unterminated $'…' string";
        loop {
            let c = self.peek().ok_or(UNTERMINATED)?;
            self.at += 1;
            if c == b'\'' {
                return Ok(());
            }
            if c != b'\\' {
                value.push(c);
                continue;
            }
            let e = self.peek().ok_or(UNTERMINATED)?;
            self.at += 1;
            let simple = match e {
                b'a' => Some(0x07),
                b'b' => Some(0x08),
                b'e' | b'E' => Some(0x1b),
                b'f' => Some(0x0c),
                b'n' => Some(b'\n'),
                b'r' => Some(b'\r'),
                b't' => Some(b'\t'),
                b'v' => Some(0x0b),
                b'\\' | b'\'' | b'"' | b'?' => Some(e),
                _ => None,
            };
            if let Some(byte) = simple {
                value.push(byte);
                continue;
            }
            match e {
                b'0'..=b'7' => {
                    let mut n = u32::from(e - b'0');
                    for _ in 0..2 {
                        match self.peek() {
                            Some(d @ b'0'..=b'7') => {
                                n = n * 8 + u32::from(d - b'0');
                                self.at += 1;
                            }
                            _ => break,
                        }
                    }
                    value.push(n as u8);
                }
                b'x' => {
                    let n = self.hex(2);
                    match n {
                        Some(n) => value.push(n as u8),
                        None => value.extend_from_slice(b"\\x"),
                    }
                }
                b'u' | b'U' => {
                    let n = self.hex(if e == b'u' { 4 } else { 8 });
                    match n.and_then(char::from_u32) {
                        Some(ch) => {
                            value.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                        }
                        None => return Err("a \\u escape that is not a character".into()),
                    }
                }
                b'c' => {
                    let x = self.peek().ok_or(UNTERMINATED)?;
                    self.at += 1;
                    value.push(x.to_ascii_uppercase() & 0x1f);
                }
                _ => value.extend_from_slice(&[b'\\', e]),
            }
        }
    }

    /// Up to `most` hex digits; `None` when there is none.
    fn hex(&mut self, most: usize) -> Option<u32> {
        let mut n = None;
        for _ in 0..most {
            let digit = self.peek().and_then(|c| (c as char).to_digit(16));
            let Some(digit) = digit else { break };
            n = Some(n.unwrap_or(0) * 16 + digit);
            self.at += 1;
        }
        n
    }

    /// An array's `(…)`, skipped: to its closing parenthesis outside quotes.
    fn skip_compound(&mut self) -> Result<(), String> {
        self.at += 1;
        let mut sink = Vec::new();
        loop {
            match self.peek().ok_or("an unterminated (…) array")? {
                b')' => {
                    self.at += 1;
                    return Ok(());
                }
                b'"' => {
                    self.at += 1;
                    self.double_quoted(&mut sink)?;
                }
                b'\'' => {
                    self.at += 1;
                    let end = self.text[self.at..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .ok_or("an unterminated '…' string")?;
                    self.at += end + 1;
                }
                b'$' if self.text.get(self.at + 1) == Some(&b'\'') => {
                    self.at += 2;
                    self.ansi_c_quoted(&mut sink)?;
                }
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(listing: &[u8]) -> Vec<(String, Vec<u8>)> {
        parse_export_listing(listing)
            .unwrap()
            .into_iter()
            .map(|(n, v)| (n, v.into_vec()))
            .collect()
    }

    #[test]
    fn bash_quoting_of_every_kind_is_read_back_byte_for_byte() {
        let listing = b"declare -x A=\"plain\"\n\
declare -x B=$'a\\nb\"c$d`e\\\\f\\'g'\n\
declare -x C=$'\\001\\177\\377\\E\\t\\x41\\u00e9\\cA'\n\
declare -rx D=\"q\\\"z \\$x \\`y\\` \\\\ \\n\"\n\
export E='single'bare\\ x\n\
declare -x F\n\
declare -ax G=([0]=$'a\\nb' [1]=\"x )y\")\n\
declare -Ax H=([$'k\\n']=\"v\" )\n\
declare -nx I=\"G\"\n\
declare -x J=\"multi\nline\"\n\
declare -x K=\"\"\n";
        assert_eq!(
            parsed(listing),
            [
                ("A".into(), b"plain".to_vec()),
                ("B".into(), b"a\nb\"c$d`e\\f'g".to_vec()),
                ("C".into(), b"\x01\x7f\xff\x1b\tA\xc3\xa9\x01".to_vec()),
                ("D".into(), b"q\"z $x `y` \\ \\n".to_vec()),
                ("E".into(), b"singlebare x".to_vec()),
                ("J".into(), b"multi\nline".to_vec()),
                ("K".into(), b"".to_vec()),
            ]
        );
    }

    #[test]
    fn anything_but_a_listing_is_refused() {
        for garbage in [
            &b"hello\n"[..],
            b"declare -x A=\"unterminated\n",
            b"declare -x A=$'x\n",
            b"declare -x 1A=\"x\"\n",
            b"declare -x A=\"x\" B=\"y\"\n",
            b"declare -x A=\"x\"",
            b"declare -x A=x y\n",
            b"declare -1 A=\"x\"\n",
            b"declare -x A=(unterminated\n",
        ] {
            assert!(
                parse_export_listing(garbage).is_err(),
                "{:?}",
                String::from_utf8_lossy(garbage)
            );
        }
        assert!(parse_export_listing(b"").unwrap().is_empty());
    }

    #[test]
    fn changes_are_name_by_name_and_skip_scrubbed_values() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, OsString> {
            pairs
                .iter()
                .map(|(n, v)| (n.to_string(), OsString::from(v)))
                .collect()
        };
        let start = map(&[("KEEP", "1"), ("GONE", "2"), ("CHANGED", "3")]);
        let end = map(&[
            ("KEEP", "1"),
            ("CHANGED", "4"),
            ("NEW", "5"),
            ("LEAK", "s3cret"),
        ]);
        let found = changes(&start, &end, &[OsStr::new("s3cret")]);
        assert_eq!(
            found.vars,
            [
                ("CHANGED".to_string(), Some(OsString::from("4"))),
                ("GONE".to_string(), None),
                ("NEW".to_string(), Some(OsString::from("5"))),
            ]
        );
        assert_eq!(found.scrubbed, ["LEAK"]);
    }

    #[test]
    fn owned_names_and_non_identifiers_are_not_changeable() {
        let owned = Owned {
            set_list: vec!["PAGER"],
            per_run: vec!["ONE_OFF"],
        };
        let env: Vec<(OsString, OsString)> = [
            "PATH",
            "PWD",
            "OLDPWD",
            "SHLVL",
            "_",
            "BASH_ENV",
            "PAGER",
            "ONE_OFF",
            "a.b",
            "BASH_FUNC_f%%",
            "__acp_bash_x",
            "TMPDIR",
            "SHELLOPTS",
            "MY_VAR",
        ]
        .iter()
        .map(|n| (OsString::from(n), OsString::from("v")))
        .collect();
        let names: Vec<_> = changeable(&env, &owned).into_keys().collect();
        assert_eq!(names, ["MY_VAR", "PATH"]);
    }

    #[test]
    fn bounds_name_the_variable_or_the_total() {
        let mut state = ShellState::default();
        state.vars.insert(
            "BIG".into(),
            Some(OsString::from("x".repeat(MAX_VAR_BYTES))),
        );
        assert!(over_bound(&state).unwrap().contains("BIG holds"));
        let mut state = ShellState::default();
        for n in 0..3 {
            state.vars.insert(
                format!("V{n}"),
                Some(OsString::from("x".repeat(100 * 1024))),
            );
        }
        assert!(over_bound(&state).unwrap().contains("256 KiB"));
        state.vars.remove("V2");
        assert_eq!(over_bound(&state), None);
    }
}
