//! Stateless commands (`exec::stateless`): a script the scanner takes as unable to change its
//! shell's directory and exported variables runs without the prelude and its report. The oracle
//! is bash itself: every script the scanner accepts, run with an EXIT trap of its own that lists
//! `export -p` and `pwd` before and after, must show no change. And through the engine: such a
//! command sees no report fd, while the state the other commands make still carries over.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;

use acp_bash::exec::stateless::{
    cannot_change_state, BASH_BUILTINS, HARMLESS_BUILTINS, RESERVED_WORDS,
};
use acp_bash::exec::{Engine, EngineConfig};
use acp_bash::sandbox::Mode;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

use crate::support::engine::run;

/// The listing and directory of a bash that runs `script`, taken by bash before the script (from
/// `BASH_ENV`) and at its exit (an EXIT trap); `None` for the second when the shell never ran its
/// EXIT trap. Independent of the engine: only bash, a temp dir and two memory files.
fn before_and_after(script: &str) -> (String, Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let snapshot = "{ builtin export -p; builtin pwd; }";
    let setup = dir.path().join("setup.sh");
    std::fs::write(
        &setup,
        format!("builtin unset BASH_ENV\n{snapshot} >&7\nbuiltin trap '{snapshot} >&8' EXIT\n"),
    )
    .unwrap();
    let files = [7, 8].map(|_| {
        // An unlinked temp file (every platform), then a dup of it above 100 (so that the
        // child's dup2 onto 7 and 8 never overwrites the other one); the first closes.
        let first = tempfile::tempfile().expect("an unlinked temp file");
        // SAFETY: fcntl on an fd we own; the new fd is ours.
        let raw = unsafe { libc::fcntl(first.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 100) };
        assert!(raw >= 100, "F_DUPFD_CLOEXEC");
        // SAFETY: a fresh fd, owned once.
        unsafe { std::fs::File::from_raw_fd(raw) }
    });
    let raws = [files[0].as_raw_fd(), files[1].as_raw_fd()];
    let mut command = std::process::Command::new("bash");
    command
        .args(["-c", script])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("HOME", dir.path())
        .env("EXPORTED", "from the agent")
        .env("BASH_ENV", &setup)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: dup2 only, between fork and exec.
    unsafe {
        command.pre_exec(move || {
            for (raw, fd) in raws.into_iter().zip([7, 8]) {
                if libc::dup2(raw, fd) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    command.status().unwrap();
    let [mut before, mut after] = files;
    let read = |file: &mut std::fs::File| {
        use std::io::Seek;
        file.rewind().unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        // `_` is the last argument of the last command: not state that carries over.
        text.lines()
            .filter(|line| !line.starts_with("declare -x _="))
            .map(|line| format!("{line}\n"))
            .collect::<String>()
    };
    let after = read(&mut after);
    (read(&mut before), (!after.is_empty()).then_some(after))
}

/// The oracle itself fails where it should: each of these changes the listing or the directory.
#[test]
fn the_oracle_sees_an_export_an_unset_and_a_cd() {
    for script in [
        "export NEW=1",
        "unset EXPORTED",
        "EXPORTED=changed",
        "cd sub",
    ] {
        let (before, after) = before_and_after(script);
        assert_ne!(Some(before), after, "{script:?} changed nothing?");
    }
    let (before, after) = before_and_after("true");
    assert_eq!(Some(before), after);
}

/// The words scripts are made of: commands (harmless, builtins that change the shell, reserved
/// words, assignments, quoted names), arguments and separators.
fn word() -> impl Strategy<Value = &'static str> {
    let harmless = prop::sample::select(vec![
        "true",
        "false",
        "echo",
        "ls",
        "cat",
        "test",
        "env",
        "umask",
        "hash",
        "type",
        "ulimit",
        "-n",
        "-a",
        ".",
        "sub",
        "/dev/null",
        "'a b'",
        "\"c d\"",
        ">out",
        "2>&1",
        "<out",
        "exit",
    ]);
    // Each of these changes the listing or the directory when it runs as a command.
    let others = prop::sample::select(vec![
        "export NEW=1",
        "EXPORTED=x",
        "unset EXPORTED",
        "cd sub",
        "\"export\" NEW=1",
        "e'xport' NEW=1",
        "\"cd\" sub",
        "time cd sub",
        "command cd sub",
        "builtin cd sub",
        "eval cd sub",
        "declare -x NEW=1",
        "typeset -x NEW=1",
        "readonly EXPORTED",
        "read EXPORTED </dev/null",
        "printf -v EXPORTED %s p",
        "getopts a EXPORTED",
        "let EXPORTED=3",
        "set -a; NEW=1",
        "pushd sub",
        "echo $((EXPORTED=2))",
        "true {EXPORTED}>out",
        "if cd sub; then :; fi",
        "for EXPORTED in 1; do :; done",
        "f() { cd sub; }; f",
        "{ cd sub; }",
        "! cd sub",
        "echo `export NEW=1` && export NEW=1",
        ">out cd sub",
        "2>out cd sub",
        "source /dev/stdin <<<'cd sub'",
        "exec 3>out; cd sub",
        "mapfile EXPORTED </dev/null",
        "cd\\\n sub",
        "cd sub # comment",
        "f () ((EXPORTED=2)); f",
        // Text the scanner must not take for an opening quote, which would hide the `cd`.
        "cat <<EOF\n'\nEOF\ncd sub\n'",
        "# '\ncd sub\n'",
        "echo \\'\ncd sub\n'",
    ]);
    prop_oneof![4 => harmless, 1 => others]
}

fn separator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        " ", " ", " ", " ", "; ", " && ", " || ", " | ", " & ", "\n",
    ])
}

