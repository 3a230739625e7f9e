// The engine's cases, included once per start path by `exec/engine.rs` (which sets `MODE`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_bash::exec::{Engine, EngineConfig, Exit, RunOutcome, RunRequest, Session};
use tokio_util::sync::CancellationToken;

use crate::support::engine::hang_guard;

fn engine() -> Engine {
    engine_with(|_| {})
}

fn engine_with(adjust: impl FnOnce(&mut EngineConfig)) -> Engine {
    let mut config = EngineConfig::default().sandbox_mode(MODE);
    adjust(&mut config);
    Engine::new(config)
}

async fn run(session: &Session, script: &str) -> RunOutcome {
    run_with(
        session,
        RunRequest::new(script),
        &CancellationToken::new(),
    )
    .await
    .0
}

/// Runs and also returns every streamed chunk.
async fn run_with(
    session: &Session,
    request: RunRequest,
    cancel: &CancellationToken,
) -> (RunOutcome, Vec<String>) {
    let mut chunks = Vec::new();
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        session.run(
            request,
            &mut |chunk: &str| chunks.push(chunk.to_string()),
            cancel,
        ),
    )
    .await
    .expect("the run hung");
    (outcome, chunks)
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap()
}

/// A `sleep` duration no other process uses (`1000.<digits>`, unique per test process, tag and
/// `MODE`, since both modes' cases run at once): `$!` is a pid in the command's PID namespace,
/// not ours, so leftovers are found by their command line instead.
fn unique_sleep(tag: &str) -> String {
    let salt: u32 = tag.bytes().map(u32::from).sum();
    let mode = if MODE == acp_bash::sandbox::Mode::Off { 1 } else { 2 };
    format!("1000.{}{salt}{mode}", std::process::id())
}

/// Whether every live process running `sleep <duration>` is gone: polls the condition, with
/// [`hang_guard()`] as its deadline only (10 s was short for a killed process on a busy machine).
fn gone(duration: &str) -> bool {
    let needle = format!("sleep\0{duration}\0");
    let deadline = std::time::Instant::now() + hang_guard();
    while std::time::Instant::now() < deadline {
        let running = std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            let pid = entry
                .file_name()
                .to_string_lossy()
                .parse::<i32>()
                .unwrap_or(0);
            pid > 0
                && alive_now(pid)
                && std::fs::read(entry.path().join("cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        });
        if !running {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn alive_now(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

#[tokio::test]
async fn output_and_exit_codes_are_reported_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    for (script, exit) in [
        ("echo hi", Exit::Code(0)),
        ("false", Exit::Code(1)),
        ("exit 255", Exit::Code(255)),
    ] {
        let outcome = run(&session, script).await;
        assert_eq!(outcome.status.exit, exit, "{script}");
        assert!(!outcome.status.cancelled && outcome.status.timed_out_after.is_none());
    }
    assert_eq!(run(&session, "echo hi").await.output, "hi\n");
    let killed = run(&session, "kill -KILL $$").await;
    assert_eq!(killed.status.exit, Exit::Signal(9));
    assert_eq!(acp_bash::exec::signal_name(9), "SIGKILL");
    let segv = run(&session, "kill -SEGV $$").await;
    assert_eq!(segv.status.exit, Exit::Signal(11));
}

#[tokio::test]
async fn stdout_and_stderr_arrive_merged_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    let outcome = run(
        &session,
        "echo one; echo two >&2; echo three; echo four >&2",
    )
    .await;
    assert_eq!(outcome.output, "one\ntwo\nthree\nfour\n");
}

#[tokio::test]
async fn stdin_is_dev_null() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    let outcome = run(&session, "cat; readlink /proc/self/fd/0 || echo no-proc").await;
    assert_eq!(outcome.status.exit, Exit::Code(0));
    assert!(
        outcome.output == "/dev/null\n" || outcome.output == "no-proc\n",
        "{}",
        outcome.output
    );
}

/// stdin is one `/dev/null` the engine opens once (issue 24, point 4): on every run it is
/// there, empty, and the shell holds no other fd on `/dev/null` (the engine's own is
/// close-on-exec).
#[tokio::test]
async fn stdin_is_dev_null_on_every_run_and_only_there() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    let script = "cat; for fd in /proc/$$/fd/*; do \
                  [ \"$(readlink \"$fd\")\" = /dev/null ] && echo \"null on ${fd##*/}\"; \
                  done; true";
    for round in 0..3 {
        let outcome = run(&session, script).await;
        assert_eq!(outcome.status.exit, Exit::Code(0), "{}", outcome.output);
        assert_eq!(outcome.output, "null on 0\n", "run {round}");
    }
}

#[tokio::test]
async fn cd_carries_over_to_the_next_command() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("dir with spaces/ünïcødé");
    std::fs::create_dir_all(&sub).unwrap();
    let session = engine().session(dir.path()).unwrap();
    let outcome = run(&session, "cd 'dir with spaces/ünïcødé' && echo moved").await;
    assert_eq!(
        outcome.output, "moved\n",
        "the cwd capture must not show in the output"
    );
    assert_eq!(outcome.next_cwd, canonical(&sub));
    assert_eq!(
        run(&session, "pwd").await.output,
        format!("{}\n", canonical(&sub).display())
    );
    assert_eq!(session.cwd(), canonical(&sub));
}

#[tokio::test]
async fn cd_is_recorded_even_when_the_script_exits_with_an_error_or_sets_its_own_exit_trap() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("a")).unwrap();
    std::fs::create_dir(dir.path().join("b")).unwrap();
    let session = engine().session(dir.path()).unwrap();
    let outcome = run(&session, "cd a; exit 3").await;
    assert_eq!(outcome.status.exit, Exit::Code(3));
    assert_eq!(session.cwd(), canonical(&dir.path().join("a")));

    let outcome = run(&session, "trap 'echo cleanup $?' EXIT; cd ../b; false").await;
    assert_eq!(
        outcome.output, "cleanup 1\n",
        "the user's trap still runs and sees the status"
    );
    assert_eq!(outcome.status.exit, Exit::Code(1));
    assert_eq!(session.cwd(), canonical(&dir.path().join("b")));
}

