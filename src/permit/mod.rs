//! Asking instead of failing: what the sandbox refused a command, and what the user allowed.
//!
//! Owns: recognising a refusal in a finished run ([`refusal_of`]: a host the network allowlist
//! refused, from the proxy's own record; a write outside the writable places, from the
//! command's `EROFS`/`EACCES` errors AND a check that the path it names is really outside them;
//! the network in read-only mode), the question it becomes ([`Ask`], with its options), the
//! user's answer ([`Answer`]), the session's grants ([`SessionPermits`]: hosts, and commands
//! starting with a prefix) and the ones kept for good ([`AlwaysFile`]). Must not touch: ACP
//! (the bridge sends the question as `session/request_permission`), running commands (the
//! turn re-runs one), the proxy (it reads the grants it is handed).
//!
//! A command's output never becomes a question by itself: a host comes only from the proxy's
//! record, and a path from the output is asked about only when it is outside the writable
//! places; the question is the agent's own request on its own connection, and its answer comes
//! only from the client (`notes/2026-12-06-permission-requests.md`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::exec::{RunOutcome, Session};
use crate::netproxy::{Grants, HostPattern};
use crate::sandbox::Mode;

/// What the sandbox refused a command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Workspace mode's network allowlist refused this host (the proxy's record).
    Host {
        /// The host, as the command asked for it.
        host: String,
    },
    /// A write to this path, outside the writable places of the mode.
    Write {
        /// The path the command's error named (absolute).
        path: PathBuf,
        /// The mode that refused it.
        mode: Mode,
    },
    /// Read-only mode has no network, and the command needed it.
    Network,
}

impl Refusal {
    /// What was refused and why, in one sentence.
    pub fn what(&self) -> String {
        match self {
            Refusal::Host { host } => format!(
                "the network allowlist refused {host}: it is not one of the hosts workspace \
                 mode lets commands reach"
            ),
            Refusal::Write { path, mode } => format!(
                "the sandbox refused a write to {}: it is outside the places {} mode lets \
                 commands change",
                path.display(),
                mode.id()
            ),
            Refusal::Network => {
                "read-only mode has no network, and the command could not reach one".into()
            }
        }
    }

    /// The mode a re-run gets for a write or the network (`None` for a host: the same mode,
    /// with the host allowed).
    pub fn mode_that_allows(&self) -> Option<Mode> {
        match self {
            Refusal::Host { .. } => None,
            Refusal::Write { .. } => Some(Mode::Full),
            Refusal::Network => Some(Mode::Workspace),
        }
    }

    /// For a write: the folder an "allow once" re-run may write too (in the same mode, with
    /// everything else as it was: masks still over it, nothing else writable), the nearest
    /// existing folder that holds the path; `None` for a host or the network, and where that
    /// folder would be `/` (then "allow once" is not offered).
    pub fn once_writable(&self) -> Option<PathBuf> {
        let Refusal::Write { path, .. } = self else {
            return None;
        };
        path.ancestors()
            .skip(1)
            .find(|p| p.is_dir())
            .filter(|p| *p != Path::new("/"))
            .map(Path::to_path_buf)
    }

    /// The line a client that cannot be asked gets: how to allow it.
    pub fn how_to_allow(&self) -> String {
        match self {
            Refusal::Host { host } => format!(
                "{host} was blocked. To allow it, start acp-bash with --allow-host {host}, or \
                 add a line `host {host}` to {} (allowed always)",
                AlwaysFile::shown()
            ),
            Refusal::Write { path, mode } => format!(
                "{} mode refused a write to {}. To allow it, switch the session to full mode \
                 and run the command again, or start acp-bash with --sandbox full",
                mode.id(),
                path.display()
            ),
            Refusal::Network => "read-only mode has no network. To allow it, switch the session \
                 to workspace mode and run the command again"
                .into(),
        }
    }
}

/// One option of a question, protocol-neutral (the bridge maps `kind` to ACP's kinds).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Choice {
    /// The option's id (`allow-once`, `allow-session`, `allow-always`, `reject`).
    pub id: &'static str,
    /// What the user reads.
    pub name: String,
    /// Its answer.
    pub answer: Answer,
}

/// The user's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// Run it again, this command only, in the mode (or with the host) that allows it.
    Once,
    /// Allow it for the session (the host, or commands starting with the prefix), and run it
    /// again.
    Session,
    /// Allow it always (kept in [`AlwaysFile`]), and run it again.
    Always,
    /// Rejected: nothing runs again.
    Reject,
    /// The question was dismissed (the turn was cancelled): as a reject.
    Dismissed,
    /// Not asked: the feature is off, or the client cannot answer.
    NotAsked,
}

