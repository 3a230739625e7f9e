//! The environment scrub: which of the agent's variables a command may see.
//!
//! Owns: the rules that recognise a secret by its variable's name or by its value, the keep-list
//! and set-list, and the report of what was removed (names only, never values).
//! The exact rules are written down in `notes/2026-11-29-env-scrub-rules.md`.

use std::ffi::OsString;

/// What the scrub removes, keeps and sets.
///
/// Start from [`EnvPolicy::standard`] (scrub on) and add with [`EnvPolicy::keep_env`] and
/// [`EnvPolicy::set_env`]; `Default` is the scrub off.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct EnvPolicy {
    /// Remove variables that look like secrets (on by default).
    pub scrub: bool,
    /// Names kept even when they look like secrets (exact names).
    pub keep: Vec<String>,
    /// Variables set for every command, after the scrub (they win over inherited ones).
    pub set: Vec<(String, String)>,
}

/// Why a variable was removed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScrubReason {
    /// Its name marks a secret (the word that matched, e.g. `token`).
    Name(String),
    /// Its value looks like a credential (what kind, e.g. `GitHub token`).
    Value(&'static str),
    /// Not a secret: with it, bash takes the command's shell for one that sshd started, and
    /// (as Debian builds it) reads `~/.bashrc` instead of the engine's prelude (see
    /// [`SSH_LOGIN_MARKERS`]). Removed even with the scrub off, unless kept by name.
    SshLoginMarker,
}

/// Variables by which bash recognises a shell started by sshd (`SSH_CLIENT`, `SSH2_CLIENT`,
/// with a shell level below 2). Debian's and Ubuntu's bash (`SSH_SOURCE_BASHRC`) then reads
/// `~/.bashrc` and not `BASH_ENV`, so a command would run without the engine's prelude (its
/// state report, its trap wrapper) and with the user's interactive setup. An agent started on
/// a remote host over SSH (Zed's remote development) inherits them.
pub const SSH_LOGIN_MARKERS: &[&str] = &["SSH_CLIENT", "SSH2_CLIENT"];

/// One variable the scrub removed: its name and why. Never its value. Made by [`prepare`];
/// callers only read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Scrubbed {
    /// The variable's name.
    pub name: String,
    /// Why it was removed.
    pub reason: ScrubReason,
}

/// The environment commands start from, and what was removed to get it. Made by [`prepare`];
/// callers only read it.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PreparedEnv {
    /// The variables commands start with.
    pub vars: Vec<(OsString, OsString)>,
    /// What the scrub removed (names only).
    pub removed: Vec<Scrubbed>,
    /// The names of variables that were there but are replaced by [`ALWAYS_SET`] or the
    /// policy's set-list (sorted).
    pub replaced: Vec<String>,
}

impl EnvPolicy {
    /// The default: scrub on, nothing extra kept or set.
    pub fn standard() -> Self {
        EnvPolicy {
            scrub: true,
            keep: Vec::new(),
            set: Vec::new(),
        }
    }

    /// Adds a name to [`EnvPolicy::keep`].
    pub fn keep_env(mut self, name: impl Into<String>) -> Self {
        self.keep.push(name.into());
        self
    }

    /// Adds a variable to [`EnvPolicy::set`].
    pub fn set_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.set.push((name.into(), value.into()));
        self
    }
}

/// The editor commands get (`EDITOR`, `VISUAL`, `GIT_EDITOR`, `GIT_SEQUENCE_EDITOR`): commands
/// have no terminal (stdin is `/dev/null`), so an editor such as vim would draw into the output
/// and wait until the timeout. This stub says why on stderr and fails at once, so `git commit`
/// without `-m` and `git rebase -i` end with that message.
///
/// It is a shell snippet, not a file: nothing a command can write (in any sandbox mode) can
/// change it. Callers that run the editor through `sh -c "$EDITOR \"$@\""` (git, crontab,
/// sensible-editor, Python's click) print the message; a bash script's unquoted `$EDITOR file`
/// splits it into words without parsing quotes, so `sh` fails at once with a syntax error
/// (status 2) naming `"acp-bash:`; an `execvp` of the whole value fails with "not found".
/// See `notes/2026-12-01-editors-fail-fast.md`.
pub const NO_EDITOR: &str = "sh -c 'echo \"acp-bash: no terminal here, so no editor can run; \
     pass the text on the command line instead (git commit -m MESSAGE, git merge --no-edit, \
     git rebase without -i)\" >&2; exit 1' acp-bash-no-editor";

