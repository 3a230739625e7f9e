//! The shell state that carries over to a session's next command besides its directory:
//! exported variables (and `unset`), what `source .venv/bin/activate` sets, and the previous
//! directory for `cd -` (never the agent's own `OLDPWD`). Taken only from the run's private
//! report pipe, bounded, never holding a value the scrub removed, never an engine-owned name.
//! Real bash; the default (workspace) sandbox mode unless a test says otherwise; the hostile
//! ones run as root and as `nobody`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use acp_bash::exec::{Engine, EngineConfig, Exit, RunRequest, Session};
use acp_bash::sandbox::Mode;
use tokio_util::sync::CancellationToken;

use crate::support::engine::{hang_guard, run};

/// A secret-looking value the agent has in its environment (the scrub removes it).
const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ0123";

/// An engine in `mode` whose environment is this process's plus `extra`.
fn engine(mode: Mode, extra: &[(&str, &str)]) -> Engine {
    let extra: Vec<(OsString, OsString)> = extra
        .iter()
        .map(|(n, v)| (OsString::from(n), OsString::from(v)))
        .collect();
    Engine::with_environment(
        EngineConfig::default().sandbox_mode(mode),
        std::env::vars_os()
            .filter(|(name, _)| !extra.iter().any(|(n, _)| n == name))
            .chain(extra.clone()),
    )
}

/// A fresh workspace (canonical path) with subdirectories `a` and `b`.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("a")).unwrap();
    std::fs::create_dir(root.join("b")).unwrap();
    (tmp, root)
}

fn session(root: &Path) -> Session {
    engine(Mode::Workspace, &[]).session(root).unwrap()
}

/// The output with the sandbox's first-run notices (which differ between machines) left out.
fn own_output(output: &str) -> String {
    output
        .lines()
        .filter(|line| !line.starts_with("[acp-bash: ") || line.contains("exported variable"))
        .map(|line| format!("{line}\n"))
        .collect()
}

#[tokio::test]
async fn an_export_reaches_the_next_command_and_its_children_and_unset_removes_it() {
    let (_tmp, root) = workspace();
    let s = engine(Mode::Workspace, &[("FROM_AGENT", "agent")])
        .session(&root)
        .unwrap();
    let set = run(&s, "export GREETING='hello world'; plain=not-exported").await;
    assert_eq!(own_output(&set.output), "");
    let seen = run(
        &s,
        "echo \"$GREETING|${plain-unset}\"; bash -c 'echo child:$GREETING'",
    )
    .await;
    assert_eq!(
        own_output(&seen.output),
        "hello world|unset\nchild:hello world\n"
    );

    run(&s, "unset GREETING FROM_AGENT").await;
    let gone = run(
        &s,
        "echo \"${GREETING-unset} ${FROM_AGENT-unset}\"; env | grep -c '^FROM_AGENT=' || true",
    )
    .await;
    assert_eq!(own_output(&gone.output), "unset unset\n0\n");
    let state = s.shell_state();
    assert_eq!(state.vars.get("FROM_AGENT"), Some(&None), "{state:?}");
    assert!(
        !state.vars.contains_key("GREETING"),
        "back to the agent's: nothing kept"
    );

    // Set back to the agent's own value: nothing is kept either.
    run(&s, "export FROM_AGENT=agent").await;
    assert!(s.shell_state().vars.is_empty(), "{:?}", s.shell_state());
}

