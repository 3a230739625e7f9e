//! The agent never writes where a command points it (issue 19, finding 4): a command keeps
//! swapping the full-output log directory for a symbolic link to a directory it cannot write,
//! while the agent writes logs there, and nothing ever lands outside. Run as root and as
//! `nobody`. The log directory sits in the session folder here on purpose (a place the command
//! may write); by default it is in the agent's state directory, outside every writable place.
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::engine::run;
use crate::support::sandbox::{as_root_and_nobody, require_namespaces, wait_for_file};
use acp_bash::exec::{Engine, EngineConfig, RunRequest};
use acp_bash::sandbox::Mode;

/// How many logs the agent writes while the command swaps the directory.
const LOGS: usize = 300;

/// Swaps `logs` for a symbolic link to `$TARGET` and back as fast as it can, until `stop`
/// exists; counts the swaps that left a link in place.
const RACER: &str = r#"python3 - <<'EOF'
import os
target = os.environ["TARGET"]
swaps = 0
open("racing", "w").write("yes\n")
while not os.path.exists("stop"):
    try:
        os.rename("logs", "logs.real")
    except OSError:
        pass
    try:
        os.symlink(target, "logs")
        swaps += 1
    except OSError:
        pass
    try:
        os.unlink("logs")
    except OSError:
        pass
    try:
        os.rename("logs.real", "logs")
    except OSError:
        pass
print("swaps", swaps)
EOF"#;

fn private_dir(prefix: &str, mode: u32) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_command_swapping_the_log_directory_for_a_link_gets_nothing_written_outside() {
    as_root_and_nobody(
        "sandbox::logs::a_command_swapping_the_log_directory_for_a_link_gets_nothing_written_outside",
        || {
            if !require_namespaces() {
                return;
            }
            // The session folder (the command may write it) and a directory outside every
            // writable place that the agent could write (private, like a log directory).
            let ws = private_dir("acpbash-lograce-ws-", 0o777);
            let target = private_dir("acpbash-lograce-target-", 0o700);
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let engine = Engine::new(
                    EngineConfig::default()
                        .keep_bytes(16, 16)
                        .log_dir(ws.path().join("logs")),
                );
                let racer_session = engine.session(ws.path()).unwrap();
                racer_session.set_mode(Mode::Workspace);
                let racer = racer_session.start(
                    RunRequest::new(RACER)
                        .set_env("TARGET", target.path().to_string_lossy())
                        .timeout(std::time::Duration::from_secs(600)),
                );
                wait_for_file(&ws.path().join("racing"));
                let logger = engine.session(ws.path()).unwrap();
                logger.set_mode(Mode::Full);
                let mut logged = 0;
                for _ in 0..LOGS {
                    let outcome = run(&logger, "head -c 200 /dev/zero | tr '\\0' x").await;
                    logged += usize::from(
                        outcome
                            .status
                            .truncation
                            .as_ref()
                            .is_some_and(|t| t.full_output.is_some()),
                    );
                    assert!(
                        entries(target.path()).is_empty(),
                        "the agent wrote into {} through the command's link: {:?}",
                        target.path().display(),
                        entries(target.path())
                    );
                }
                std::fs::write(ws.path().join("stop"), "").unwrap();
                let raced = racer.wait().await;
                assert!(raced.output.contains("swaps "), "{}", raced.output);
                eprintln!("{logged} of {LOGS} logs written; racer: {}", raced.output.trim());
            });
            assert!(entries(target.path()).is_empty(), "{:?}", entries(target.path()));
        },
    );
}

/// By default the logs are in the agent's state directory, outside every place a command may
/// write (not under the temp dir, which workspace commands share).
#[test]
fn the_default_log_directory_is_in_the_state_directory() {
    let dir = acp_bash::exec::logdir::default_dir();
    let env = |name| std::env::var_os(name).map(std::path::PathBuf::from);
    // The oracle is the store's own rule for the state directory, not the temp dir: a clone
    // may itself live under the temp dir (and with it `XDG_STATE_HOME`, see .cargo/config.toml).
    if let Some(state) = acp_bash::store::state_dir(
        None,
        env("XDG_STATE_HOME").as_deref(),
        env("HOME").as_deref(),
    ) {
        assert_eq!(dir, state.join("logs"), "{}", dir.display());
        assert!(dir.ends_with("acp-bash/logs"), "{}", dir.display());
    }
}