#[tokio::test]
async fn a_failing_cd_leaves_the_cwd_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    let before = session.cwd();
    let outcome = run(&session, "cd /no/such/directory").await;
    assert_eq!(outcome.status.exit, Exit::Code(1));
    assert!(
        outcome.output.contains("No such file or directory"),
        "{}",
        outcome.output
    );
    assert_eq!(session.cwd(), before);
}

#[tokio::test]
async fn a_deleted_cwd_falls_back_to_the_root_with_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("gone")).unwrap();
    let session = engine().session(dir.path()).unwrap();
    run(&session, "cd gone").await;
    std::fs::remove_dir(dir.path().join("gone")).unwrap();
    let outcome = run(&session, "pwd").await;
    assert_eq!(outcome.status.exit, Exit::Code(0));
    assert_eq!(outcome.notices.len(), 1, "{:?}", outcome.notices);
    assert!(
        outcome.output.contains("no longer exists"),
        "{}",
        outcome.output
    );
    assert!(
        outcome
            .output
            .ends_with(&format!("{}\n", dir.path().display())),
        "{}",
        outcome.output
    );
    assert_eq!(session.cwd(), dir.path());
}

#[tokio::test]
async fn sessions_need_an_absolute_existing_directory() {
    let engine = engine();
    let relative = engine.session(Path::new("relative/dir")).err().unwrap();
    assert!(relative.to_string().contains("absolute"), "{relative}");
    let missing = engine.session(Path::new("/no/such/dir")).err().unwrap();
    assert!(
        missing.to_string().contains("existing directory"),
        "{missing}"
    );
}

#[tokio::test]
async fn binary_and_invalid_utf8_output_is_replaced_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    let outcome = run(
        &session,
        r"printf 'ok\xff\xfe\x00end\n'; head -c 3000 /dev/urandom >/dev/null",
    )
    .await;
    assert_eq!(outcome.output, "ok\u{fffd}\u{fffd}\0end\n");
    let outcome = run(&session, "head -c 100000 /dev/urandom").await;
    assert_eq!(outcome.status.exit, Exit::Code(0));
}

#[tokio::test]
async fn chunks_never_split_characters_or_escape_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    // Each printf is a separate write, cutting a character or a sequence in two at the pipe.
    let script = r"printf '\xe2\x82'; sleep 0.05; printf '\xac€ \033[3'; sleep 0.05; printf '1mred\033[0m \033]0;t'; sleep 0.05; printf 'itle\007done\n'";
    let (outcome, chunks) = run_with(
        &session,
        RunRequest::new(script),
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(
        outcome.output,
        "€€ \x1b[31mred\x1b[0m \x1b]0;title\x07done\n"
    );
    assert_eq!(chunks.concat(), outcome.output);
    for chunk in &chunks {
        let last_esc = chunk.rfind('\x1b');
        if let Some(at) = last_esc {
            let tail = &chunk[at..];
            let complete = tail.len() >= 2
                && (tail.ends_with('\x07')
                    || tail.ends_with("m")
                    || tail.contains("\x1b\\")
                    || tail.len() > 2);
            assert!(complete, "chunk ends inside an escape sequence: {chunk:?}");
        }
    }
    assert!(
        chunks.len() >= 2,
        "output was streamed in several chunks: {chunks:?}"
    );
}