/// Variables every command gets, before the policy's own set-list (which can override them):
/// an inherited value is replaced (an `EDITOR=vim` from the user's terminal cannot work here),
/// an explicit `--set-env` wins.
pub const ALWAYS_SET: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("EDITOR", NO_EDITOR),
    ("VISUAL", NO_EDITOR),
    ("GIT_EDITOR", NO_EDITOR),
    ("GIT_SEQUENCE_EDITOR", NO_EDITOR),
    // Tells scripts they run under acp-bash (and which version).
    ("ACP_BASH", env!("CARGO_PKG_VERSION")),
];

/// Names that look like secrets by the word rule but are ordinary shell state.
const NEVER_SECRET_NAMES: &[&str] = &["PWD", "OLDPWD"];

/// Words that mark a secret when a name holds them as a whole word (`DB_PASSWORD`, `apiKey`).
const SECRET_WORDS: &[&str] = &[
    "key",
    "keys",
    "apikey",
    "secret",
    "secrets",
    "token",
    "tokens",
    "password",
    "passwords",
    "passwd",
    "pwd",
    "pass",
    "passphrase",
    "credential",
    "credentials",
    "creds",
    "private",
    "privatekey",
    "auth",
    "oauth",
    "authtoken",
    "cookie",
    "cookies",
    "jwt",
    "bearer",
    "pat",
];

/// Pairs of consecutive words that mark a secret together (`SESSION_TOKEN` is caught by `token`
/// alone; these catch names whose parts are harmless one by one).
const SECRET_WORD_PAIRS: &[(&str, &str)] = &[("session", "id"), ("signing", "salt")];

/// Stems that mark a secret even inside a longer word (`DBPASSWORD`, `MYSECRETVALUE`).
const SECRET_STEMS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "credential",
    "apikey",
    "privatekey",
    "accesskey",
    "authtoken",
];

/// Splits a variable name into lower-case words at `_`, `-`, `.`, digits-to-letters and
/// camelCase boundaries: `GITHUB_API_KEY` → github, api, key; `apiKey` → api, key.
fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous: Option<char> = None;
    for ch in name.chars() {
        if !ch.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous = None;
            continue;
        }
        let camel_boundary = matches!(previous, Some(p) if p.is_lowercase() && ch.is_uppercase());
        if camel_boundary && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        current.extend(ch.to_lowercase());
        previous = Some(ch);
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// The word or stem that makes `name` a secret's name, if any.
pub fn secret_name_match(name: &str) -> Option<String> {
    if NEVER_SECRET_NAMES.contains(&name) {
        return None;
    }
    let words = name_words(name);
    if let Some(word) = words.iter().find(|w| SECRET_WORDS.contains(&w.as_str())) {
        return Some(word.clone());
    }
    for pair in words.windows(2) {
        if SECRET_WORD_PAIRS.contains(&(pair[0].as_str(), pair[1].as_str())) {
            return Some(format!("{}_{}", pair[0], pair[1]));
        }
    }
    let squashed: String = words.concat();
    SECRET_STEMS
        .iter()
        .find(|stem| squashed.contains(*stem))
        .map(|stem| stem.to_string())
}