/// A question for the user about one refused command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ask {
    /// What was refused.
    pub refusal: Refusal,
    /// The command (the whole script).
    pub command: String,
    /// Where it ran.
    pub cwd: PathBuf,
    /// For a write or the network: the commands a session or always grant covers (`None`:
    /// the command is not one simple command, so only once and reject are offered).
    pub prefix: Option<String>,
    /// Whether "allow always" can be kept (there is an [`AlwaysFile`]).
    pub keep: bool,
}

impl Ask {
    /// The question's title: the command and what was refused.
    pub fn title(&self) -> String {
        let command = first_line(&self.command);
        format!("Allow `{command}`? {}", capitalised(&self.refusal.what()))
    }

    /// The options, in order: once, session, always (where they apply), reject.
    pub fn choices(&self) -> Vec<Choice> {
        let mut choices = Vec::new();
        let choice = |id, name: String, answer| Choice { id, name, answer };
        match (&self.refusal, &self.prefix) {
            (Refusal::Host { host }, _) => {
                choices.push(choice(
                    "allow-once",
                    format!("Allow {host} once: run the command again"),
                    Answer::Once,
                ));
                choices.push(choice(
                    "allow-session",
                    format!("Allow {host} for this session"),
                    Answer::Session,
                ));
                if self.keep {
                    choices.push(choice(
                        "allow-always",
                        format!("Always allow {host}"),
                        Answer::Always,
                    ));
                }
            }
            (refusal, prefix) => {
                let mode = refusal.mode_that_allows().unwrap_or(Mode::Full).id();
                match (refusal, refusal.once_writable()) {
                    (Refusal::Write { .. }, Some(folder)) => choices.push(choice(
                        "allow-once",
                        format!(
                            "Run it again with {} writable, this command only",
                            folder.display()
                        ),
                        Answer::Once,
                    )),
                    (Refusal::Write { .. }, None) => {}
                    _ => choices.push(choice(
                        "allow-once",
                        format!("Run it again in {mode} mode, this command only"),
                        Answer::Once,
                    )),
                }
                // A write: the same folder as "once", for the commands starting with the
                // prefix (never a mode where nothing is masked).
                let lasting = match (refusal, SessionPermits::grant_for(self)) {
                    (_, None) => None,
                    (Refusal::Write { .. }, Some(Grant::Write { folder, .. })) => {
                        Some(format!("with {} writable", folder.display()))
                    }
                    (Refusal::Write { .. }, Some(_)) => None,
                    _ => Some(format!("in {mode} mode")),
                };
                if let (Some(prefix), Some(lasting)) = (prefix, lasting) {
                    choices.push(choice(
                        "allow-session",
                        format!("Run `{prefix}` commands {lasting} for this session"),
                        Answer::Session,
                    ));
                    if self.keep {
                        choices.push(choice(
                            "allow-always",
                            format!("Always run `{prefix}` commands {lasting}"),
                            Answer::Always,
                        ));
                    }
                }
            }
        }
        choices.push(choice("reject", "Reject".into(), Answer::Reject));
        choices
    }