#[tokio::test]
async fn the_first_chunk_arrives_while_the_command_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let session = Arc::new(engine().session(dir.path()).unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let cancel = CancellationToken::new();
    let task = {
        let (session, cancel) = (session.clone(), cancel.clone());
        tokio::spawn(async move {
            let mut send = |chunk: &str| drop(tx.send(chunk.to_string()));
            session
                .run(
                    RunRequest::new("echo ready; sleep 30"),
                    &mut send,
                    &cancel,
                )
                .await
        })
    };
    let first = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, "ready\n");
    cancel.cancel();
    let outcome = task.await.unwrap();
    assert!(outcome.status.cancelled);
}

#[tokio::test]
async fn a_timeout_kills_the_command_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    // A grace far longer than any load can delay bash's death from SIGTERM: the design promises
    // TERM first, so the shell must die of TERM, exactly.
    let session = engine_with(|c| c.kill_grace = Duration::from_secs(60))
        .session(dir.path())
        .unwrap();
    let request = RunRequest::new(format!("sleep {} & sleep 1000", unique_sleep("timeout")))
        .timeout(Duration::from_millis(300));
    let (outcome, _) = run_with(&session, request, &CancellationToken::new()).await;
    assert_eq!(
        outcome.status.timed_out_after,
        Some(Duration::from_millis(300))
    );
    assert_eq!(outcome.status.exit, Exit::Signal(libc::SIGTERM));
    assert!(
        gone(&unique_sleep("timeout")),
        "the background sleep survived the timeout"
    );
}

#[tokio::test]
async fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let grace = Duration::from_millis(500);
    let session = engine_with(|c| c.kill_grace = grace)
        .session(dir.path())
        .unwrap();
    // The shell notes each SIGTERM it gets and carries on; only SIGKILL ends it.
    let request =
        RunRequest::new("trap 'echo TERM' TERM; echo ready; while :; do sleep 0.01; done")
            .timeout(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let (outcome, _) = run_with(&session, request, &CancellationToken::new()).await;
    let took = started.elapsed();
    assert_eq!(outcome.status.exit, Exit::Signal(libc::SIGKILL));
    assert_eq!(
        outcome.status.timed_out_after,
        Some(Duration::from_millis(200))
    );
    // TERM first (the shell saw it), KILL only after the grace: a lower bound, which load can
    // only lengthen, never shorten.
    // (bash also reports the foreground `sleep` that TERM ended: "Terminated".)
    assert!(
        outcome.output.starts_with("ready\n") && outcome.output.lines().any(|l| l == "TERM"),
        "{:?}",
        outcome.output
    );
    assert!(
        took >= Duration::from_millis(200) + grace,
        "killed {took:?} after the start: before the timeout plus the grace"
    );
}

#[tokio::test]
async fn cancelling_kills_the_run_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // A long grace: the shell must die of the SIGTERM, exactly (TERM first).
    let session = Arc::new(
        engine_with(|c| c.kill_grace = Duration::from_secs(60))
            .session(dir.path())
            .unwrap(),
    );
    let cancel = CancellationToken::new();
    let seen = Arc::new(tokio::sync::Notify::new());
    let task = {
        let (session, cancel, seen) = (session.clone(), cancel.clone(), seen.clone());
        tokio::spawn(async move {
            let mut on_output = |_: &str| seen.notify_one();
            session
                .run(
                    RunRequest::new("echo started; sleep 1000"),
                    &mut on_output,
                    &cancel,
                )
                .await
        })
    };
    seen.notified().await;
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("cancel did not end the run")
        .unwrap();
    assert!(outcome.status.cancelled);
    assert_eq!(outcome.status.exit, Exit::Signal(libc::SIGTERM));
    // bash may live long enough to report its foreground child's death ("Terminated"), as it
    // would in a terminal; nothing else may follow.
    let rest = outcome
        .output
        .strip_prefix("started\n")
        .expect("the output so far is kept");
    assert!(
        rest.is_empty() || rest.trim_end().ends_with("Terminated"),
        "{:?}",
        outcome.output
    );
}

#[tokio::test]
async fn a_background_grandchild_holding_the_pipe_neither_hangs_the_run_nor_survives_it() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine_with(|c| c.pipe_grace = Duration::from_millis(300))
        .session(dir.path())
        .unwrap();
    let sleep = unique_sleep("grandchild");
    let outcome = run(&session, &format!("sleep {sleep} & echo done")).await;
    assert_eq!(outcome.status.exit, Exit::Code(0));
    assert_eq!(outcome.output, "done\n");
    assert!(gone(&sleep), "the background sleep outlived the run");
}