fn script() -> impl Strategy<Value = String> {
    prop::collection::vec((word(), separator()), 1..7).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(word, separator)| format!("{word}{separator}"))
            .collect()
    })
}

proptest! {
    // About a quarter of the scripts made are accepted, so about 1 100 are refused (not run)
    // on the way to 400 cases: far above proptest's default limit of 1 024 refusals.
    #![proptest_config(ProptestConfig {
        cases: 400,
        max_global_rejects: 20_000,
        ..ProptestConfig::default()
    })]

    /// Every script the scanner accepts leaves bash's exported variables and directory as they
    /// were, as bash itself lists them.
    #[test]
    fn what_the_scanner_accepts_bash_shows_changes_nothing(script in script()) {
        prop_assume!(cannot_change_state(&script));
        let (before, after) = before_and_after(&script);
        // A shell that never ran its EXIT trap (`exit` runs it) left no state at all.
        if let Some(after) = after {
            prop_assert_eq!(before, after, "{:?} changed its shell", script);
        }
    }
}

/// The generator is not vacuous: it makes accepted and refused scripts alike, and every refused
/// word of the pool really is refused when it leads.
#[test]
fn the_generator_makes_both_kinds() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..400 {
        let script = script().new_tree(&mut runner).unwrap().current();
        if cannot_change_state(&script) {
            accepted += 1;
        } else {
            refused += 1;
        }
    }
    assert!(
        accepted >= 40 && refused >= 40,
        "{accepted} accepted, {refused} refused"
    );
}