    /// The note the command's result gets after `answer` (for the model and the record).
    pub fn note(&self, answer: Answer) -> Option<String> {
        let command = first_line(&self.command);
        match answer {
            Answer::Reject => Some(format!(
                "the user rejected running `{command}` again with what it needs ({}); do not \
                 try to get around it",
                self.refusal.what()
            )),
            Answer::Dismissed => Some(format!(
                "the question whether to allow `{command}` was dismissed: it did not run again"
            )),
            Answer::NotAsked => Some(self.refusal.how_to_allow()),
            Answer::Once | Answer::Session | Answer::Always => None,
        }
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut cut: String = line.chars().take(120).collect();
    if cut.len() < line.len() || text.lines().nth(1).is_some() {
        cut.push('…');
    }
    cut
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// What a finished run of a command in `mode` on `session` was refused, if anything the user
/// could allow: a host (from the proxy's record, [`RunOutcome::blocked_hosts`]), else a write
/// outside the writable places (an `EROFS`/`EACCES` error that names a path outside them),
/// else the network in read-only mode.
pub fn refusal_of(outcome: &RunOutcome, session: &Session, mode: Mode) -> Option<Refusal> {
    if outcome.status.cancelled || outcome.status.timed_out_after.is_some() {
        return None;
    }
    if mode == Mode::Workspace {
        if let Some(host) = outcome
            .blocked_hosts
            .iter()
            .find(|host| session.host_askable(host))
        {
            return Some(Refusal::Host { host: host.clone() });
        }
    }
    if outcome.exit_code() == Some(0) || !matches!(mode, Mode::Workspace | Mode::ReadOnly) {
        return None;
    }
    let cwd = &outcome.cwd;
    let writable = Writable::of(session, mode);
    for path in refused_write_paths(&outcome.output) {
        let path = absolute(cwd, &path);
        // Where the user's own Unix permissions refuse it (a read of `/etc/shadow` or a write
        // to `/etc` as an ordinary user), the sandbox did not: nothing to allow.
        if !writable.allows(&path) && user_may_write(&path) {
            return Some(Refusal::Write { path, mode });
        }
    }
    if mode == Mode::ReadOnly && needed_the_network(&outcome.output) {
        return Some(Refusal::Network);
    }
    None
}

/// The places a mode lets commands write, as far as asking goes: the session folder (workspace;
/// not its Git hooks and config), the temp dirs, and `/dev`.
struct Writable {
    places: Vec<PathBuf>,
    git_metadata: Option<PathBuf>,
}

impl Writable {
    fn of(session: &Session, mode: Mode) -> Writable {
        let mut places = vec![
            PathBuf::from("/tmp"),
            PathBuf::from("/dev"),
            std::env::temp_dir(),
        ];
        let mut git_metadata = None;
        if mode == Mode::Workspace {
            places.push(session.root().to_path_buf());
            git_metadata = Some(session.root().join(".git"));
        }
        Writable {
            places,
            git_metadata,
        }
    }

    fn allows(&self, path: &Path) -> bool {
        if let Some(git) = &self.git_metadata {
            if path.starts_with(git.join("hooks")) || path == git.join("config") {
                return false;
            }
        }
        self.places.iter().any(|place| path.starts_with(place))
    }
}

/// Whether the agent's user (whom commands run as) may write `path` by Unix permissions and
/// the host's mounts, outside any sandbox: the file where it exists, else its nearest existing
/// folder (to create it there). `EACCES` is also what Unix permissions say to a read
/// (`cat: /etc/shadow: Permission denied` as an ordinary user), and `EROFS` what a read-only
/// host mount says: where the user could not write the path anyway, no answer would make the
/// command work, so there is nothing to ask (`notes/2026-12-06-permission-requests.md`).
fn user_may_write(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Some(existing) = path.ancestors().find(|p| p.symlink_metadata().is_ok()) else {
        return true;
    };
    let how = if existing == path {
        libc::W_OK
    } else {
        libc::W_OK | libc::X_OK
    };
    let Ok(name) = std::ffi::CString::new(existing.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: a NUL-terminated path that lives across the call.
    unsafe { libc::faccessat(libc::AT_FDCWD, name.as_ptr(), how, libc::AT_EACCESS) == 0 }
}

/// `path` made absolute against `cwd`, with `.` and `..` folded (lexically).
fn absolute(cwd: &Path, path: &Path) -> PathBuf {
    let joined = cwd.join(path);
    let mut out = PathBuf::from("/");
    for part in joined.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(name) => out.push(name),
            _ => {}
        }
    }
    out
}

/// The errors that mean a write was refused: `EROFS` and `EACCES`, as tools word them.
const REFUSED: [&str; 4] = [
    "Read-only file system",
    "Permission denied",
    "[Errno 30]",
    "[Errno 13]",
];

/// The paths named by the output's lines that report a refused write (`touch: cannot touch
/// '/etc/x': Read-only file system`, `bash: /etc/x: Permission denied`, `OSError: [Errno 30]
/// Read-only file system: '/etc/x'`, `mkdir: cannot create directory ‘/x’: …`), in order, at
/// most 8.
pub fn refused_write_paths(output: &str) -> Vec<PathBuf> {
    let translated = translated_refusals();
    let mut paths = Vec::new();
    for line in output.lines() {
        if !REFUSED.iter().any(|marker| line.contains(marker))
            && !translated
                .iter()
                .any(|marker| line.contains(marker.as_str()))
        {
            continue;
        }
        let found = quoted(line).or_else(|| colon_path(line));
        if let Some(path) = found {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        if paths.len() == 8 {
            break;
        }
    }
    paths
}

/// `EROFS`'s and `EACCES`'s texts in the locale commands inherit from the agent (its
/// `LC_ALL` / `LC_MESSAGES` / `LANG`, and `LOCPATH`), where that locale translates them:
/// libc's own `strerror_l`, so whatever translation the machine has (`Das Dateisystem ist nur
/// lesbar`, `Keine Berechtigung`). Read once.
fn translated_refusals() -> &'static [String] {
    static TEXTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    TEXTS.get_or_init(|| {
        #[allow(unused_mut)] // elsewhere than Linux nothing is added
        let mut texts = Vec::new();
        #[cfg(target_os = "linux")]
        extern "C" {
            // glibc and musl have it; the libc crate does not declare it.
            fn strerror_l(errnum: libc::c_int, locale: libc::locale_t) -> *mut libc::c_char;
        }
        #[cfg(target_os = "linux")]
        // SAFETY: `newlocale` with an empty name reads the environment; the locale is used
        // only here and freed; `strerror_l`'s text is copied before `freelocale`.
        unsafe {
            let locale = libc::newlocale(libc::LC_ALL_MASK, c"".as_ptr(), std::ptr::null_mut());
            if !locale.is_null() {
                for errno in [libc::EROFS, libc::EACCES] {
                    let text = strerror_l(errno, locale);
                    if text.is_null() {
                        continue;
                    }
                    let text = std::ffi::CStr::from_ptr(text)
                        .to_string_lossy()
                        .into_owned();
                    if !text.trim().is_empty() && !REFUSED.contains(&text.as_str()) {
                        texts.push(text);
                    }
                }
                libc::freelocale(locale);
            }
        }
        texts
    })
}

/// The first quoted path in `line` (`'…'`, `‘…’`, `"…"`).
fn quoted(line: &str) -> Option<PathBuf> {
    for (open, close) in [('\'', '\''), ('‘', '’'), ('"', '"'), ('`', '\'')] {
        let mut rest = line;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            let inside = &after[..end];
            if looks_like_path(inside) {
                return Some(PathBuf::from(inside));
            }
            rest = &after[end + close.len_utf8()..];
        }
    }
    None
}