#[tokio::test]
async fn sourcing_a_venv_activate_script_changes_path_and_virtual_env_for_the_next_command() {
    let (_tmp, root) = workspace();
    let bin = root.join(".venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    // What `python -m venv` writes, in short: a variable, PATH, PS1, and a function.
    std::fs::write(
        bin.join("activate"),
        "deactivate () { export PATH=\"$_OLD_VIRTUAL_PATH\"; unset VIRTUAL_ENV; }\n\
         VIRTUAL_ENV=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")/..\" && pwd)\"\nexport VIRTUAL_ENV\n\
         _OLD_VIRTUAL_PATH=\"$PATH\"\nPATH=\"$VIRTUAL_ENV/bin:$PATH\"\nexport PATH\n\
         PS1=\"(.venv) ${PS1-}\"\n",
    )
    .unwrap();
    let tool = bin.join("venv-tool");
    std::fs::write(&tool, "#!/bin/sh\necho from the venv\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let s = session(&root);
    let path_before = run(&s, "echo $PATH").await.output;
    run(&s, "source .venv/bin/activate").await;
    let after = run(
        &s,
        "echo \"$VIRTUAL_ENV\"; venv-tool; echo $PATH; declare -F deactivate || echo no function",
    )
    .await;
    let venv = root.join(".venv");
    assert_eq!(
        own_output(&after.output),
        format!(
            "{}\nfrom the venv\n{}/bin:{}no function\n",
            venv.display(),
            venv.display(),
            own_output(&path_before)
        )
    );
}

#[tokio::test]
async fn cd_minus_goes_where_the_session_was_before_its_last_cd_never_to_the_agents_oldpwd() {
    let (_tmp, root) = workspace();
    let editor_dir = tempfile::tempdir().unwrap();
    let s = engine(
        Mode::Workspace,
        &[("OLDPWD", editor_dir.path().to_str().unwrap())],
    )
    .session(&root)
    .unwrap();
    let first = run(&s, "echo \"[${OLDPWD-}]\"; cd - 2>&1; pwd").await;
    let first_output = own_output(&first.output);
    assert!(
        first_output.starts_with("[]\n")
            && first_output.contains("cd: OLDPWD not set\n")
            && first_output.ends_with(&format!("\n{}\n", root.display())),
        "{first_output}"
    );
    assert_eq!(
        first.next_cwd, root,
        "the agent's OLDPWD did not move the session"
    );

    run(&s, "cd a; cd ../b").await;
    assert_eq!(s.cwd(), root.join("b"));
    assert_eq!(s.shell_state().previous_dir, Some(root.join("a")));
    let back = run(&s, "cd - >/dev/null; pwd").await;
    assert_eq!(
        own_output(&back.output),
        format!("{}\n", root.join("a").display())
    );
    assert_eq!(s.cwd(), root.join("a"));
    let again = run(&s, "cd - >/dev/null; pwd").await;
    assert_eq!(
        own_output(&again.output),
        format!("{}\n", root.join("b").display())
    );
}

#[tokio::test]
async fn values_with_newlines_equals_quotes_and_binary_bytes_survive_exactly() {
    let (_tmp, root) = workspace();
    let s = session(&root);
    let set = run(
        &s,
        r#"export LINES_=$'one\ntwo\n' EQ='a=b==c=' Q="it's \"quoted\" \$HOME \`x\` \\" BIN=$'\x01\x1b[0m\x7f\xfe\xff\t' EMPTY= UTF='é ü'"#,
    )
    .await;
    assert_eq!(own_output(&set.output), "");
    let state = s.shell_state();
    let value = |name: &str| state.vars[name].as_ref().unwrap().as_bytes().to_vec();
    assert_eq!(value("LINES_"), b"one\ntwo\n");
    assert_eq!(value("EQ"), b"a=b==c=");
    assert_eq!(value("Q"), b"it's \"quoted\" $HOME `x` \\");
    assert_eq!(value("BIN"), b"\x01\x1b[0m\x7f\xfe\xff\t");
    assert_eq!(value("EMPTY"), b"");
    assert_eq!(value("UTF"), "é ü".as_bytes());
    let seen = run(
        &s,
        "for v in LINES_ EQ Q BIN EMPTY UTF; do printf '%s' \"${!v}\" | od -An -tx1 | tr -d ' \\n'; echo; done",
    )
    .await;
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let expected: String = ["LINES_", "EQ", "Q", "BIN", "EMPTY", "UTF"]
        .iter()
        .map(|name| format!("{}\n", hex(&value(name))))
        .collect();
    assert_eq!(own_output(&seen.output), expected);
}

#[tokio::test]
async fn a_scrubbed_variable_never_reappears_under_any_name() {
    let (_tmp, root) = workspace();
    let s = engine(Mode::Workspace, &[("GITHUB_TOKEN", TOKEN)])
        .session(&root)
        .unwrap();
    // A command that found the secret elsewhere exports it: it is not carried over, and says so.
    let leak = run(
        &s,
        &format!("export COPIED={TOKEN} GITHUB_TOKEN={TOKEN}; export -p >/dev/null"),
    )
    .await;
    assert!(
        leak.output
            .contains("not carried over to the next command: COPIED, GITHUB_TOKEN"),
        "{}",
        leak.output
    );
    let next = run(&s, "env | grep -c ghp_ || true; echo ${COPIED-unset}").await;
    assert_eq!(own_output(&next.output), "0\nunset\n");
    assert!(s.shell_state().vars.is_empty(), "{:?}", s.shell_state());
    // A value of the user's own under that name is theirs.
    run(&s, "export GITHUB_TOKEN=my-own").await;
    let own = run(&s, "echo $GITHUB_TOKEN").await;
    assert_eq!(own_output(&own.output), "my-own\n");
}

#[tokio::test]
async fn names_the_engine_owns_are_never_captured() {
    let (_tmp, root) = workspace();
    let engine = engine(Mode::Workspace, &[]);
    let s = engine.session(&root).unwrap();
    run(
        &s,
        "export PAGER=less EDITOR=vim GIT_PAGER=less ACP_BASH=fake SHLVL=9 TMPDIR=/nowhere \
         BASH_ENV=/tmp/evil __acp_bash_start_dir=/ MINE=1; set -o errexit; export SHELLOPTS",
    )
    .await;
    let state = s.shell_state();
    assert_eq!(state.vars.keys().collect::<Vec<_>>(), ["MINE"], "{state:?}");
    // The next command sees what a fresh session's first command sees, and MINE.
    let probe = "echo \"$PAGER|$GIT_PAGER|${BASH_ENV-unset}|$SHLVL|${TMPDIR-unset}|$ACP_BASH|$EDITOR|$__acp_bash_start_dir|$-|${MINE-unset}\"";
    let next = run(&s, probe).await;
    let fresh = run(&engine.session(&root).unwrap(), probe).await;
    assert_eq!(
        own_output(&next.output),
        own_output(&fresh.output).replace("|unset\n", "|1\n")
    );
    assert!(!own_output(&next.output).contains("|9|"), "{}", next.output);

    // A run's own variables (env_set) are the request's, not the session's.
    let request = RunRequest::new("export ONE_OFF=changed OTHER=2").set_env("ONE_OFF", "1");
    s.run(request, &mut |_: &str| {}, &CancellationToken::new())
        .await;
    let next = run(&s, "echo ${ONE_OFF-unset} $OTHER").await;
    assert_eq!(own_output(&next.output), "unset 2\n");
}

#[tokio::test]
async fn an_export_over_the_bound_is_refused_with_a_notice_and_the_old_state_kept() {
    let (_tmp, root) = workspace();
    let s = session(&root);
    run(&s, "export KEEP=1").await;
    let big = run(
        &s,
        "export BIG=$(head -c 1048576 /dev/zero | tr '\\0' x) KEEP=2; echo done",
    )
    .await;
    assert_eq!(big.status.exit, Exit::Code(0));
    assert!(
        big.output.contains(
            "[acp-bash: the exported variable BIG holds 1048580 bytes, over the 128 KiB one \
             variable may hold (the kernel would refuse to start any command with it): the \
             session's exported variables stay as they were]"
        ),
        "{}",
        big.output
    );
    assert!(big.notices.iter().any(|n| n.contains("BIG holds")));
    let next = run(&s, "echo ${BIG-unset} $KEEP").await;
    assert_eq!(own_output(&next.output), "unset 1\n");

    // Three of 100 KiB each: over the 256 KiB in all.
    let many = run(
        &s,
        "x=$(head -c 102400 /dev/zero | tr '\\0' x); export V1=$x V2=$x V3=$x",
    )
    .await;
    assert!(
        many.output
            .contains("over the 256 KiB acp-bash carries over"),
        "{}",
        many.output
    );
    assert_eq!(s.shell_state().vars.keys().collect::<Vec<_>>(), ["KEEP"]);
}

#[tokio::test]
async fn state_carries_over_a_mode_change_and_a_one_off_directory_leaves_it_alone() {
    let (_tmp, root) = workspace();
    let s = session(&root);
    run(&s, "export ACROSS=modes").await;
    s.set_mode(Mode::Full);
    let full = run(&s, "echo $ACROSS").await;
    assert_eq!(own_output(&full.output), "modes\n");
    s.set_mode(Mode::ReadOnly);
    let read_only = run(&s, "echo $ACROSS").await;
    assert_eq!(own_output(&read_only.output), "modes\n");
    s.set_mode(Mode::Workspace);
    // A run in a directory of its own (as a background job runs) starts with the state but
    // changes it no more than its `cd` moves the session.
    let one_off = RunRequest::new("echo $ACROSS; export ACROSS=one-off; cd ../b").cwd("a");
    let outcome = s
        .run(one_off, &mut |_: &str| {}, &CancellationToken::new())
        .await;
    assert_eq!(own_output(&outcome.output), "modes\n");
    let after = run(&s, "echo $ACROSS; echo ${OLDPWD-none}").await;
    assert_eq!(own_output(&after.output), "modes\nnone\n");
}

/// Runs `script` in a session of its own in workspace mode, on a fresh runtime.
fn hostile(test: &str, body: impl AsyncFnOnce(&Session, &Session, &Path)) {
    crate::support::sandbox::as_root_and_nobody(test, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (_tmp, root) = workspace();
            let engine = engine(Mode::Workspace, &[]);
            let mine = engine.session(&root).unwrap();
            let other = engine.session(&root).unwrap();
            tokio::time::timeout(hang_guard(), body(&mine, &other, &root))
                .await
                .expect("the hostile test hung");
        });
    });
}

