//! Package caches in workspace mode (issue 21, point 1), through the real engine
//! (`Session::run`), as root and as `nobody`: writes into `~/.cargo/registry` and `~/.cache` land
//! in a copy-on-write layer of the session's own that its next command sees, another session
//! does not, the host's folders are unchanged (bytes and listing), masks under a cache still
//! hold, and the session's folder (layers included) goes when the session does. Where overlayfs
//! is not possible the first command's notices and the description say so.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::engine::{run, HANG_GUARD};
use crate::support::sandbox::{as_root_and_nobody, require_namespaces};
use crate::support::skip::skip_unless;
use acp_bash::exec::{Engine, EngineConfig, Exit, Session};
use acp_bash::sandbox::{self, Launch, Limits, Mode, Protection, Roots, Support};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

/// Whether workspace commands get the cache layer here (skips, recorded, when not).
fn require_cache_layer() -> bool {
    require_namespaces()
        && skip_unless(
            "package caches copy-on-write",
            Support::current().cache_layer.clone(),
        )
}

/// A folder of this process's user outside the temp dir (which the view replaces).
fn dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("acpbash-caches-{tag}-"))
        .tempdir_in("/var/tmp")
        .unwrap()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

fn engine(home: &Path, config: EngineConfig) -> Engine {
    Engine::with_environment(
        config
            .kill_grace(Duration::from_millis(300))
            .pipe_grace(Duration::from_millis(300)),
        [
            ("PATH".into(), PATH.into()),
            ("HOME".into(), home.as_os_str().to_owned()),
        ],
    )
}

fn run_in(session: &Session, script: &str) -> (Exit, String) {
    let outcome = block_on(run(session, script));
    (outcome.status.exit, outcome.output)
}

/// Every path under `root` with its mode and, for files, its bytes: what "unchanged" means.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (u32, Option<Vec<u8>>)> {
    let mut all = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let bytes = meta.is_file().then(|| std::fs::read(&path).unwrap());
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        }
        all.insert(path, (meta.permissions().mode(), bytes));
    }
    all
}

/// A fake home with a cargo registry, a `~/.cache` holding a folder masked with `--mask`, and
/// the cargo publish token beside the registry.
fn fake_home(home: &Path) {
    std::fs::create_dir_all(home.join(".cargo/registry/index")).unwrap();
    std::fs::write(home.join(".cargo/registry/index/crate.txt"), "orig\n").unwrap();
    std::fs::write(home.join(".cargo/registry/gone.txt"), "gone\n").unwrap();
    std::fs::write(home.join(".cargo/credentials.toml"), "SECRET\n").unwrap();
    std::fs::create_dir_all(home.join(".cache/private")).unwrap();
    std::fs::write(home.join(".cache/private/token"), "SECRET\n").unwrap();
}