/// `PATH` in `prog: PATH: Read-only file system` or `sh: 1: cannot create PATH: …`.
fn colon_path(line: &str) -> Option<PathBuf> {
    line.split(": ")
        .map(|part| part.strip_prefix("cannot create ").unwrap_or(part).trim())
        .find(|part| looks_like_path(part))
        .map(PathBuf::from)
}

fn looks_like_path(text: &str) -> bool {
    !text.is_empty()
        && text.len() < 4096
        && !text.contains('\n')
        && (text.starts_with('/') || text.starts_with("./") || text.starts_with("../"))
}

/// Whether the output says that a name did not resolve or the network was unreachable (what
/// tools print in read-only mode's empty network namespace).
fn needed_the_network(output: &str) -> bool {
    const NO_NETWORK: [&str; 6] = [
        "Could not resolve host",
        "Temporary failure in name resolution",
        "Network is unreachable",
        "Name or service not known",
        "Could not resolve proxy",
        "getaddrinfo",
    ];
    NO_NETWORK.iter().any(|marker| output.contains(marker))
}

/// The commands a session or always grant for `command` covers: its first word, and its
/// second when that is a subcommand (`npm install`, `cargo build`); `None` unless `command` is
/// one simple command (no `;`, `&`, `|`, redirection, substitution or second line).
pub fn prefix_of(command: &str) -> Option<String> {
    let command = command.trim();
    if !is_simple(command) {
        return None;
    }
    let mut words = command.split_whitespace();
    let first = words.next()?;
    let mut prefix = first.to_string();
    if let Some(second) = words.next() {
        let subcommand = second
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            && !second.starts_with('-');
        if subcommand {
            prefix.push(' ');
            prefix.push_str(second);
        }
    }
    Some(prefix)
}

/// Whether `command` is one simple command: nothing that could chain another command after
/// a granted prefix.
fn is_simple(command: &str) -> bool {
    !command.is_empty()
        && !command.chars().any(|c| {
            matches!(
                c,
                ';' | '&' | '|' | '<' | '>' | '$' | '`' | '(' | ')' | '{' | '}' | '\n' | '\r'
            )
        })
}

/// Whether `prefix` covers `command`: the command is simple and is the prefix or starts with
/// it and a space.
pub fn covers(prefix: &str, command: &str) -> bool {
    let command = command.trim();
    is_simple(command)
        && (command == prefix
            || command
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('\t')))
}

/// One grant: a host, commands starting with a prefix that may also write a folder, or
/// commands starting with a prefix that get the network in read-only mode.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Grant {
    /// Connections to this host (or `*.domain`).
    Host(HostPattern),
    /// Commands starting with `prefix` run in `mode` (instead of a stricter session mode):
    /// `workspace`, for the network in read-only mode. (A write is a [`Grant::Write`]: no
    /// grant runs a command in `full` mode.)
    Prefix {
        /// The commands ([`covers`]).
        prefix: String,
        /// Their mode: `workspace`.
        mode: Mode,
    },
    /// Commands starting with `prefix` run in the session's mode with `folder` also writable,
    /// as an "allow once" re-run does: the masks stay over it (the credential files, the
    /// agent's own folders, the [`AlwaysFile`]), nothing else is added
    /// (`notes/2026-12-06-prefix-grants.md`).
    Write {
        /// The commands ([`covers`]).
        prefix: String,
        /// The folder the refused write was in (absolute, never `/`).
        folder: PathBuf,
    },
}

