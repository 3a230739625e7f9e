//! The environment scrub's documented rules, one table row each
//! (`notes/2026-11-29-env-scrub-rules.md`): every secret word, pair and stem of the name rule,
//! every credential shape of the value rule, and the near misses that must survive.
//!
//! The tables are written out here, not read from `src/exec/env.rs`: deleting a word from the
//! code's list must fail a row.

use std::ffi::OsString;

use acp_bash::acp::client::ClientProfile;
use acp_bash::exec::env::{prepare, secret_name_match, secret_value_match, EnvPolicy, ScrubReason};

/// Every secret word of the note, as the note lists them.
const SECRET_WORDS: [&str; 26] = [
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

/// The stems that count inside a longer word.
const SECRET_STEMS: [&str; 8] = [
    "password",
    "passwd",
    "secret",
    "credential",
    "apikey",
    "privatekey",
    "accesskey",
    "authtoken",
];

/// The same word in the ways a name can hold it: alone, upper-case between underscores, at the
/// end of a dashed or dotted name, and as a camelCase part. The report names the word.
#[test]
fn every_secret_word_is_caught_in_every_spelling() {
    for word in SECRET_WORDS {
        let upper = word.to_uppercase();
        let camel = {
            let mut chars = word.chars();
            let first = chars.next().unwrap().to_uppercase().collect::<String>();
            format!("my{first}{}", chars.as_str())
        };
        for name in [
            upper.clone(),
            format!("MY_{upper}"),
            format!("{upper}_FILE"),
            format!("APP_{upper}_2"),
            format!("my-app.{word}"),
            camel,
        ] {
            if name == "PWD" {
                continue; // shell state, pinned in `near_miss_names_survive`
            }
            assert_eq!(secret_name_match(&name).as_deref(), Some(word), "{name}");
        }
    }
}

/// The examples: these reached every command when words were missing from the list.
#[test]
fn the_names_that_once_slipped_through_are_caught() {
    for (name, word) in [
        ("AWS_CREDS", "creds"),
        ("MY_JWT", "jwt"),
        ("BEARER", "bearer"),
        ("API_KEYS", "keys"),
        ("APP_SECRETS", "secrets"),
        ("REFRESH_TOKENS", "tokens"),
        ("OLD_PASSWORDS", "passwords"),
        ("GPG_PASSPHRASE", "passphrase"),
        ("SSH_PRIVATE", "private"),
        ("GOOGLE_OAUTH", "oauth"),
        ("GITHUB_PAT", "pat"),
        ("BROWSER_COOKIES", "cookies"),
    ] {
        assert_eq!(secret_name_match(name).as_deref(), Some(word), "{name}");
    }
}

#[test]
fn each_secret_word_pair_is_caught_only_as_a_consecutive_pair() {
    for (name, expected) in [
        ("SESSION_ID", Some("session_id")),
        ("PHP_SESSION_ID", Some("session_id")),
        ("sessionId", Some("session_id")),
        ("SIGNING_SALT", Some("signing_salt")),
        ("APP_SIGNING_SALT", Some("signing_salt")),
        // Near misses: one word of a pair, the pair reversed, the pair apart.
        ("SESSION_MANAGER", None),
        ("SESSION", None),
        ("ID_SESSION", None),
        ("SESSION_USER_ID", None),
        ("SALT", None),
        ("SIGNING_MODE", None),
        ("SALT_SIGNING", None),
    ] {
        assert_eq!(secret_name_match(name).as_deref(), expected, "{name}");
    }
}

#[test]
fn every_stem_is_caught_inside_a_longer_word() {
    for stem in SECRET_STEMS {
        let upper = stem.to_uppercase();
        for name in [
            format!("DB{upper}"),
            format!("MY{upper}VALUE"),
            format!("X{upper}2"),
        ] {
            assert_eq!(
                secret_name_match(&name).as_deref(),
                Some(stem),
                "{name} holds the stem {stem}"
            );
        }
    }
    // Words run together across separators count too (the note: "the words run together").
    assert_eq!(
        secret_name_match("AWS_ACCESS_KEYID").as_deref(),
        Some("accesskey")
    );
}

/// Names that hold a secret word only as part of a longer, harmless word, and shell state.
#[test]
fn near_miss_names_survive() {
    for name in [
        "PATH",
        "HOME",
        "PWD",
        "OLDPWD",
        "TOKENIZERS_PARALLELISM",
        "KEYBOARD_LAYOUT",
        "KEYMAP",
        "MONKEY",
        "TURKEY_MODE",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "AUTHORITY",
        "XAUTHORITY",
        "PASSAGE_DIR",
        "PASSENGER_ROOT",
        "COMPASS",
        "BYPASS_PROXY",
        "PATCH_LEVEL",
        "PATTERN",
        "XDG_DATA_DIRS",
        "COOKIECUTTER_CONFIG",
        "TOKENIZER",
    ] {
        assert_eq!(secret_name_match(name), None, "{name} must survive");
    }
}

fn repeat(c: char, n: usize) -> String {
    std::iter::repeat_n(c, n).collect()
}

/// Every credential shape of the value rule, at the shortest length it needs, and one character
/// shorter (which must survive). Lengths are the note's, written out.
#[test]
fn every_value_shape_is_caught_from_its_minimum_length_and_not_below() {
    // (kind, the prefix, the characters the shape needs after it)
    let shapes: &[(&str, &str, usize)] = &[
        ("GitHub token", "ghp_", 30),
        ("GitHub token", "gho_", 30),
        ("GitHub token", "ghu_", 30),
        ("GitHub token", "ghs_", 30),
        ("GitHub token", "ghr_", 30),
        ("GitHub token", "github_pat_", 30),
        ("GitLab token", "glpat-", 20),
        ("GitLab token", "gldt-", 20),
        ("GitLab token", "glrt-", 20),
        ("GitLab token", "glptt-", 20),
        ("GitLab token", "glcbt-", 20),
        ("GitLab token", "glft-", 20),
        ("GitLab token", "glimt-", 20),
        ("GitLab token", "gloas-", 20),
        ("GitLab token", "glsoat-", 20),
        ("Slack token", "xoxa-", 10),
        ("Slack token", "xoxb-", 10),
        ("Slack token", "xoxp-", 10),
        ("Slack token", "xoxo-", 10),
        ("Slack token", "xoxs-", 10),
        ("Slack token", "xoxr-", 10),
        ("Slack token", "xoxe-", 10),
        ("Slack token", "xapp-", 10),
        ("Anthropic API key", "sk-ant-", 20),
        ("OpenAI API key", "sk-", 20),
        ("OpenAI API key", "sk-proj-", 20),
        ("OpenAI API key", "sk-svcacct-", 20),
        ("OpenAI API key", "sk-admin-", 20),
        ("Stripe key", "sk_live_", 10),
        ("Stripe key", "sk_test_", 10),
        ("Stripe key", "rk_live_", 10),
        ("Stripe key", "rk_test_", 10),
        ("Stripe key", "whsec_", 10),
        ("Hugging Face token", "hf_", 30),
    ];
    for (kind, prefix, needed) in shapes {
        let caught = format!("{prefix}{}", repeat('a', *needed));
        assert_eq!(secret_value_match(&caught), Some(*kind), "{caught}");
        let embedded = format!("Authorization: Bearer {caught} trailing");
        assert_eq!(secret_value_match(&embedded), Some(*kind), "{embedded}");
        let short = format!("{prefix}{}", repeat('a', needed - 1));
        // A shorter `sk-ant-…` is still long enough for the generic `sk-` shape: that is fine,
        // the value is scrubbed either way.
        let still = secret_value_match(&short);
        assert!(
            still.is_none() || (prefix.starts_with("sk-") && still == Some("OpenAI API key")),
            "{short} is too short for a {kind}, got {still:?}"
        );
    }
}

#[test]
fn fixed_length_shapes_are_caught_at_exactly_their_length() {
    for prefix in ["AKIA", "ASIA", "ABIA", "ACCA", "AROA", "AIDA"] {
        let key = format!("{prefix}{}", repeat('Z', 16));
        assert_eq!(secret_value_match(&key), Some("AWS access key id"), "{key}");
        let in_text = format!("id={key};");
        assert_eq!(
            secret_value_match(&in_text),
            Some("AWS access key id"),
            "{in_text}"
        );
        for near in [
            format!("{prefix}{}", repeat('Z', 15)),
            format!("{prefix}{}", repeat('Z', 17)),
            format!("{prefix}{}", repeat('z', 16)),
        ] {
            assert_eq!(secret_value_match(&near), None, "{near}");
        }
    }
    let npm = format!("npm_{}", repeat('a', 36));
    assert_eq!(secret_value_match(&npm), Some("npm token"));
    for near in [
        format!("npm_{}", repeat('a', 35)),
        format!("npm_{}", repeat('a', 37)),
    ] {
        assert_eq!(secret_value_match(&near), None, "{near}");
    }
}

#[test]
fn structured_value_shapes_are_caught_and_their_near_misses_survive() {
    for (value, kind) in [
        ("eyJhbGciOi.eyJzdWIiOi.signature", Some("JSON Web Token")),
        ("eyJhbGciOi.eyJzdWIiOi.", Some("JSON Web Token")),
        ("eyJabcde.eyJabcde.x", Some("JSON Web Token")),
        ("eyJabcde.notajwt.x", None),
        ("eyJabcd.eyJabcde.x", None),
        ("eyJabcde.eyJabcd.x", None),
        ("-----BEGIN PRIVATE KEY-----", Some("PEM private key")),
        ("-----BEGIN RSA PRIVATE KEY-----", Some("PEM private key")),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            Some("PEM private key"),
        ),
        (
            "-----BEGIN ENCRYPTED PRIVATE KEY-----",
            Some("PEM private key"),
        ),
        ("-----BEGIN PUBLIC KEY-----", None),
        ("-----BEGIN CERTIFICATE-----", None),
        (
            "https://user:hunter2@example.com/",
            Some("URL with a password"),
        ),
        ("redis://:hunter2@cache:6379", Some("URL with a password")),
        ("git+ssh://me:pw@host/repo", Some("URL with a password")),
        ("https://user@example.com/", None),
        ("http://proxy.local:3128", None),
        ("https://example.com/a:b@c", None),
    ] {
        assert_eq!(secret_value_match(value), kind, "{value}");
    }
}