#[tokio::test]
async fn output_printed_by_a_background_job_before_the_pipe_closes_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    let outcome = run(&session, "(sleep 0.2; echo late) & echo early").await;
    assert_eq!(outcome.output, "early\nlate\n");
}

#[tokio::test]
async fn large_output_keeps_head_and_tail_and_logs_the_full_output() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let engine = engine_with(|c| {
        c.keep_head_bytes = 1000;
        c.keep_tail_bytes = 1000;
        c.log_dir = logs.clone();
    });
    let session = engine.session(dir.path()).unwrap();
    let outcome = run(&session, "seq 1 100000").await;
    let truncation = outcome.status.truncation.clone().expect("truncated");
    let full: String = (1..=100000).map(|n| format!("{n}\n")).collect();
    assert_eq!(truncation.dropped_bytes as usize, full.len() - 2000);
    assert!(outcome.output.starts_with("1\n2\n3\n"));
    assert!(outcome.output.ends_with("99999\n100000\n"));
    assert!(outcome.output.contains(&format!(
        "[… {} bytes of output dropped here …]",
        truncation.dropped_bytes
    )));
    let log = truncation.full_output.expect("a log path");
    assert!(Path::new(&log).is_absolute());
    assert_eq!(std::fs::read_to_string(&log).unwrap(), full);
}

#[tokio::test]
async fn the_environment_is_scrubbed_and_hardened() {
    let vars = [
        ("PATH", std::env::var("PATH").unwrap()),
        ("HOME", "/home/someone".into()),
        ("LANG", "C.UTF-8".into()),
        ("TOKENIZERS_PARALLELISM", "false".into()),
        ("CARGO_HOME", "/opt/cargo".into()),
        (
            "OPENAI_API_KEY",
            "sk-proj-abcdefghijklmnopqrstuvwxyz0123".into(),
        ),
        (
            "AWS_SECRET_ACCESS_KEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        ),
        ("GH_TOKEN", "ghp_0123456789abcdefghijABCDEFGHIJ0123".into()),
        ("DATABASE_URL", "postgres://app:hunter2@db:5432/app".into()),
        ("MY_INNOCENT_VAR", "xoxb-1234567890-abcdefghijklmnop".into()),
        ("PAGER", "less".into()),
    ]
    .map(|(n, v)| (n.into(), v.into()));
    let engine = Engine::with_environment(
        EngineConfig::default().sandbox_mode(MODE),
        vars,
    );
    let removed: Vec<&str> = engine.scrubbed().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        removed,
        [
            "AWS_SECRET_ACCESS_KEY",
            "DATABASE_URL",
            "GH_TOKEN",
            "MY_INNOCENT_VAR",
            "OPENAI_API_KEY"
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let session = engine.session(dir.path()).unwrap();
    let outcome = run(
        &session,
        "env | grep -v '^_=' | grep -v '^SHLVL=' | grep -v '^PWD=' | sort",
    )
    .await;
    let names: Vec<&str> = outcome
        .output
        .lines()
        .map(|l| l.split('=').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "ACP_BASH",
            "CARGO_HOME",
            "EDITOR",
            "GIT_EDITOR",
            "GIT_PAGER",
            "GIT_SEQUENCE_EDITOR",
            "GIT_TERMINAL_PROMPT",
            "HOME",
            "LANG",
            "PAGER",
            "PATH",
            "TOKENIZERS_PARALLELISM",
            "VISUAL"
        ],
        "{}",
        outcome.output
    );
    assert!(outcome.output.contains("PAGER=cat\n"));
    assert!(!outcome.output.contains("hunter2") && !outcome.output.contains("ghp_"));
}

#[tokio::test]
async fn many_sessions_run_at_once_without_interfering() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine();
    let mut tasks = Vec::new();
    for n in 0..10 {
        let root = dir.path().join(format!("s{n}"));
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(root.join("inner")).unwrap();
        let session = engine.session(&root).unwrap();
        tasks.push(tokio::spawn(async move {
            let first = run(&session, &format!("cd inner; sleep 0.2; echo {n}")).await;
            let second = run(&session, "pwd").await;
            (n, root, first.output, second.output)
        }));
    }
    for task in tasks {
        let (n, root, first, second) = task.await.unwrap();
        assert_eq!(first, format!("{n}\n"));
        assert_eq!(
            second,
            format!("{}\n", canonical(&root.join("inner")).display())
        );
    }
}

#[tokio::test]
async fn the_agents_own_stdout_is_never_written_by_commands() {
    // Output goes to the pipe only: a command cannot reach the agent's stdout (the protocol).
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    let outcome = run(&session, "readlink /proc/self/fd/1").await;
    assert!(outcome.output.starts_with("pipe:"), "{}", outcome.output);
    let _ = Mutex::new(());
}