impl Grant {
    /// Its line in the [`AlwaysFile`]: `host HOST`, `workspace PREFIX`, or `write FOLDER
    /// PREFIX` (the folder with `\`, spaces and tabs escaped by a backslash).
    pub fn line(&self) -> String {
        match self {
            Grant::Host(pattern) => format!("host {pattern}"),
            Grant::Prefix { prefix, mode } => format!("{} {prefix}", mode.id()),
            Grant::Write { prefix, folder } => {
                format!("write {} {prefix}", escaped(&folder.to_string_lossy()))
            }
        }
    }

    /// Its prefix (`None` for a host).
    pub fn prefix(&self) -> Option<&str> {
        match self {
            Grant::Host(_) => None,
            Grant::Prefix { prefix, .. } | Grant::Write { prefix, .. } => Some(prefix),
        }
    }

    /// A line of the [`AlwaysFile`] (`host HOST`, `write FOLDER PREFIX`, `workspace PREFIX`).
    /// A `full PREFIX` line (kept before prefix grants named their folder) is refused with
    /// what to do: it would run commands where the always file itself can be changed.
    pub fn parse(line: &str) -> Result<Grant, String> {
        const SHAPES: &str = "`host HOST`, `write FOLDER PREFIX` or `workspace PREFIX`";
        let (kind, rest) = line
            .trim()
            .split_once(char::is_whitespace)
            .ok_or_else(|| format!("`{line}` is not {SHAPES}"))?;
        let rest = rest.trim();
        match kind {
            "host" => HostPattern::parse(rest).map(Grant::Host),
            "workspace" if !rest.is_empty() && is_simple(rest) => Ok(Grant::Prefix {
                prefix: rest.to_string(),
                mode: Mode::Workspace,
            }),
            "write" => {
                let (folder, prefix) = unescaped_word(rest);
                let prefix = prefix.trim();
                let folder = PathBuf::from(folder);
                if folder.is_absolute()
                    && folder != Path::new("/")
                    && !prefix.is_empty()
                    && is_simple(prefix)
                {
                    Ok(Grant::Write {
                        prefix: prefix.to_string(),
                        folder,
                    })
                } else {
                    Err(format!(
                        "`{line}` is not `write FOLDER PREFIX` (an absolute folder other than \
                         `/`, then one simple command)"
                    ))
                }
            }
            "full" => Err(format!(
                "`{line}` is no longer honoured: a grant never runs commands in full mode, \
                 where this file itself could be changed. Answer the next question for such \
                 a command with \"always\" to keep `write FOLDER PREFIX` instead, and delete \
                 this line"
            )),
            _ => Err(format!("`{line}` is not {SHAPES} (one simple command)")),
        }
    }
}

/// `text` with `\`, spaces and tabs escaped by a backslash (one word of an [`AlwaysFile`] line).
fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | ' ' | '\t') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The first word of `text` with [`escaped`]'s backslashes taken out, and the rest.
fn unescaped_word(text: &str) -> (String, &str) {
    let mut word = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, next)) = chars.next() {
                    word.push(next);
                }
            }
            c if c.is_whitespace() => return (word, &text[at..]),
            c => word.push(c),
        }
    }
    (word, "")
}

/// The grants kept for good: one a line in `$XDG_CONFIG_HOME/acp-bash/permissions/allowed`
/// (else `~/.config/…`), which commands never see (the folder is masked like the credential
/// files). Delete a line to take it back, or `/permissions remove HOST|PREFIX`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AlwaysFile {
    /// The file.
    pub path: PathBuf,
}

impl AlwaysFile {
    /// The file's name under the config directory.
    pub const RELATIVE: &'static str = "acp-bash/permissions/allowed";

    /// The file under `config_home` (`$XDG_CONFIG_HOME` or `~/.config`).
    pub fn under(config_home: &Path) -> AlwaysFile {
        AlwaysFile {
            path: config_home.join(Self::RELATIVE),
        }
    }

    /// How the file is named to the user.
    pub fn shown() -> String {
        format!("~/.config/{}", Self::RELATIVE)
    }

    /// The folder that holds it (masked from commands).
    pub fn folder(&self) -> PathBuf {
        self.path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// Its grants, and a note per line that is not one. A missing file holds none.
    pub fn read(&self) -> (Vec<Grant>, Vec<String>) {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let mut grants = Vec::new();
        let mut bad = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match Grant::parse(line) {
                Ok(grant) if !grants.contains(&grant) => grants.push(grant),
                Ok(_) => {}
                Err(why) => bad.push(why),
            }
        }
        (grants, bad)
    }