/// Ordinary values that resemble a shape but are not one.
#[test]
fn near_miss_values_survive() {
    for value in [
        "/usr/local/bin:/usr/bin:/bin",
        "en_US.UTF-8",
        "xterm-256color",
        "task-assessment-document-for-the-quarter",
        "disk-usage-report-for-the-quarter-2026",
        "ghp-0123456789abcdefghijABCDEFGHIJ0123",
        "GHP_0123456789abcdefghijABCDEFGHIJ0123",
        "sk_prod_abcdefghij0123",
        "xoxz-1234567890-abcdefghij",
        "glxyz-abcdefghij0123456789",
        "hf-abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "npm-abcdefghijklmnopqrstuvwxyz0123456789",
    ] {
        assert_eq!(secret_value_match(value), None, "{value}");
    }
}

/// The whole rule through `prepare`: what is removed, why, what is kept, what is set (and that
/// the set-list wins over inherited values).
#[test]
fn prepare_applies_both_rules_the_keep_list_and_the_set_list() {
    let vars = [
        ("PATH", "/usr/bin"),
        ("AWS_CREDS", "x"),
        ("MY_JWT", "x"),
        ("BEARER", "x"),
        ("TOKENIZERS_PARALLELISM", "false"),
        ("KEYBOARD_LAYOUT", "us"),
        ("NOTE", "glpat-abcdefghij0123456789"),
        ("KEPT_TOKEN", "t"),
        ("PAGER", "less"),
        ("GIT_PAGER", "less"),
        ("GIT_TERMINAL_PROMPT", "1"),
        ("ACP_BASH", "spoofed"),
        ("MINE", "inherited"),
    ]
    .map(|(n, v)| (OsString::from(n), OsString::from(v)));
    let policy = EnvPolicy::standard()
        .keep_env("KEPT_TOKEN")
        .set_env("MINE", "set");
    let prepared = prepare(&policy, vars.clone());
    let get = |name: &str| {
        let found: Vec<_> = prepared
            .vars
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.to_str().unwrap().to_string())
            .collect();
        assert!(found.len() <= 1, "{name} is set {} times", found.len());
        found.into_iter().next()
    };
    assert_eq!(get("PATH").as_deref(), Some("/usr/bin"));
    assert_eq!(get("TOKENIZERS_PARALLELISM").as_deref(), Some("false"));
    assert_eq!(get("KEYBOARD_LAYOUT").as_deref(), Some("us"));
    assert_eq!(get("KEPT_TOKEN").as_deref(), Some("t"));
    for gone in ["AWS_CREDS", "MY_JWT", "BEARER", "NOTE"] {
        assert_eq!(get(gone), None, "{gone}");
    }
    assert_eq!(get("PAGER").as_deref(), Some("cat"));
    assert_eq!(get("GIT_PAGER").as_deref(), Some("cat"));
    assert_eq!(get("GIT_TERMINAL_PROMPT").as_deref(), Some("0"));
    assert_eq!(get("ACP_BASH").as_deref(), Some(env!("CARGO_PKG_VERSION")));
    assert_eq!(get("MINE").as_deref(), Some("set"));
    let removed: Vec<(&str, String)> = prepared
        .removed
        .iter()
        .map(|s| (s.name.as_str(), s.reason.to_string()))
        .collect();
    assert_eq!(
        removed,
        [
            ("AWS_CREDS", "its name holds `creds`".to_string()),
            ("BEARER", "its name holds `bearer`".to_string()),
            ("MY_JWT", "its name holds `jwt`".to_string()),
            ("NOTE", "its value looks like a GitLab token".to_string()),
        ]
    );
    assert_eq!(
        prepared.removed[3].reason,
        ScrubReason::Value("GitLab token")
    );

    // Scrub off: everything inherited stays, the four are still set.
    let off = prepare(&EnvPolicy::default(), vars);
    assert!(off.removed.is_empty());
    for name in ["AWS_CREDS", "MY_JWT", "BEARER", "NOTE", "PATH"] {
        assert!(off.vars.iter().any(|(n, _)| n == name), "{name}");
    }
    assert!(off.vars.iter().any(|(n, v)| n == "PAGER" && v == "cat"));
}

