//! Per-run overrides on `RunRequest` (and `BashCall`): a working directory that is not
//! persisted, a sandbox mode, kept and set environment variables, an output budget. Each is
//! observed from inside the command.

use acp_bash::exec::{Engine, EngineConfig, Exit, RunRequest, Session};
use acp_bash::sandbox::Mode;
use acp_bash::tool::{run_bash, BashCall};
use acp_bash::CancellationToken;

use crate::support::engine::hang_guard;

fn engine(vars: &[(&str, &str)]) -> Engine {
    Engine::with_environment(
        EngineConfig::default().sandbox_mode(Mode::Full),
        vars.iter().map(|(n, v)| (n.into(), v.into())),
    )
}

async fn run(session: &Session, request: RunRequest) -> acp_bash::exec::RunOutcome {
    tokio::time::timeout(hang_guard(), session.start(request).wait())
        .await
        .expect("the run hung")
}

#[tokio::test]
async fn a_per_run_cwd_is_used_and_not_persisted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    let session = engine(&[("PATH", "/usr/bin:/bin")]).session(&root).unwrap();
    let outcome = run(&session, RunRequest::new("pwd -P; cd deeper").cwd("sub")).await;
    assert_eq!(outcome.output, format!("{}\n", root.join("sub").display()));
    assert_eq!(outcome.cwd, root.join("sub"));
    assert_eq!(session.cwd(), root, "the per-run cwd moved the session");
    // A missing directory is refused with a message, not run elsewhere.
    let missing = run(&session, RunRequest::new("pwd").cwd("nope")).await;
    assert_eq!(missing.status.exit, Exit::Code(126));
    assert!(
        missing.output.contains("is not an existing directory"),
        "{}",
        missing.output
    );
    assert_eq!(missing.cwd, root.join("nope"));
}

#[tokio::test]
async fn kept_and_set_variables_reach_only_that_run() {
    let tmp = tempfile::tempdir().unwrap();
    let session = engine(&[("PATH", "/usr/bin:/bin"), ("GITHUB_TOKEN", "secret-1")])
        .session(tmp.path())
        .unwrap();
    let script = r#"echo "token=${GITHUB_TOKEN-unset} extra=${EXTRA-unset} path=$PATH""#;
    let plain = run(&session, RunRequest::new(script)).await;
    assert_eq!(plain.output, "token=unset extra=unset path=/usr/bin:/bin\n");
    let overridden = run(
        &session,
        RunRequest::new(script)
            .keep_env("GITHUB_TOKEN")
            .set_env("EXTRA", "yes")
            .set_env("PATH", "/bin"),
    )
    .await;
    assert_eq!(overridden.output, "token=secret-1 extra=yes path=/bin\n");
    let again = run(&session, RunRequest::new(script)).await;
    assert_eq!(again.output, plain.output, "an override outlived its run");
}

#[tokio::test]
async fn an_output_limit_keeps_the_ends_of_that_run_only() {
    let tmp = tempfile::tempdir().unwrap();
    let session = engine(&[("PATH", "/usr/bin:/bin")])
        .session(tmp.path())
        .unwrap();
    let limited = run(&session, RunRequest::new("seq 1 10000").output_limit(100)).await;
    let truncation = limited.status.truncation.expect("truncated");
    assert!(limited.output.starts_with("1\n2\n"), "{}", limited.output);
    assert!(limited.output.ends_with("10000\n"), "{}", limited.output);
    assert!(truncation.dropped_bytes > 48_000, "{truncation:?}");
    let whole = run(&session, RunRequest::new("seq 1 10000")).await;
    assert_eq!(whole.status.truncation, None);
}

#[tokio::test]
async fn a_bash_call_passes_every_override_to_the_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    let session = engine(&[("PATH", "/usr/bin:/bin"), ("API_KEY", "k")])
        .session(&root)
        .unwrap();
    let call = BashCall::from(
        RunRequest::new(r#"pwd -P; echo "$API_KEY $X"; seq 1 1000"#)
            .cwd("sub")
            .keep_env("API_KEY")
            .set_env("X", "x")
            .output_limit(64)
            .sandbox_mode(Mode::Off),
    )
    .description("Every override");
    let result = run_bash(
        &session,
        &call,
        &mut |_: &str| {},
        &CancellationToken::new(),
    )
    .await;
    let output = &result.outcome.output;
    assert!(
        output.starts_with(&format!("{}\nk x\n", root.join("sub").display())),
        "{output}"
    );
    assert!(result.outcome.status.truncation.is_some(), "{output}");
    assert_eq!(call.request().sandbox_mode, Some(Mode::Off));
}

/// The sandbox mode of one run: `read-only` refuses a write into the workspace that the
/// session's own mode (`full`) allows, when this machine can enforce it.
#[tokio::test]
async fn a_per_run_sandbox_mode_applies_to_that_run() {
    let support = acp_bash::sandbox::Support::current();
    // Outside the temp dir, which every mode may write.
    let tmp = tempfile::Builder::new()
        .prefix("acpbash-override-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let session = engine(&[("PATH", "/usr/bin:/bin")])
        .session(tmp.path())
        .unwrap();
    let write = "echo x > written && echo wrote";
    let readonly = run(
        &session,
        RunRequest::new(write).sandbox_mode(Mode::ReadOnly),
    )
    .await;
    #[cfg(target_os = "linux")]
    let writes_restricted = support.landlock.is_ok();
    #[cfg(target_os = "macos")]
    let writes_restricted = support.seatbelt.is_ok();
    if writes_restricted {
        assert!(!readonly.output.contains("wrote\n"), "{}", readonly.output);
        assert!(!tmp.path().join("written").exists());
    } else {
        // Without Landlock the run says that read-only is not enforced here.
        assert!(
            readonly.output.contains("[acp-bash:"),
            "{}",
            readonly.output
        );
    }
    let full = run(&session, RunRequest::new(write)).await;
    assert!(full.output.ends_with("wrote\n"), "{}", full.output);
}