/// Credential shapes recognised in values, with the name given in the scrub report and the
/// literals one of which every match contains (its needles).
///
/// A value is only run through a pattern if it contains one of that pattern's needles, and a
/// pattern is compiled the first time a value gets that far: compiling all twelve took about
/// 10 M instructions on the first `session/new` (`notes/2026-12-02-start-up-rss.md`), and an
/// ordinary environment contains none of the needles or only `://`. A needle must therefore be a
/// substring of *every* string its pattern matches (the test
/// `every_pattern_match_contains_a_needle` checks the cases).
const SECRET_VALUE_PATTERNS: &[(&str, &[&str], &str)] = &[
    (
        "GitHub token",
        &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
    ),
    (
        "GitLab token",
        &[
            "glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glimt-", "gloas-", "glsoat-",
        ],
        r"\bgl(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat)-[A-Za-z0-9_\-]{20,}",
    ),
    (
        "Slack token",
        &[
            "xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "xapp-",
        ],
        r"\b(?:xox[abposre]|xapp)-[A-Za-z0-9\-]{10,}",
    ),
    (
        "Anthropic API key",
        &["sk-ant-"],
        r"\bsk-ant-[A-Za-z0-9_\-]{20,}",
    ),
    (
        "OpenAI API key",
        &["sk-"],
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    ),
    (
        "AWS access key id",
        &["AKIA", "ASIA", "ABIA", "ACCA", "AROA", "AIDA"],
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA)[A-Z0-9]{16}\b",
    ),
    (
        "Stripe key",
        &["sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"],
        r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|\bwhsec_[A-Za-z0-9]{10,}",
    ),
    ("npm token", &["npm_"], r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("Hugging Face token", &["hf_"], r"\bhf_[A-Za-z0-9]{30,}"),
    (
        "JSON Web Token",
        &["eyJ"],
        r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*",
    ),
    (
        "PEM private key",
        &["-----BEGIN "],
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    ),
    (
        "URL with a password",
        &["://"],
        r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:[^/\s@]+@",
    ),
];

/// One slot per [`SECRET_VALUE_PATTERNS`] entry, compiled when first needed.
static COMPILED: [std::sync::OnceLock<regex::Regex>; SECRET_VALUE_PATTERNS.len()] =
    [const { std::sync::OnceLock::new() }; SECRET_VALUE_PATTERNS.len()];

fn secret_value_regex(index: usize) -> &'static regex::Regex {
    COMPILED[index]
        .get_or_init(|| regex::Regex::new(SECRET_VALUE_PATTERNS[index].2).expect("valid pattern"))
}

/// What kind of credential `value` looks like, if any.
pub fn secret_value_match(value: &str) -> Option<&'static str> {
    SECRET_VALUE_PATTERNS
        .iter()
        .enumerate()
        .find(|(index, (_, needles, _))| {
            needles.iter().any(|needle| value.contains(needle))
                && secret_value_regex(*index).is_match(value)
        })
        .map(|(_, (kind, _, _))| *kind)
}