    /// Adds `grant` (the folder and file made 0700/0600 if need be).
    pub fn add(&self, grant: &Grant) -> std::io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        if self.read().0.contains(grant) {
            return Ok(());
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(self.folder())?;
        let new = !self.path.exists();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.path)?;
        if new {
            writeln!(
                file,
                "# acp-bash: what you allowed always, one a line: `host HOST`; `write FOLDER PREFIX`\n\
                 # (commands starting with PREFIX may also write FOLDER); `workspace PREFIX` (they\n\
                 # get the network in read-only mode). Delete a line to take it back."
            )?;
        }
        writeln!(file, "{}", grant.line())
    }

    /// Removes every line equal to `line` (after trimming); whether one was there. The file
    /// is replaced atomically (a new file beside it, renamed over it), every other line kept
    /// byte for byte.
    pub fn remove(&self, line: &str) -> std::io::Result<bool> {
        let line = line.trim();
        Ok(!self.remove_where(|kept| kept == line)?.is_empty())
    }

    /// Removes the lines that allow `what` (a host, or a command prefix: `host WHAT`, `write
    /// FOLDER WHAT`, `workspace WHAT`, an old `full WHAT`); the lines removed. What
    /// `/permissions remove` and `acp-bash permissions remove` do to the file.
    pub fn remove_grants_for(&self, what: &str) -> std::io::Result<Vec<String>> {
        self.remove_where(|line| allows(what, line))
    }

    /// Removes every line for which `matches` (given the trimmed line) holds; the lines
    /// removed. As [`AlwaysFile::remove`]: atomically, every other line byte for byte.
    pub fn remove_where(&self, matches: impl Fn(&str) -> bool) -> std::io::Result<Vec<String>> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut kept = Vec::with_capacity(text.len());
        let mut removed = Vec::new();
        for piece in text.split_inclusive(|b| *b == b'\n') {
            match std::str::from_utf8(piece.trim_ascii()) {
                Ok(line) if !line.is_empty() && matches(line) => removed.push(line.to_string()),
                _ => kept.extend_from_slice(piece),
            }
        }
        if removed.is_empty() {
            return Ok(removed);
        }
        let mut salt = [0u8; 4];
        crate::random::random_bytes(&mut salt);
        let salt: String = salt.iter().map(|b| format!("{b:02x}")).collect();
        let new = self.folder().join(format!(".allowed.{salt}.new"));
        let written = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&new)?;
            file.write_all(&kept)?;
            file.sync_all()?;
            std::fs::rename(&new, &self.path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&new);
        }
        written.map(|()| removed)
    }
}

/// Whether the kept `line` is one that allows `what` (a host, or a command prefix): `host
/// WHAT`, `write FOLDER WHAT`, `workspace WHAT`, or an old `full WHAT`.
fn allows(what: &str, line: &str) -> bool {
    let what = what.trim();
    HostPattern::parse(what).is_ok_and(|pattern| line == Grant::Host(pattern).line())
        || (!what.is_empty()
            && (line
                .strip_prefix("full ")
                .is_some_and(|rest| rest.trim() == what)
                || Grant::parse(line).is_ok_and(|grant| grant.prefix() == Some(what))))
}

/// The permission settings of an agent: whether it asks, and where it keeps what is allowed
/// always. Shared by its sessions.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Permits {
    /// Ask the client when the sandbox refuses a command (`--no-permission-requests`: off).
    pub ask: bool,
    /// Where "allow always" is kept (`None`: no config directory; that option is not offered).
    pub always: Option<AlwaysFile>,
}

impl Permits {
    /// Asking on, keeping what is allowed always in `always`.
    pub fn asking(always: Option<AlwaysFile>) -> Permits {
        Permits { ask: true, always }
    }

    /// A session's grants: those kept always, then the session's own.
    pub fn session(&self, session: &Session) -> SessionPermits {
        let grants = session.network_grants();
        let kept = self.always.as_ref().map(|f| f.read().0).unwrap_or_default();
        let permits = SessionPermits {
            settings: self.clone(),
            hosts: grants,
            prefixes: Arc::new(Mutex::new(Vec::new())),
            asking: Arc::new(std::sync::atomic::AtomicBool::new(self.ask)),
        };
        for grant in kept {
            permits.apply(&grant);
        }
        permits
    }
}

/// One session's grants, and its agent's settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionPermits {
    /// The agent's settings.
    pub settings: Permits,
    hosts: Option<Grants>,
    /// Its [`Grant::Prefix`]es and [`Grant::Write`]s.
    prefixes: Arc<Mutex<Vec<Grant>>>,
    /// Whether the session asks now (its `permission_requests` config option).
    asking: Arc<std::sync::atomic::AtomicBool>,
}