/// The lists match the bash that runs commands here: every builtin and reserved word it knows is
/// in the scanner's lists (a new builtin of a later bash is refused until looked at).
#[test]
fn the_scanners_lists_cover_this_bash() {
    let list = |flag: &str| {
        let out = std::process::Command::new("bash")
            .args(["-c", &format!("compgen {flag}")])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    for builtin in list("-b").lines() {
        assert!(
            BASH_BUILTINS.contains(&builtin),
            "builtin {builtin} is not listed"
        );
    }
    for word in list("-k").lines() {
        let plain = word.bytes().all(|b| b.is_ascii_alphabetic());
        assert!(
            !plain || RESERVED_WORDS.contains(&word),
            "reserved word {word} is not listed"
        );
        assert!(!cannot_change_state(word), "{word} leads a command");
    }
    for builtin in BASH_BUILTINS {
        assert_eq!(
            cannot_change_state(builtin),
            HARMLESS_BUILTINS.contains(builtin),
            "{builtin}"
        );
    }
}

fn engine(mode: Mode, extra: &[(&str, &str)]) -> Engine {
    Engine::with_environment(
        EngineConfig::default().sandbox_mode(mode),
        std::env::vars_os()
            .filter(|(name, _)| {
                name != "BASH_ENV" && !name.as_encoded_bytes().starts_with(b"BASH_FUNC_")
            })
            .chain(extra.iter().map(|(n, v)| (n.into(), v.into()))),
    )
}

/// A stateless command has no report fd (nothing but 0–2 reaches `ls`, besides the directory it
/// lists), while a command that may change the state has fd 63; and the state made around
/// stateless commands carries over through them: variables, `cd` and `cd -`.
#[tokio::test]
async fn a_stateless_command_has_no_report_fd_and_the_state_goes_on_around_it() {
    for mode in [Mode::Off, Mode::Workspace] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        let s = engine(mode, &[]).session(&root).unwrap();
        let fds = |output: &str| -> Vec<String> {
            let mut fds: Vec<String> = output
                .lines()
                .filter(|l| !l.starts_with("[acp-bash"))
                .map(str::to_string)
                .collect();
            fds.sort();
            fds
        };
        let alone = run(&s, "ls /proc/self/fd").await;
        assert_eq!(
            fds(&alone.output),
            ["0", "1", "2", "3"],
            "{mode:?}: {}",
            alone.output
        );
        let reported = run(&s, "ls /proc/self/fd $NOTHING").await;
        assert_eq!(
            fds(&reported.output),
            ["0", "1", "2", "3", "63"],
            "{mode:?}"
        );

        run(&s, "export CARRIED=1; cd a").await;
        run(&s, "true").await;
        run(&s, "ls -la").await;
        let seen = run(&s, "echo \"$CARRIED $PWD\"; cd -").await;
        assert!(
            seen.output
                .contains(&format!("1 {}\n", root.join("a").display())),
            "{mode:?}: {}",
            seen.output
        );
        let back = run(&s, "pwd").await;
        assert!(
            back.output.contains(&format!("{}\n", root.display())),
            "{}",
            back.output
        );
    }
}

/// Without the prelude, no `BASH_ENV` of the agent's is sourced (the prelude's always replaced it)
/// and none reaches the command; and an exported function in the agent's environment (an HPC
/// `module`, say) makes every command take the prelude, so what it exports carries over.
#[tokio::test]
async fn no_bash_env_is_sourced_and_an_exported_function_takes_the_prelude() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let evil = root.join("evil.sh");
    std::fs::write(&evil, "echo SOURCED\n").unwrap();
    let s = engine(
        Mode::Off,
        &[
            ("BASH_ENV", evil.to_str().unwrap()),
            ("BASH_FUNC_setvar%%", "() {  export FROM_FUNCTION=yes\n}"),
        ],
    )
    .session(&root)
    .unwrap();
    let plain = run(&s, "env").await;
    assert!(!plain.output.contains("SOURCED"), "{}", plain.output);
    assert!(!plain.output.contains("BASH_ENV="), "{}", plain.output);
    run(&s, "setvar").await;
    let seen = run(&s, "echo \"${FROM_FUNCTION-unset}\"").await;
    assert!(seen.output.contains("yes\n"), "{}", seen.output);

    let s = engine(Mode::Off, &[("BASH_ENV", evil.to_str().unwrap())])
        .session(&root)
        .unwrap();
    let plain = run(&s, "true").await;
    assert!(!plain.output.contains("SOURCED"), "{}", plain.output);
}