/// Applies `policy` to `vars` (usually this process's environment).
pub fn prepare(
    policy: &EnvPolicy,
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> PreparedEnv {
    let mut prepared = PreparedEnv::default();
    let overridden = |name: &str| {
        ALWAYS_SET.iter().any(|(set, _)| *set == name)
            || policy.set.iter().any(|(set, _)| set == name)
    };
    for (name, value) in vars {
        let name_text = name.to_string_lossy();
        if overridden(&name_text) {
            prepared.replaced.push(name_text.into_owned());
            continue;
        }
        let kept = policy.keep.iter().any(|keep| *keep == name_text);
        if !kept && SSH_LOGIN_MARKERS.contains(&&*name_text) {
            prepared.removed.push(Scrubbed {
                name: name_text.into_owned(),
                reason: ScrubReason::SshLoginMarker,
            });
            continue;
        }
        if policy.scrub && !kept {
            let reason = secret_name_match(&name_text)
                .map(ScrubReason::Name)
                .or_else(|| secret_value_match(&value.to_string_lossy()).map(ScrubReason::Value));
            if let Some(reason) = reason {
                prepared.removed.push(Scrubbed {
                    name: name_text.into_owned(),
                    reason,
                });
                continue;
            }
        }
        prepared.vars.push((name, value));
    }
    for (name, value) in ALWAYS_SET {
        if !policy.set.iter().any(|(set, _)| set == name) {
            prepared.vars.push((name.into(), value.into()));
        }
    }
    for (name, value) in &policy.set {
        prepared.vars.push((name.into(), value.into()));
    }
    prepared.removed.sort_by(|a, b| a.name.cmp(&b.name));
    prepared.replaced.sort();
    prepared
}

impl std::fmt::Display for ScrubReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScrubReason::Name(word) => write!(f, "its name holds `{word}`"),
            ScrubReason::Value(kind) => write!(f, "its value looks like a {kind}"),
            ScrubReason::SshLoginMarker => write!(
                f,
                "bash would take commands for an ssh login and skip acp-bash's prelude"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_at_separators_and_camel_case() {
        assert_eq!(name_words("GITHUB_API_KEY"), ["github", "api", "key"]);
        assert_eq!(name_words("apiKey"), ["api", "key"]);
        assert_eq!(name_words("my-db.password2"), ["my", "db", "password2"]);
        assert_eq!(name_words("KEYBOARD"), ["keyboard"]);
    }

    #[test]
    fn secret_names_are_recognised_word_by_word() {
        for name in [
            "OPENAI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "MYSQL_PWD",
            "SMTP_PASS",
            "SSH_PRIVATE_KEY",
            "NPM_AUTH",
            "apiKey",
            "SESSION_TOKEN",
            "GOOGLE_CREDENTIALS",
            "DBPASSWORD",
            "COOKIE_JAR",
            "SSH_AUTH_SOCK",
            "HF_TOKEN",
            "PHP_SESSION_ID",
        ] {
            assert!(
                secret_name_match(name).is_some(),
                "{name} should be scrubbed"
            );
        }
    }

    #[test]
    fn ordinary_names_survive() {
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "PWD",
            "OLDPWD",
            "TOKENIZERS_PARALLELISM",
            "KEYBOARD_LAYOUT",
            "GIT_AUTHOR_NAME",
            "CARGO_HOME",
            "GOPATH",
            "NVM_DIR",
            "VIRTUAL_ENV",
            "JAVA_HOME",
            "TERM",
            "SHELL",
            "USER",
            "XAUTHORITY",
            "SESSION_MANAGER",
            "PASSAGE_DIR",
            "MONKEY",
        ] {
            assert_eq!(secret_name_match(name), None, "{name} should survive");
        }
    }

    #[test]
    fn credential_values_are_recognised_under_innocent_names() {
        let cases = [
            ("ghp_0123456789abcdefghijABCDEFGHIJ0123", "GitHub token"),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "GitHub token",
            ),
            ("glpat-abcdefghij0123456789", "GitLab token"),
            ("xoxb-1234567890-abcdefghij", "Slack token"),
            (
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
                "Anthropic API key",
            ),
            ("sk-proj-abcdefghijklmnopqrstuvwxyz012345", "OpenAI API key"),
            ("AKIAIOSFODNN7EXAMPLE", "AWS access key id"),
            ("sk_live_abcdefghij0123", "Stripe key"),
            ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm token"),
            (
                "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
                "Hugging Face token",
            ),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig-nature_",
                "JSON Web Token",
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nabc",
                "PEM private key",
            ),
            (
                "postgres://app:hunter2@db.internal:5432/app",
                "URL with a password",
            ),
            (
                "Bearer ghp_0123456789abcdefghijABCDEFGHIJ0123",
                "GitHub token",
            ),
        ];
        for (value, kind) in cases {
            assert_eq!(secret_value_match(value), Some(kind), "{value}");
        }
    }

    /// The needles are a filter in front of the patterns: a match without one of its pattern's
    /// needles would be missed. Every spelling each pattern's alternatives allow, matched by
    /// the pattern alone, must contain a needle of that pattern.
    #[test]
    fn every_pattern_match_contains_a_needle() {
        let tail = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ";
        let mut values = vec![
            format!("github_pat_{tail}"),
            format!("sk-ant-{tail}"),
            format!("sk-proj-{tail}"),
            format!("sk-svcacct-{tail}"),
            format!("sk-admin-{tail}"),
            format!("sk-{tail}"),
            format!("whsec_{tail}"),
            "npm_abcdefghijklmnopqrstuvwxyz0123456789".to_string(),
            format!("hf_{tail}"),
            "eyJabcdef.eyJabcdef.sig".to_string(),
            "-----BEGIN PRIVATE KEY-----".to_string(),
            "-----BEGIN RSA PRIVATE KEY-----".to_string(),
            "https://user:pw@host".to_string(),
        ];
        values.extend("pousr".chars().map(|c| format!("gh{c}_{tail}")));
        for kind in ["pat", "dt", "rt", "ptt", "cbt", "ft", "imt", "oas", "soat"] {
            values.push(format!("gl{kind}-{tail}"));
        }
        values.extend("abposre".chars().map(|c| format!("xox{c}-{tail}")));
        values.push(format!("xapp-{tail}"));
        for prefix in ["AKIA", "ASIA", "ABIA", "ACCA", "AROA", "AIDA"] {
            values.push(format!("{prefix}ABCDEFGHIJ012345"));
        }
        for prefix in ["sk_live_", "sk_test_", "rk_live_", "rk_test_"] {
            values.push(format!("{prefix}{tail}"));
        }
        let mut matched = vec![0; SECRET_VALUE_PATTERNS.len()];
        for value in &values {
            for (index, (kind, needles, _)) in SECRET_VALUE_PATTERNS.iter().enumerate() {
                if let Some(found) = secret_value_regex(index).find(value) {
                    matched[index] += 1;
                    assert!(
                        needles.iter().any(|needle| found.as_str().contains(needle)),
                        "{kind}: {:?} has none of {needles:?}",
                        found.as_str()
                    );
                }
            }
            assert!(secret_value_match(value).is_some(), "{value}");
        }
        assert!(matched.iter().all(|n| *n > 0), "a pattern without a case");
    }

    #[test]
    fn ordinary_values_survive() {
        for value in [
            "/usr/local/bin:/usr/bin:/bin",
            "en_US.UTF-8",
            "https://example.com/path",
            "http://proxy.local:3128",
            "https://user@example.com/repo.git",
            "sk-short",
            "xterm-256color",
            "ghp_short",
            "risk-assessment-document-for-the-quarter",
        ] {
            assert_eq!(secret_value_match(value), None, "{value}");
        }
    }

    #[test]
    fn prepare_scrubs_keeps_and_sets() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("GITHUB_TOKEN", "x"),
            ("INNOCENT", "ghp_0123456789abcdefghijABCDEFGHIJ0123"),
            ("KEPT_SECRET", "y"),
            ("PAGER", "less"),
        ]
        .map(|(n, v)| (OsString::from(n), OsString::from(v)));
        let policy = EnvPolicy {
            scrub: true,
            keep: vec!["KEPT_SECRET".into()],
            set: vec![
                ("EXTRA".into(), "1".into()),
                ("GIT_PAGER".into(), "more".into()),
            ],
        };
        let prepared = prepare(&policy, vars);
        let get = |name: &str| {
            prepared
                .vars
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.to_str().unwrap().to_string())
        };
        assert_eq!(get("PATH").as_deref(), Some("/usr/bin"));
        assert_eq!(get("KEPT_SECRET").as_deref(), Some("y"));
        assert_eq!(get("GITHUB_TOKEN"), None);
        assert_eq!(get("INNOCENT"), None);
        assert_eq!(get("PAGER").as_deref(), Some("cat"));
        assert_eq!(get("GIT_PAGER").as_deref(), Some("more"));
        assert_eq!(get("EXTRA").as_deref(), Some("1"));
        assert_eq!(get("GIT_TERMINAL_PROMPT").as_deref(), Some("0"));
        let removed: Vec<_> = prepared.removed.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(removed, ["GITHUB_TOKEN", "INNOCENT"]);
        assert_eq!(prepared.replaced, ["PAGER"]);
        assert_eq!(
            prepared.removed[1].reason,
            ScrubReason::Value("GitHub token")
        );
    }

    #[test]
    fn scrub_off_keeps_secrets_but_still_sets() {
        let vars = [(OsString::from("GITHUB_TOKEN"), OsString::from("x"))];
        let prepared = prepare(&EnvPolicy::default(), vars);
        assert!(prepared.vars.iter().any(|(n, _)| n == "GITHUB_TOKEN"));
        assert!(prepared.vars.iter().any(|(n, _)| n == "PAGER"));
    }
}