#[test]
fn garbage_on_fd_63_changes_nothing_and_says_so() {
    hostile(
        "exec::shell_state::garbage_on_fd_63_changes_nothing_and_says_so",
        async |s, _, root| {
            run(s, "export BEFORE=1").await;
            for garbage in [
                r"printf 'garbage' >&63",
                r#"printf '\0declare -x FORGED="1"\n\0' >&63"#,
                r"printf '\0\0\0\0' >&63",
                r"printf '/\n\0declare -x X=$'\''\n' >&63",
                r"head -c 300000 /dev/urandom >&63",
            ] {
                let outcome = run(s, &format!("{garbage}; export AFTER=1; cd a")).await;
                assert_eq!(outcome.status.exit, Exit::Code(0), "{garbage}");
                assert!(
                    outcome
                        .output
                        .contains("the session's exported variables stay as they were"),
                    "{garbage}: {}",
                    outcome.output
                );
                assert_eq!(
                    s.shell_state().vars.keys().collect::<Vec<_>>(),
                    ["BEFORE"],
                    "{garbage}"
                );
                s.restore_cwd(root.to_path_buf());
            }
        },
    );
}

#[test]
fn a_forged_report_reaches_only_its_own_session_and_never_owned_names() {
    hostile(
        "exec::shell_state::a_forged_report_reaches_only_its_own_session_and_never_owned_names",
        async |s, other, root| {
            // The command writes a whole report of its own and closes the fd, so the prelude's
            // cannot follow: it is taken like the command's own exports, and no more.
            let forged = format!(
                "printf '%s\\n' 'declare -x PAGER=\"less\"' 'declare -x BASH_ENV=\"/tmp/evil\"' \
                 'declare -x LD_PRELOAD=\"/tmp/x.so\"' 'declare -x FORGED=\"yes\"' \
                 'declare -x OLDPWD=\"/\"' >&63; printf '\\0%s\\n' {} >&63; exec 63>&-",
                root.join("b").display()
            );
            let outcome = run(s, &forged).await;
            assert_eq!(outcome.status.exit, Exit::Code(0), "{}", outcome.output);
            let state = s.shell_state();
            // Everything else of the agent's environment is gone from the forged listing: that
            // is an unset of each, which a command could do itself.
            assert_eq!(state.vars.get("FORGED"), Some(&Some("yes".into())));
            assert_eq!(
                state.vars.get("LD_PRELOAD"),
                Some(&Some("/tmp/x.so".into()))
            );
            assert!(!state.vars.contains_key("PAGER") && !state.vars.contains_key("BASH_ENV"));
            assert_eq!(s.cwd(), root.join("b"));
            assert_eq!(state.previous_dir, Some(PathBuf::from("/")));
            let next = run(s, "echo \"$PAGER ${BASH_ENV-unset}\"").await;
            assert!(next.output.ends_with("cat unset\n"), "{}", next.output);
            // The other session of the same engine saw nothing.
            let seen = run(other, "echo ${FORGED-unset} ${LD_PRELOAD-unset}; pwd").await;
            assert_eq!(
                own_output(&seen.output),
                format!("unset unset\n{}\n", root.display())
            );
            assert!(other.shell_state().is_empty());
        },
    );
}