impl SessionPermits {
    /// Whether the session asks when the sandbox refuses a command: the agent asks
    /// ([`Permits::ask`]) and the session did not turn it off ([`SessionPermits::set_asking`]).
    pub fn asks(&self) -> bool {
        self.settings.ask && self.asking.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Turns asking on or off for the session (off: a refused command fails as without
    /// permission requests, with the line that says how to allow it). Grants stay.
    pub fn set_asking(&self, on: bool) {
        self.asking.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// What the granted prefixes that cover `command` give it in `mode` (`None`: nothing):
    /// `workspace` mode for the network in read-only, and the folders of its write grants.
    pub fn widened(&self, command: &str, mode: Mode) -> Option<Widened> {
        let prefixes = self.prefixes.lock().unwrap_or_else(|e| e.into_inner());
        let mut widened = Widened {
            mode,
            also_writable: Vec::new(),
        };
        for grant in prefixes.iter() {
            match grant {
                // Only a looser mode than the session's is applied.
                Grant::Prefix {
                    prefix,
                    mode: granted,
                } if covers(prefix, command) && looseness(*granted) > looseness(widened.mode) => {
                    widened.mode = *granted;
                }
                Grant::Write { prefix, folder }
                    if covers(prefix, command) && !widened.also_writable.contains(folder) =>
                {
                    widened.also_writable.push(folder.clone());
                }
                _ => {}
            }
        }
        // Full and off modes write anywhere already.
        if matches!(widened.mode, Mode::Full | Mode::Off) {
            widened.also_writable.clear();
        }
        (widened.mode != mode || !widened.also_writable.is_empty()).then_some(widened)
    }

    /// Applies `grant` to the session (a host to its proxy grants, a prefix to its list).
    pub fn apply(&self, grant: &Grant) {
        match grant {
            Grant::Host(pattern) => {
                if let Some(hosts) = &self.hosts {
                    hosts.add(pattern.clone());
                }
            }
            grant => {
                let mut prefixes = self.prefixes.lock().unwrap_or_else(|e| e.into_inner());
                if !prefixes.contains(grant) {
                    prefixes.push(grant.clone());
                }
            }
        }
    }

    /// What the session allows beyond its mode: its host grants (`host HOST`, including
    /// those kept always) and its prefixes
    /// (`write FOLDER PREFIX`, `workspace PREFIX`), as [`Grant::line`]s.
    pub fn granted(&self) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        let hosts = self.hosts.as_ref().map(Grants::list).unwrap_or_default();
        let prefixes = self.prefixes.lock().unwrap_or_else(|e| e.into_inner());
        let grants = hosts
            .into_iter()
            .map(Grant::Host)
            .chain(prefixes.iter().cloned());
        for grant in grants {
            let line = grant.line();
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
        lines
    }

    /// Takes back what allows `what` (a host, or a command prefix): from the session, and
    /// from the [`AlwaysFile`]. The lines removed (`host HOST`, `write FOLDER PREFIX`, …,
    /// and a `full PREFIX` line kept from before); none when nothing allowed it.
    pub fn remove(&self, what: &str) -> std::io::Result<Vec<String>> {
        let what = what.trim();
        let host = HostPattern::parse(what).ok();
        let mut removed: Vec<String> = self
            .granted()
            .into_iter()
            .filter(|line| allows(what, line))
            .collect();
        if let (Some(pattern), Some(hosts)) = (&host, &self.hosts) {
            while hosts.list().contains(pattern) {
                hosts.remove(pattern);
            }
        }
        self.prefixes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|grant| grant.prefix() != Some(what));
        if let Some(file) = &self.settings.always {
            for line in file.remove_grants_for(what)? {
                if !removed.contains(&line) {
                    removed.push(line);
                }
            }
        }
        Ok(removed)
    }

    /// Allows `host` for the whole session until [`SessionPermits::end_once`] (an "allow once"
    /// re-run where a command cannot have a proxy listener of its own: not Linux; there the
    /// re-run gets it alone, [`crate::exec::RunRequest::also_hosts`]).
    pub fn allow_once(&self, host: &str) -> Option<HostPattern> {
        let pattern = HostPattern::parse(host).ok()?;
        self.hosts.as_ref()?.add(pattern.clone());
        Some(pattern)
    }

    /// Takes back what [`SessionPermits::allow_once`] allowed.
    pub fn end_once(&self, pattern: &HostPattern) {
        if let Some(hosts) = &self.hosts {
            hosts.remove(pattern);
        }
    }

    /// The grant an answer of session or always makes for `ask`: the host; for a write, the
    /// commands starting with its prefix may also write the folder "once" would open (none
    /// where that would be `/`, or is not UTF-8); for the network, they run in `workspace`
    /// mode.
    pub fn grant_for(ask: &Ask) -> Option<Grant> {
        match &ask.refusal {
            Refusal::Host { host } => HostPattern::parse(host).ok().map(Grant::Host),
            refusal @ Refusal::Write { .. } => Some(Grant::Write {
                prefix: ask.prefix.clone()?,
                folder: refusal.once_writable().filter(|f| f.to_str().is_some())?,
            }),
            refusal => Some(Grant::Prefix {
                prefix: ask.prefix.clone()?,
                mode: refusal.mode_that_allows()?,
            }),
        }
    }
}

/// What granted prefixes give one command ([`SessionPermits::widened`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Widened {
    /// The mode it runs in (the session's, or `workspace` for the network in read-only).
    pub mode: Mode,
    /// The folders it may also write, the masks still over them
    /// ([`crate::exec::RunRequest::also_writable`]).
    pub also_writable: Vec<PathBuf>,
}

fn looseness(mode: Mode) -> u8 {
    match mode {
        Mode::ReadOnly => 0,
        Mode::Workspace => 1,
        Mode::Full => 2,
        _ => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paths_of_refused_writes_are_read_from_the_usual_errors() {
        let output = "touch: cannot touch '/etc/x': Read-only file system\n\
             bash: /usr/y: Permission denied\n\
             mkdir: cannot create directory ‘/opt/z’: Read-only file system\n\
             OSError: [Errno 30] Read-only file system: '/srv/w'\n\
             sh: 1: cannot create /var/v: Read-only file system\n\
             cat: /nothing: No such file or directory\n\
             tee: ./here: Permission denied\n";
        assert_eq!(
            refused_write_paths(output),
            ["/etc/x", "/usr/y", "/opt/z", "/srv/w", "/var/v", "./here"]
                .map(PathBuf::from)
                .to_vec()
        );
    }

    #[test]
    fn a_prefix_covers_only_simple_commands_that_start_with_it() {
        assert_eq!(
            prefix_of("npm install left-pad").as_deref(),
            Some("npm install")
        );
        assert_eq!(prefix_of("touch /etc/x").as_deref(), Some("touch"));
        assert_eq!(prefix_of("touch /etc/x; curl evil"), None);
        assert!(covers("npm install", "npm install x"));
        assert!(covers("npm install", "npm install"));
        assert!(!covers("npm install", "npm installx"));
        assert!(!covers("npm install", "npm install x && rm -rf /"));
        assert!(!covers("npm install", "npm install $(curl evil)"));
        assert!(!covers("touch", "touch a\nrm b"));
    }

    #[test]
    fn the_always_file_keeps_adds_and_removes_lines() {
        let dir = tempfile::tempdir().unwrap();
        let file = AlwaysFile::under(dir.path());
        assert!(file.read().0.is_empty());
        let host = Grant::Host(HostPattern::parse("example.com").unwrap());
        let prefix = Grant::Write {
            prefix: "touch".into(),
            folder: "/srv/my out\\put".into(),
        };
        assert_eq!(prefix.line(), "write /srv/my\\ out\\\\put touch");
        assert_eq!(Grant::parse(&prefix.line()), Ok(prefix.clone()));
        file.add(&host).unwrap();
        file.add(&prefix).unwrap();
        file.add(&host).unwrap();
        assert_eq!(file.read().0, vec![host.clone(), prefix.clone()]);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(file.remove("host example.com").unwrap());
        assert_eq!(file.read().0, vec![prefix]);
        std::fs::write(
            &file.path,
            "nonsense\nworkspace a; b\nhost ok.org\nfull touch\nwrite / touch\nwrite rel touch\n",
        )
        .unwrap();
        let (grants, bad) = file.read();
        assert_eq!(grants.len(), 1);
        assert_eq!(bad.len(), 5, "{bad:?}");
        assert!(bad[2].contains("no longer honoured"), "{bad:?}");
    }

    #[test]
    fn each_refusal_offers_once_session_always_and_reject() {
        let ask = Ask {
            refusal: Refusal::Host {
                host: "example.com".into(),
            },
            command: "curl https://example.com".into(),
            cwd: "/w".into(),
            prefix: prefix_of("curl https://example.com"),
            keep: true,
        };
        let ids: Vec<_> = ask.choices().iter().map(|c| c.id).collect();
        assert_eq!(
            ids,
            ["allow-once", "allow-session", "allow-always", "reject"]
        );
        let chained = Ask {
            refusal: Refusal::Write {
                path: "/etc/x".into(),
                mode: Mode::Workspace,
            },
            command: "touch /etc/x; true".into(),
            cwd: "/w".into(),
            prefix: None,
            keep: true,
        };
        let ids: Vec<_> = chained.choices().iter().map(|c| c.id).collect();
        assert_eq!(ids, ["allow-once", "reject"]);
    }
}
