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

use crate::support::engine::{hang_guard, run};
use crate::support::sandbox::{as_root_and_nobody, require_namespaces, session_folders};
use crate::support::skip::skip_unless;
use acp_bash::exec::{EngineConfig, Exit, Session};
use acp_bash::sandbox::{self, Launch, Limits, Mode, Protection, Roots, Support};

use super::view::{block_on, dir, engine};

/// Whether workspace commands get the cache layer here (skips, recorded, when not).
fn require_cache_layer() -> bool {
    require_namespaces()
        && skip_unless(
            "package caches copy-on-write",
            Support::current().cache_layer.clone(),
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
            // A poll on the condition; the deadline is only a hang guard.
            let deadline = Instant::now() + hang_guard();
            while !session_folders(&root).is_empty() {
                assert!(
                    Instant::now() < deadline,
                    "session folders left: {:?}",
                    session_folders(&root)
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
    let layer = dir("no-overlay-layer");
    let roots = Roots::new(ws.path(), std::env::temp_dir())
        .session_temp(layer.path().join("tmp"))
        .cache_layer(layer.path().join("caches"));
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

/// The one session folder under `root` (the session's first workspace command made it).
fn session_folder(root: &Path) -> PathBuf {
    let folders = session_folders(root);
    assert_eq!(folders.len(), 1, "{folders:?}");
    folders.into_iter().next().unwrap()
}

#[test]
fn symlinks_planted_in_a_layer_or_over_its_upper_folder_never_reach_the_host() {
    as_root_and_nobody(
        "sandbox::caches::symlinks_planted_in_a_layer_or_over_its_upper_folder_never_reach_the_host",
        || {
            if !require_cache_layer() {
                return;
            }
            let home = dir("home-sym");
            let ws = dir("ws-sym");
            let temps = dir("temps-sym");
            let target = dir("target-sym");
            fake_home(home.path());
            std::fs::write(target.path().join("keep"), "keep\n").unwrap();
            let before = (snapshot(home.path()), snapshot(target.path()));
            let root = temps.path().join("root");
            let engine = engine(
                home.path(),
                EngineConfig::default().session_temp_root(Some(root.clone())),
            );
            let session = engine.session(ws.path()).unwrap();
            session.set_mode(Mode::Workspace);
            assert_eq!(run_in(&session, "true"), (Exit::Code(0), String::new()));
            let upper = session_folder(&root).join("caches/.cargo-registry/upper");
            assert!(upper.is_dir(), "{upper:?}");
            // A command links, inside the layer, to a host folder and to the layer's own upper
            // folder on the host; the next command writes through both links.
            let (exit, output) = run_in(
                &session,
                &format!(
                    "ln -s {} ~/.cargo/registry/link && ln -s {} ~/.cargo/registry/up && echo linked",
                    target.path().display(),
                    upper.display()
                ),
            );
            assert_eq!((exit, output.as_str()), (Exit::Code(0), "linked\n"));
            let (_, output) = run_in(
                &session,
                &format!(
                    "for p in ~/.cargo/registry/link/planted ~/.cargo/registry/up/planted {}/planted; do \
                     {{ echo x > $p; }} 2>/dev/null && echo \"wrote $p\"; done; echo end",
                    upper.display()
                ),
            );
            assert_eq!(output, "end\n");
            assert_eq!((snapshot(home.path()), snapshot(target.path())), before);
            // A full-mode command of the same session (it may write anywhere the user may)
            // swaps the layer's upper folder for a link to a host folder: the next workspace
            // command must not write through it, and says the cache stays read-only.
            session.set_mode(Mode::Full);
            let (exit, _) = run_in(
                &session,
                &format!(
                    "rm -rf {u} && ln -s {t} {u}",
                    u = upper.display(),
                    t = target.path().display()
                ),
            );
            assert_eq!(exit, Exit::Code(0));
            let before_target = snapshot(target.path());
            session.set_mode(Mode::Workspace);
            let (_, output) = run_in(
                &session,
                "{ echo planted > ~/.cargo/registry/planted; } 2>/dev/null || echo refused",
            );
            assert!(
                output.contains("a package cache stays read-only")
                    && output.contains("is not a folder of this user's")
                    && output.ends_with("refused\n"),
                "{output}"
            );
            assert_eq!(snapshot(target.path()), before_target);
            assert_eq!(snapshot(home.path()), before.0);
            // The session's own clean-up (not the test's: as nobody, the test's could not list
            // overlayfs's mode-0 work folders) removes its folder, layers and the planted links
            // included, and follows none of them.
            drop(session);
            drop(engine);
            wait_until_no_session_folder(&root);
            assert_eq!(snapshot(target.path()), before_target);
            assert_eq!(snapshot(home.path()), before.0);
        },
    );
}

/// Waits until no session folder is left under `root` (a session's folder is removed on a
/// thread of its own when it ends; a test that ended first would leave it half removed).
fn wait_until_no_session_folder(root: &Path) {
    // A poll on the condition; the deadline is only a hang guard.
    let deadline = Instant::now() + hang_guard();
    while !session_folders(root).is_empty() {
        assert!(
            Instant::now() < deadline,
            "session folders left: {:?}",
            session_folders(root)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn layers_inside_the_session_folder_are_refused_and_the_first_command_says_so() {
    as_root_and_nobody(
        "sandbox::caches::layers_inside_the_session_folder_are_refused_and_the_first_command_says_so",
        || {
            if !require_cache_layer() {
                return;
            }
            // The session's own folder under the workspace (a TMPDIR inside it): commands could
            // reach the upper folders, so there are no layers at all.
            let home = dir("home-exposed");
            let ws = dir("ws-exposed");
            fake_home(home.path());
            std::fs::create_dir_all(home.path().join(".npm")).unwrap();
            let before = snapshot(home.path());
            let root = ws.path().join("tmp-root");
            let engine = engine(
                home.path(),
                EngineConfig::default().session_temp_root(Some(root.clone())),
            );
            let session = engine.session(ws.path()).unwrap();
            session.set_mode(Mode::Workspace);
            let (_, output) = run_in(
                &session,
                "{ echo x > ~/.cargo/registry/x; } 2>/dev/null || echo refused",
            );
            assert!(
                output.contains("package caches (~/.cargo/registry, ~/.npm, ~/.cache, …) are read-only here")
                    && output.contains("lies in the session folder")
                    && output.ends_with("refused\n"),
                "{output}"
            );
            // A command plants the layer folders itself, the upper one a link to the host's
            // ~/.npm; the next command's writes into the registry reach nothing.
            let folder = session_folder(&root);
            let (exit, _) = run_in(
                &session,
                &format!(
                    "mkdir -p {f}/caches/.cargo-registry/work && ln -s {npm} {f}/caches/.cargo-registry/upper",
                    f = folder.display(),
                    npm = home.path().join(".npm").display()
                ),
            );
            assert_eq!(exit, Exit::Code(0));
            let (_, output) = run_in(
                &session,
                "{ echo x > ~/.cargo/registry/planted; } 2>/dev/null || echo refused",
            );
            assert_eq!(output, "refused\n");
            assert_eq!(snapshot(home.path()), before);
        },
    );
}

#[test]
fn a_layer_the_kernel_refuses_leaves_its_cache_read_only_and_the_rest_of_the_view_whole() {
    as_root_and_nobody(
        "sandbox::caches::a_layer_the_kernel_refuses_leaves_its_cache_read_only_and_the_rest_of_the_view_whole",
        || {
            if !require_cache_layer() {
                return;
            }
            // A home whose caches' paths are longer than overlayfs takes (255 bytes): the
            // general probe passed, the kernel refuses this home's layers (EINVAL).
            let base = dir("home-long");
            let long = "d".repeat(120);
            let home = base.path().join(&long).join(&long).join("home");
            fake_home(&home);
            let outside = dir("outside-long");
            let ws = dir("ws-long");
            let before = snapshot(&home);
            let engine = engine(&home, EngineConfig::default());
            let session = engine.session(ws.path()).unwrap();
            session.set_mode(Mode::Workspace);
            let script = format!(
                "{{ echo x > ~/.cargo/registry/x; }} 2>/dev/null || echo cache-read-only; \
                 cat ~/.cargo/credentials.toml; ls /dev/pts; \
                 {{ echo x > {}/x; }} 2>/dev/null || echo outside-read-only; \
                 echo ok > here && cat here",
                outside.path().display()
            );
            let (exit, output) = run_in(&session, &script);
            assert_eq!(exit, Exit::Code(0), "{output}");
            let said = |output: &str| {
                output
                    .lines()
                    .filter(|l| l.contains("/.cargo/registry: the kernel refused"))
                    .count()
            };
            assert_eq!(said(&output), 1, "{output}");
            assert!(
                output.contains("a path is longer than the 255 bytes overlayfs takes"),
                "{output}"
            );
            let tail: Vec<&str> = output
                .lines()
                .filter(|l| !l.starts_with("[acp-bash: "))
                .collect();
            assert_eq!(tail, ["cache-read-only", "ptmx", "outside-read-only", "ok"]);
            // Said by the first command only: the next ones are just as read-only, and quiet.
            for _ in 0..2 {
                let (exit, output) = run_in(&session, &script);
                assert_eq!(exit, Exit::Code(0), "{output}");
                assert_eq!(
                    output,
                    "cache-read-only\nptmx\noutside-read-only\nok\n",
                    "a later command repeats a notice"
                );
            }
            assert_eq!(snapshot(&home), before);
            // `doctor` says the same of this home, probed for real.
            let doctor = std::process::Command::new(crate::support::acp::binary())
                .arg("doctor")
                .env("HOME", &home)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&doctor.stdout);
            let section = text
                .split_once("Package caches in workspace mode")
                .map(|(_, after)| after.split("\n\n").next().unwrap_or_default())
                .unwrap_or_else(|| panic!("doctor has no package-cache section:\n{text}"));
            assert!(
                section.contains("[read-only] ")
                    && section.contains("/home/.cargo/registry: the kernel refused")
                    && section.contains("255 bytes")
                    && section.contains("use full mode"),
                "{section}"
            );
            assert!(!section.contains("[layer]"), "{section}");
        },
    );
}

/// `doctor` lists the caches whose layers work, next to a home the kernel takes them for.
#[test]
fn doctor_lists_each_package_cache_and_its_layer() {
    as_root_and_nobody(
        "sandbox::caches::doctor_lists_each_package_cache_and_its_layer",
        || {
            if !require_cache_layer() {
                return;
            }
            let home = dir("home-doctor");
            fake_home(home.path());
            let doctor = std::process::Command::new(crate::support::acp::binary())
                .arg("doctor")
                .env("HOME", home.path())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&doctor.stdout);
            let registry = home.path().canonicalize().unwrap().join(".cargo/registry");
            let cache = home.path().canonicalize().unwrap().join(".cache");
            for path in [registry, cache] {
                assert!(
                    text.contains(&format!("  [layer]     {}\n", path.display())),
                    "{}: {text}",
                    path.display()
                );
            }
            assert!(!text.contains("[read-only] "), "{text}");
        },
    );
}

#[test]
fn overlapping_commands_of_a_session_both_write_into_the_layer() {
    as_root_and_nobody(
        "sandbox::caches::overlapping_commands_of_a_session_both_write_into_the_layer",
        || {
            if !require_cache_layer() {
                return;
            }
            let home = dir("home-both");
            let ws = dir("ws-both");
            fake_home(home.path());
            let before = snapshot(home.path());
            let engine = engine(home.path(), EngineConfig::default());
            let session = engine.session(ws.path()).unwrap();
            session.set_mode(Mode::Workspace);
            // The first command mounts its layers, waits until a second one has mounted the
            // same session's layers and ended, then copies a host file up (through
            // overlayfs's work folder) and renames in the layer.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let ready = ws.path().join("first-ready");
            let (second, first) = runtime.block_on(async {
                let first = session.start(acp_bash::exec::RunRequest::new(
                    "echo a >> ~/.cargo/registry/index/crate.txt; touch first-ready; \
                     n=0; while [ ! -e second-done ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done; \
                     echo a2 >> ~/.cargo/registry/gone.txt && mv ~/.cargo/registry/gone.txt ~/.cargo/registry/moved \
                     && cat ~/.cargo/registry/moved",
                ));
                // A poll on the condition; the deadline is only a hang guard.
                let deadline = Instant::now() + hang_guard();
                while !ready.exists() {
                    assert!(Instant::now() < deadline, "the first command never started");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let second = run(
                    &session,
                    "echo b > ~/.cargo/registry/b && cat ~/.cargo/registry/b && touch second-done",
                )
                .await;
                (second, first.wait().await)
            });
            assert_eq!(
                (second.status.exit, second.output.as_str()),
                (Exit::Code(0), "b\n")
            );
            assert_eq!(
                (first.status.exit, first.output.as_str()),
                (Exit::Code(0), "gone\na2\n")
            );
            let (_, output) = run_in(
                &session,
                "cat ~/.cargo/registry/index/crate.txt ~/.cargo/registry/b; ls ~/.cargo/registry",
            );
            assert_eq!(output, "orig\na\nb\nb\nindex\nmoved\n");
            assert_eq!(snapshot(home.path()), before);
        },
    );
}

/// A cache's layer is mounted `volatile`: without it, the end of every workspace command (its
/// mount namespace going away) synced the whole filesystem under the layer's upper folder,
/// once per package cache (`notes/2026-12-01-per-command-cost.md`).
#[test]
fn a_cache_layer_is_volatile_so_a_command_ending_syncs_no_filesystem() {
    as_root_and_nobody(
        "sandbox::caches::a_cache_layer_is_volatile_so_a_command_ending_syncs_no_filesystem",
        || {
            if !require_cache_layer() {
                return;
            }
            let home = dir("home-volatile");
            let ws = dir("ws-volatile");
            fake_home(home.path());
            let engine = engine(home.path(), EngineConfig::default());
            let session = engine.session(ws.path()).unwrap();
            session.set_mode(Mode::Workspace);
            let registry = home.path().join(".cargo/registry").canonicalize().unwrap();
            let (exit, output) = run_in(&session, "cat /proc/self/mountinfo");
            assert_eq!(exit, Exit::Code(0), "{output}");
            // `id parent major:minor root mount-point options … - fstype source super-options`
            let line = output
                .lines()
                .find(|l| l.split(' ').nth(4) == registry.to_str() && l.contains(" - overlay "))
                .unwrap_or_else(|| panic!("no overlay on {}:\n{output}", registry.display()));
            let options = line
                .split(" - ")
                .nth(1)
                .and_then(|rest| rest.split(' ').nth(2))
                .unwrap_or_default();
            assert!(
                options
                    .split(',')
                    .any(|o| o == "volatile" || o == "fsync=volatile"),
                "the layer syncs its upper filesystem when the command ends: {line}"
            );
        },
    );
}

/// A home's first workspace command probes the kernel for its caches' layers in a child it
/// waits for (which under a busy disk took seconds to end): the engine asks
/// `confine_would_probe` and then confines on a blocking thread, not on the runtime's worker,
/// which would stall every session (issue 20 point 9). It says so exactly until the home was
/// probed, and never for a mode without layers.
#[test]
fn a_homes_first_workspace_command_is_known_to_probe_so_it_confines_off_the_runtime() {
    as_root_and_nobody(
        "sandbox::caches::a_homes_first_workspace_command_is_known_to_probe_so_it_confines_off_the_runtime",
        || {
            if !require_cache_layer() {
                return;
            }
            let home = dir("home-probe");
            fake_home(home.path());
            let ws = dir("ws-probe");
            let layer = dir("layer-probe");
            let mut protection = Protection::default();
            protection.home = Some(home.path().to_path_buf());
            let roots = Roots::new(ws.path(), std::env::temp_dir())
                .session_temp(layer.path().join("tmp"))
                .cache_layer(layer.path().join("caches"))
                .protection(protection);
            Support::current();
            assert!(!sandbox::confine_would_probe(Mode::ReadOnly, &roots));
            assert!(sandbox::confine_would_probe(Mode::Workspace, &roots));
            let engine = engine(home.path(), EngineConfig::default());
            let session = engine.session(ws.path()).unwrap();
            session.set_mode(Mode::Workspace);
            let (exit, _) = run_in(&session, "true");
            assert_eq!(exit, Exit::Code(0));
            assert!(!sandbox::confine_would_probe(Mode::Workspace, &roots));
        },
    );
}