/// The report is a file whose size is sealed (8 MiB, twice the 4 MiB the engine keeps): a
/// writer that never stops (nothing reads it while the command runs, so nothing drains it) is
/// stopped there by a failing write, in every mode, and the report it spoiled changes nothing.
#[test]
fn a_writer_that_never_stops_on_fd_63_is_stopped_at_the_bound_in_every_mode() {
    hostile(
        "exec::shell_state::a_writer_that_never_stops_on_fd_63_is_stopped_at_the_bound_in_every_mode",
        async |s, _, _| {
            for mode in [Mode::Off, Mode::Full, Mode::Workspace, Mode::ReadOnly] {
                s.set_mode(mode);
                run(s, "export BEFORE=1").await;
                let outcome = run(
                    s,
                    "yes >&63; echo \"yes ended: $?\"; stat -L -c %s /proc/self/fd/63; \
                     : > /proc/self/fd/63 && echo emptied; export AFTER=1",
                )
                .await;
                let text = &outcome.output;
                assert_eq!(outcome.status.exit, Exit::Code(0), "{mode:?}: {text}");
                assert!(text.contains("yes ended: 1\n8388608\n"), "{mode:?}: {text}");
                assert!(!text.contains("emptied"), "{mode:?}: truncated: {text}");
                assert!(
                    text.contains("the session's exported variables stay as they were"),
                    "{mode:?}: {text}"
                );
                let vars = s.shell_state().vars;
                assert!(vars.contains_key("BEFORE") && !vars.contains_key("AFTER"), "{mode:?}: {vars:?}");
            }
        },
    );
}