/// End to end: the real binary, started with secrets in its environment, runs `env` for a
/// client; none of the secrets, and all of the near misses, reach the command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_keeps_secrets_from_commands_and_near_misses_reach_them() {
    use crate::support::acp::*;
    let (_tmp, dir) = temp_dir();
    let secret_value = format!("ghp_{}", repeat('A', 36));
    let mut client = client(ClientProfile::Plain);
    let secrets = [
        "AWS_CREDS",
        "MY_JWT",
        "BEARER",
        "GPG_PASSPHRASE",
        "APP_SIGNING_SALT",
        "DBPASSWORD",
    ];
    let survivors = ["TOKENIZERS_PARALLELISM", "KEYBOARD_LAYOUT", "PASSAGE_DIR"];
    for name in secrets.iter().chain(&survivors) {
        client = client.env(*name, format!("value-of-{name}"));
    }
    client = client.env("INNOCENT_LOOKING", secret_value.clone());
    let transcript = client.transcript();
    let turn = guard(
        "env scrub end to end",
        client.run(async |mut c| {
            let session = c.new_session(&dir).await?;
            c.prompt(&session, "env").await
        }),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:?}\n{}", transcript.stderr().join("\n")));
    let block = console_block(&turn.updates);
    for name in secrets {
        assert!(
            !block.contains(name),
            "{name} reached the command:\n{block}"
        );
    }
    assert!(!block.contains(&secret_value), "a token value reached it");
    for name in survivors {
        assert!(
            block.contains(&format!("{name}=value-of-{name}")),
            "{name} must survive:\n{block}"
        );
    }
    assert!(block.contains("GIT_TERMINAL_PROMPT=0"), "{block}");
}