#[test]
fn cache_writes_stay_in_the_session_and_never_reach_the_host() {
    as_root_and_nobody(
        "sandbox::caches::cache_writes_stay_in_the_session_and_never_reach_the_host",
        || {
            if !require_cache_layer() {
                return;
            }
            let home = dir("home");
            let ws = dir("ws");
            let temps = dir("temps");
            fake_home(home.path());
            let before = snapshot(home.path());
            let mut protection = Protection::default();
            protection.mask = vec![home.path().join(".cache/private")];
            let root = temps.path().join("root");
            let engine = engine(
                home.path(),
                EngineConfig::default()
                    .protection(protection)
                    .session_temp_root(Some(root.clone())),
            );
            let first = engine.session(ws.path()).unwrap();
            first.set_mode(Mode::Workspace);
            let (exit, output) = run_in(
                &first,
                "set -e; echo new > ~/.cargo/registry/x; \
                 echo more >> ~/.cargo/registry/index/crate.txt; rm ~/.cargo/registry/gone.txt; \
                 mkdir -p ~/.cache/pip; echo wheel > ~/.cache/pip/w; echo written",
            );
            assert_eq!((exit, output.as_str()), (Exit::Code(0), "written\n"));
            // The session's next command sees its writes; the masks still hold inside the
            // layer (the token beside and under a cache), and the layers are out of sight.
            let (exit, output) = run_in(
                &first,
                "cat ~/.cargo/registry/x ~/.cargo/registry/index/crate.txt ~/.cache/pip/w; \
                 ls ~/.cargo/registry; cat ~/.cargo/credentials.toml; ls -A ~/.cache/private; \
                 { echo > ~/.cache/private/planted; } 2>/dev/null && echo planted; \
                 ls -A /tmp; echo end",
            );
            assert_eq!(
                (exit, output.as_str()),
                (Exit::Code(0), "new\norig\nmore\nwheel\nindex\nx\nend\n")
            );
            // Another session starts from the host's caches.
            let second = engine.session(ws.path()).unwrap();
            second.set_mode(Mode::Workspace);
            let (_, output) = run_in(
                &second,
                "ls ~/.cargo/registry; cat ~/.cargo/registry/index/crate.txt; ls ~/.cache",
            );
            assert_eq!(output, "gone.txt\nindex\norig\nprivate\n");
            // The host's folders: not a byte, mode or name changed.
            assert_eq!(snapshot(home.path()), before);
            // The session's folder, its layers (overlayfs's mode-0 work folder) included, goes
            // with the session.
            drop(first);
            drop(second);
            let deadline = Instant::now() + HANG_GUARD;
            while std::fs::read_dir(&root).unwrap().next().is_some() {
                assert!(
                    Instant::now() < deadline,
                    "session folders left: {:?}",
                    std::fs::read_dir(&root)
                        .unwrap()
                        .map(|e| e.unwrap().path())
                        .collect::<Vec<_>>()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            assert_eq!(snapshot(home.path()), before);
        },
    );
}

#[test]
fn a_cache_holding_the_session_folder_is_not_layered() {
    as_root_and_nobody(
        "sandbox::caches::a_cache_holding_the_session_folder_is_not_layered",
        || {
            if !require_cache_layer() {
                return;
            }
            // A session folder inside ~/.cache: its writes must reach the host as the user
            // allowed (a layer over ~/.cache would swallow them).
            let home = dir("home-ws");
            let ws = home.path().join(".cache/project");
            std::fs::create_dir_all(&ws).unwrap();
            let engine = engine(home.path(), EngineConfig::default());
            let session = engine.session(&ws).unwrap();
            session.set_mode(Mode::Workspace);
            let (exit, _) = run_in(&session, "echo kept > kept.txt");
            assert_eq!(exit, Exit::Code(0));
            assert_eq!(
                std::fs::read_to_string(ws.join("kept.txt")).unwrap(),
                "kept\n"
            );
        },
    );
}

#[test]
fn without_overlayfs_the_first_command_and_the_description_say_caches_are_read_only() {
    let mut support = Support::current().clone();
    support.cache_layer = Err("overlayfs refused here".to_string());
    let ws = dir("no-overlay");
    let roots = Roots::new(ws.path(), std::env::temp_dir()).cache_layer(ws.path().join("layer"));
    let confined = sandbox::confine_with(
        Launch::new("/bin/true", Vec::<String>::new()),
        Mode::Workspace,
        &roots,
        Limits::default(),
        &support,
    );
    assert!(
        confined.notices.iter().any(|n| n.contains(
            "package caches (~/.cargo/registry, ~/.npm, ~/.cache, …) are read-only here"
        ) && n.contains("overlayfs refused here")),
        "{:?}",
        confined.notices
    );
    let description = sandbox::describe_with(Mode::Workspace, &support);
    assert!(
        description.contains("Not enforced on this machine: ")
            && description.contains("writable package caches"),
        "{description}"
    );
    // With it, neither says so.
    support.cache_layer = Ok(());
    let confined = sandbox::confine_with(
        Launch::new("/bin/true", Vec::<String>::new()),
        Mode::Workspace,
        &roots,
        Limits::default(),
        &support,
    );
    assert!(!confined
        .notices
        .iter()
        .any(|n| n.contains("package caches")));
    assert!(!sandbox::describe_with(Mode::Workspace, &support).contains("writable package caches"));
}