#[test]
fn a_flood_or_a_held_fd_63_neither_hangs_nor_crashes_the_agent() {
    hostile(
        "exec::shell_state::a_flood_or_a_held_fd_63_neither_hangs_nor_crashes_the_agent",
        async |s, _, _| {
            run(s, "export BEFORE=1").await;
            // 20 MB at once (over the bound: refused), a writer left running (it races the
            // report: either may win), a process holding the fd (the report is whole), the fd
            // closed (no report: nothing changes).
            for (script, kept) in [
                (
                    "head -c 20000000 /dev/zero >&63; export AFTER=1",
                    Some(false),
                ),
                ("yes >&63 & export AFTER=1", None),
                ("sleep 1000 63>&63 & export AFTER=1", Some(true)),
                ("exec 63>&-; export AFTER=2", Some(false)),
            ] {
                run(s, "unset AFTER").await;
                let outcome = run(s, script).await;
                assert_eq!(
                    outcome.status.exit,
                    Exit::Code(0),
                    "{script}: {}",
                    outcome.output
                );
                if let Some(kept) = kept {
                    assert_eq!(
                        s.shell_state().vars.contains_key("AFTER"),
                        kept,
                        "{script}: {:?}",
                        s.shell_state()
                    );
                }
                let next = run(s, "echo $BEFORE").await;
                assert!(next.output.ends_with("1\n"), "{script}: {}", next.output);
            }
        },
    );
}
