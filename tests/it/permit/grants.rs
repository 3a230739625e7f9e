//! What the user allowed stays the user's: "allow once" for a write re-runs the command with
//! only the refused path's folder writable (masks still over it), never in full mode, so it
//! cannot add to the "always" file, nor can a command a prefix grant covers (it gets the same
//! folder, never full mode); no command can make that file first where its folder is
//! missing; the `permission_requests` config option turns asking off for a session; and
//! `/permissions` lists the grants and takes one back, from the session and from the file.
//! Through the built binary, as root and as nobody.

use std::path::Path;

use serde_json::json;

use super::{calls, in_namespaces, runtime, shown, Agent, Face, Pick, Places};

/// A folder under /var/tmp that `nobody` may write, removed at the end.
fn open_folder(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/var/tmp")
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

fn always_in(config: &Path) -> std::path::PathBuf {
    config.join(acp_bash::permit::AlwaysFile::RELATIVE)
}

/// "Allow once" for a write to the config folder: the re-run may write that folder, but not
/// the always file beneath it (masked), whether the file's folder exists or not; the next
/// agent finds no new grant.
#[test]
fn allowed_once_a_write_cannot_add_to_what_is_allowed_always() {
    crate::support::sandbox::as_root_and_nobody(
        "permit::grants::allowed_once_a_write_cannot_add_to_what_is_allowed_always",
        allowed_once_a_write_cannot_add_to_what_is_allowed_always_once,
    );
}

fn allowed_once_a_write_cannot_add_to_what_is_allowed_always_once() {
    in_namespaces(async {
        let places = Places::new();
        // With a file kept already, and with none (its folder missing).
        let with_file = open_folder("acpbash-permit-config-kept-");
        let always = always_in(with_file.path());
        std::fs::create_dir_all(always.parent().unwrap()).unwrap();
        std::fs::write(&always, "host keep.test\n").unwrap();
        let without = open_folder("acpbash-permit-config-none-");
        for config in [with_file.path(), without.path()] {
            let always = always_in(config);
            let mut agent = Agent::start(Face::Plain, &["--sandbox", "workspace"], config);
            agent.initialize().await;
            let session = agent.new_session(&places.ws()).await;
            let script = format!(
                "touch {c}/a; mkdir -p {folder}; echo 'host evil.test' >> {file}; \
                 echo \"appended:$?\"; test -e {c}/a",
                c = config.display(),
                folder = always.parent().unwrap().display(),
                file = always.display(),
            );
            agent.will_answer(&[Pick::Option("allow-once")]);
            let turn = agent.turn(&session, &script).await;
            let text = shown(&turn);
            assert_eq!(calls(&turn), 2, "{text}");
            assert!(config.join("a").exists(), "the once re-run wrote: {text}");
            assert!(!text.contains("appended:0"), "{text}");
            let asked = &agent.asked[0];
            assert_eq!(
                asked["_meta"]["acp-bash"]["refused"]["path"],
                config.join("a").to_str().unwrap()
            );
            agent.finish().await;
            let kept = std::fs::read_to_string(&always).unwrap_or_default();
            assert!(!kept.contains("evil.test"), "{kept}");
            // The next agent's session got no grant from it.
            let mut agent = Agent::start(Face::Plain, &["--sandbox", "workspace"], config);
            agent.initialize().await;
            let session = agent.new_session(&places.ws()).await;
            let listed = shown(&agent.turn(&session, "/permissions").await);
            assert!(!listed.contains("evil.test"), "{listed}");
            agent.finish().await;
        }
        assert_eq!(
            std::fs::read_to_string(&always).unwrap(),
            "host keep.test\n"
        );
    });
}

/// A prefix grant for a write (answered "always": the session's grant, then the kept line
/// read by the next agent) runs the commands it covers in the session's mode with only the
/// granted folder also writable, never in full mode: even where that folder holds the always
/// file, such a command can neither append to it, remove it nor move its folder, nor write
/// outside the granted folder; the file stays byte for byte.
#[test]
fn a_prefix_grant_writes_its_folder_only_never_the_always_file() {
    crate::support::sandbox::as_root_and_nobody(
        "permit::grants::a_prefix_grant_writes_its_folder_only_never_the_always_file",
        a_prefix_grant_writes_its_folder_only_never_the_always_file_once,
    );
}

fn a_prefix_grant_writes_its_folder_only_never_the_always_file_once() {
    in_namespaces(async {
        let places = Places::new();
        // The folder granted is the config folder itself: the always file is beneath it.
        let config = open_folder("acpbash-permit-config-granted-");
        let config = config.path();
        let always = always_in(config);
        let other = open_folder("acpbash-permit-other-");
        let script = places.ws().join("build.sh");
        std::fs::write(&script, format!("touch {}/built-0\n", config.display())).unwrap();

        let mut agent = Agent::start(Face::Plain, &["--sandbox", "workspace"], config);
        agent.initialize().await;
        let session = agent.new_session(&places.ws()).await;
        agent.will_answer(&[Pick::Option("allow-always")]);
        let turn = agent.turn(&session, "bash build.sh").await;
        let text = shown(&turn);
        assert_eq!(calls(&turn), 2, "{text}");
        assert!(config.join("built-0").exists(), "{text}");
        let offered = agent.asked[0]["options"].to_string();
        assert!(
            offered.contains(&format!(
                "Always run `bash` commands with {} writable",
                config.display()
            )),
            "{offered}"
        );
        let kept = std::fs::read(&always).unwrap();
        let line = format!("write {} bash", config.display());
        assert!(
            String::from_utf8_lossy(&kept).lines().any(|l| l == line),
            "{}",
            String::from_utf8_lossy(&kept)
        );

        // The same command, now hostile: covered by the grant, so it runs without a question.
        let hostile = |round: usize| {
            format!(
                "echo 'host evil.example' >> {file}; echo \"appended:$?\"\n\
                 rm {file}; echo \"removed:$?\"\n\
                 mv {folder} {config}/moved; echo \"moved:$?\"\n\
                 touch {other}/escaped; echo \"other:$?\"\n\
                 touch {config}/built-{round}; echo \"built:$?\"\n",
                file = always.display(),
                folder = always.parent().unwrap().display(),
                config = config.display(),
                other = other.path().display(),
            )
        };
        let check = |round: usize, text: &str| {
            assert!(text.contains("built:0"), "round {round}: {text}");
            assert!(config.join(format!("built-{round}")).exists(), "{text}");
            for bad in ["appended:0", "removed:0", "moved:0", "other:0"] {
                assert!(!text.contains(bad), "round {round}, {bad}: {text}");
            }
            assert!(!other.path().join("escaped").exists(), "{text}");
            assert_eq!(
                std::fs::read(&always).unwrap(),
                kept,
                "round {round}: {text}"
            );
        };
        std::fs::write(&script, hostile(1)).unwrap();
        let turn = agent.turn(&session, "bash build.sh").await;
        let text = shown(&turn);
        assert_eq!(calls(&turn), 1, "{text}");
        check(1, &text);
        assert_eq!(agent.asked.len(), 1, "{text}");
        agent.finish().await;

        // The next agent, from the kept line alone.
        let mut agent = Agent::start(Face::Plain, &["--sandbox", "workspace"], config);
        agent.initialize().await;
        let session = agent.new_session(&places.ws()).await;
        std::fs::write(&script, hostile(2)).unwrap();
        let turn = agent.turn(&session, "bash build.sh").await;
        let text = shown(&turn);
        assert_eq!(calls(&turn), 1, "{text}");
        check(2, &text);
        let listed = shown(&agent.turn(&session, "/permissions").await);
        assert!(!listed.contains("evil.example"), "{listed}");
        assert!(agent.asked.is_empty(), "{text}");
        agent.finish().await;
    });
}

/// A `Permission denied` that Unix permissions gave, not the sandbox (`cat /etc/shadow`, a
/// write to `/etc` as an ordinary user), is not asked about: no answer would make it work.
/// A write the user may do and the sandbox refused still is (root's write to `/etc`, a folder
/// open to everyone).
#[test]
fn what_unix_permissions_refuse_is_not_asked_about() {
    crate::support::sandbox::as_root_and_nobody(
        "permit::grants::what_unix_permissions_refuse_is_not_asked_about",
        what_unix_permissions_refuse_is_not_asked_about_once,
    );
}

fn what_unix_permissions_refuse_is_not_asked_about_once() {
    in_namespaces(async {
        let places = Places::new();
        let outside = open_folder("acpbash-permit-outside-");
        // SAFETY: a plain getter.
        let root = unsafe { libc::geteuid() } == 0;
        let mut agent = Agent::start(
            Face::Plain,
            &["--sandbox", "workspace"],
            places.config.path(),
        );
        agent.initialize().await;
        let session = agent.new_session(&places.ws()).await;
        // A read: as root it works; as nobody Unix permissions refuse it.
        let turn = agent.turn(&session, "cat /etc/shadow > /dev/null").await;
        let text = shown(&turn);
        assert_eq!(calls(&turn), 1, "{text}");
        assert!(agent.asked.is_empty(), "asked about a read: {text}");
        assert!(!text.contains("To allow it"), "{text}");
        if !root {
            assert!(text.contains("Permission denied"), "{text}");
        }
        // A write to /etc: the sandbox's refusal as root, Unix permissions' as nobody.
        if root {
            agent.will_answer(&[Pick::Option("reject")]);
        }
        let turn = agent.turn(&session, "touch /etc/acpbash-permit-unix").await;
        let text = shown(&turn);
        assert_eq!(agent.asked.len(), usize::from(root), "{text}");
        assert!(!std::path::Path::new("/etc/acpbash-permit-unix").exists());
        // A write the user may do, outside the workspace: asked about, as ever.
        agent.will_answer(&[Pick::Option("reject")]);
        let turn = agent
            .turn(&session, &format!("touch {}/x", outside.path().display()))
            .await;
        let text = shown(&turn);
        assert_eq!(agent.asked.len(), usize::from(root) + 1, "{text}");
        agent.finish().await;
    });
}

/// Waits (up to a minute) until `file` has at least `n` lines; its line count.
async fn lines_at_least(file: &Path, n: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let count = std::fs::read_to_string(file)
            .map(|text| text.lines().count())
            .unwrap_or(0);
        if count >= n {
            return count;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} has {count} lines, not {n}",
            file.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// "Allow once" for a host belongs to the re-run alone: a `/bg` job of the same session that
/// polls that host before, during and after the re-run never gets through (the server never
/// sees its request), while the re-run does.
#[test]
fn allowed_once_a_host_is_not_open_to_the_sessions_background_jobs() {
    crate::support::sandbox::as_root_and_nobody(
        "permit::grants::allowed_once_a_host_is_not_open_to_the_sessions_background_jobs",
        allowed_once_a_host_is_not_open_to_the_sessions_background_jobs_once,
    );
}

fn allowed_once_a_host_is_not_open_to_the_sessions_background_jobs_once() {
    if !super::allowlist_holds() {
        return;
    }
    runtime().block_on(async {
        let server = crate::netproxy::http_server(None);
        let places = Places::new();
        let args = super::unlisted_registry(&server);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut agent = Agent::start(Face::Plain, &args, places.config.path());
        agent.initialize().await;
        let session = agent.new_session(&places.ws()).await;
        let log = places.ws().join("bg.log");
        let poll = "/bg while :; do r=$(curl -sS --max-time 10 http://registry.test/bg 2>&1 \
                    | tr '\\n' ' '); echo \"try:$r\" >> bg.log; sleep 0.05; done";
        agent.turn(&session, poll).await;
        // Before.
        lines_at_least(&log, 3).await;
        // The command (and so its re-run) waits, after its own fetch, for three more of the
        // job's tries: they happen while "once" holds.
        let command = "curl -sS --max-time 30 http://registry.test/once; echo; \
                       n=$(wc -l < bg.log); \
                       until [ \"$(wc -l < bg.log)\" -ge $((n + 3)) ]; do sleep 0.05; done";
        agent.will_answer(&[Pick::Option("allow-once")]);
        let turn = agent.turn(&session, command).await;
        let text = shown(&turn);
        assert!(
            text.contains("GET /once HTTP/1.1|host: registry.test"),
            "the re-run got through: {text}"
        );
        // After.
        let now = lines_at_least(&log, 0).await;
        lines_at_least(&log, now + 3).await;
        let seen = server.seen();
        assert_eq!(seen, ["GET /once HTTP/1.1"], "{seen:?}");
        let tries = std::fs::read_to_string(&log).unwrap();
        assert!(!tries.contains("GET /bg"), "{tries}");
        assert_eq!(agent.asked.len(), 1, "{text}");
        agent.finish().await;
    });
}

/// Where the always file's folder is missing and a command could make it (the config folder
/// is inside the session folder), the agent makes it first and masks it: the command can
/// neither make nor write the file. Where no command could make it, nothing is made until a
/// grant is kept.
#[test]
fn a_command_cannot_make_the_always_file_where_its_folder_is_missing() {
    crate::support::sandbox::as_root_and_nobody(
        "permit::grants::a_command_cannot_make_the_always_file_where_its_folder_is_missing",
        a_command_cannot_make_the_always_file_where_its_folder_is_missing_once,
    );
}

fn a_command_cannot_make_the_always_file_where_its_folder_is_missing_once() {
    in_namespaces(async {
        let places = Places::new();
        let inside = places.ws().join("config");
        std::fs::create_dir(&inside).unwrap();
        let always = always_in(&inside);
        let mut agent = Agent::start(Face::Plain, &["--sandbox", "workspace"], &inside);
        agent.initialize().await;
        let session = agent.new_session(&places.ws()).await;
        let script = format!(
            "mkdir -p {folder}; echo 'host evil.test' >> {file}; echo \"appended:$?\"; \
             rm -rf {folder} {parent}; echo \"removed:$?\"",
            folder = always.parent().unwrap().display(),
            parent = inside.join("acp-bash").display(),
            file = always.display(),
        );
        let turn = agent.turn(&session, &script).await;
        let text = shown(&turn);
        assert!(text.contains("appended:1"), "{text}");
        assert!(!text.contains("removed:0"), "{text}");
        agent.finish().await;
        let kept = std::fs::read_to_string(&always).unwrap_or_default();
        assert!(!kept.contains("evil.test"), "{kept}");

        // The config folder out of every command's reach: nothing is made.
        let mut agent = Agent::start(
            Face::Plain,
            &["--sandbox", "workspace"],
            places.config.path(),
        );
        agent.initialize().await;
        let session = agent.new_session(&places.ws()).await;
        agent.turn(&session, "true").await;
        agent.finish().await;
        assert!(
            !places.config.path().join("acp-bash").exists(),
            "made at start"
        );
    });
}

/// The `permission_requests` config option: `off` makes a refused command fail with how to
/// allow it (no request), `ask` asks again; not offered with `--no-permission-requests`.
#[test]
fn the_permission_requests_option_turns_asking_off_for_the_session() {
    crate::support::sandbox::as_root_and_nobody(
        "permit::grants::the_permission_requests_option_turns_asking_off_for_the_session",
        the_permission_requests_option_turns_asking_off_for_the_session_once,
    );
}

fn the_permission_requests_option_turns_asking_off_for_the_session_once() {
    in_namespaces(async {
        let places = Places::new();
        let outside = open_folder("acpbash-permit-outside-");
        let touch = |name: &str| format!("touch {}", outside.path().join(name).display());
        let option = |options: &serde_json::Value| {
            options
                .as_array()
                .unwrap()
                .iter()
                .find(|o| {
                    o["id"] == "permission_requests" || o["configId"] == "permission_requests"
                })
                .cloned()
        };
        for face in [Face::Plain, Face::V2] {
            let mut agent = Agent::start(face, &["--sandbox", "workspace"], places.config.path());
            agent.initialize().await;
            let answer = agent
                .call("session/new", json!({"cwd": places.ws(), "mcpServers": []}))
                .await;
            let result = &answer["result"];
            let session = result["sessionId"].as_str().unwrap().to_string();
            let offered = option(&result["configOptions"])
                .unwrap_or_else(|| panic!("{face:?}: no permission_requests option: {answer}"));
            assert_eq!(offered["currentValue"], "ask", "{offered}");

            let set = |value: &str| {
                let mut params = json!({"sessionId": session, "configId": "permission_requests",
                       "value": value});
                if face == Face::V2 {
                    params["type"] = json!("id");
                }
                params
            };
            let answer = agent.call("session/set_config_option", set("off")).await;
            let now = option(&answer["result"]["configOptions"]).unwrap();
            assert_eq!(now["currentValue"], "off", "{answer}");
            let turn = agent.turn(&session, &touch("off")).await;
            let text = shown(&turn);
            assert_eq!(calls(&turn), 1, "{text}");
            assert!(agent.asked.is_empty(), "{face:?}");
            assert!(text.contains("To allow it"), "{face:?}: {text}");
            assert!(!outside.path().join("off").exists());

            let answer = agent.call("session/set_config_option", set("maybe")).await;
            assert!(answer.get("error").is_some(), "{answer}");
            agent.call("session/set_config_option", set("ask")).await;
            agent.will_answer(&[Pick::Option("reject")]);
            agent.turn(&session, &touch("on")).await;
            assert_eq!(agent.asked.len(), 1, "{face:?}");
            agent.finish().await;
        }

        let mut agent = Agent::start(
            Face::Plain,
            &["--sandbox", "workspace", "--no-permission-requests"],
            places.config.path(),
        );
        agent.initialize().await;
        let answer = agent
            .call("session/new", json!({"cwd": places.ws(), "mcpServers": []}))
            .await;
        assert!(
            option(&answer["result"]["configOptions"]).is_none(),
            "{answer}"
        );
        agent.finish().await;
    });
}

/// `/permissions` lists the session's grants and the kept ones; `/permissions remove` takes
/// one back from the session (the next such command is asked about again) and from the file
/// (replaced whole, every other line byte for byte).
#[test]
fn the_permissions_command_lists_and_takes_back_grants() {
    crate::support::sandbox::as_root_and_nobody(
        "permit::grants::the_permissions_command_lists_and_takes_back_grants",
        the_permissions_command_lists_and_takes_back_grants_once,
    );
}

fn the_permissions_command_lists_and_takes_back_grants_once() {
    in_namespaces(async {
        let places = Places::new();
        let outside = open_folder("acpbash-permit-outside-");
        let touch = |name: &str| format!("touch {}", outside.path().join(name).display());
        let always = places.always_file();
        std::fs::create_dir_all(always.parent().unwrap()).unwrap();
        let kept = "# mine\nhost keep.test\r\nwrite /srv/my\\ out cp\nhost drop.test\n  # indented  \nworkspace npm install\nfull cp";
        std::fs::write(&always, kept).unwrap();
        let mut agent = Agent::start(
            Face::Plain,
            &["--sandbox", "workspace"],
            places.config.path(),
        );
        agent.initialize().await;
        let session = agent.new_session(&places.ws()).await;
        agent.will_answer(&[Pick::Option("allow-session")]);
        agent.turn(&session, &touch("a")).await;
        assert!(outside.path().join("a").exists());

        let listed = shown(&agent.turn(&session, "/permissions").await);
        let granted = format!("`write {} touch`", outside.path().display());
        for line in [
            granted.as_str(),
            "`host keep.test`",
            "`host drop.test`",
            "`write /srv/my\\ out cp`",
        ] {
            assert!(listed.contains(line), "{line}: {listed}");
        }
        // A `full PREFIX` line kept from before is not honoured, and says so.
        assert!(listed.contains("no longer honoured"), "{listed}");
        assert!(listed.contains(&always.display().to_string()), "{listed}");

        let removed = shown(&agent.turn(&session, "/permissions remove drop.test").await);
        assert!(removed.contains("`host drop.test`"), "{removed}");
        assert_eq!(
            std::fs::read_to_string(&always).unwrap(),
            kept.replace("host drop.test\n", "")
        );
        let leftovers: Vec<_> = std::fs::read_dir(always.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&always).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        // The session grant: taken back, so the next `touch` outside is asked about again.
        let removed = shown(&agent.turn(&session, "/permissions remove touch").await);
        assert!(removed.contains(&granted), "{removed}");
        agent.will_answer(&[Pick::Option("reject")]);
        let turn = agent.turn(&session, &touch("b")).await;
        assert_eq!(calls(&turn), 1);
        assert!(!outside.path().join("b").exists());
        assert_eq!(agent.asked.len(), 2);

        let nothing = shown(
            &agent
                .turn(&session, "/permissions remove nothing.test")
                .await,
        );
        assert!(nothing.contains("Nothing allows"), "{nothing}");
        let listed = shown(&agent.turn(&session, "/permissions").await);
        assert!(!listed.contains("drop.test"), "{listed}");
        assert!(!listed.contains(&granted), "{listed}");
        // `remove cp` takes back the write grant and the old `full cp` line alike.
        let removed = shown(&agent.turn(&session, "/permissions remove cp").await);
        assert!(removed.contains("`full cp`"), "{removed}");
        assert!(removed.contains("`write /srv/my\\ out cp`"), "{removed}");
        assert_eq!(
            std::fs::read_to_string(&always).unwrap(),
            "# mine\nhost keep.test\r\n  # indented  \nworkspace npm install\n"
        );
        agent.finish().await;
    });
}

/// A locale `de_DE.UTF-8` made with `localedef` in a folder of its own (`LOCPATH`), or `None`
/// (said on stderr: not a sandbox layer, so not a recorded skip) where the machine has no
/// locale sources (Debian's `locales` package).
fn german_locale(dir: &Path) -> Option<std::path::PathBuf> {
    let made = std::process::Command::new("localedef")
        .args(["-i", "de_DE", "-f", "UTF-8"])
        .arg(dir.join("de_DE.UTF-8"))
        .output();
    match made {
        Ok(_) if dir.join("de_DE.UTF-8").exists() => Some(dir.to_path_buf()),
        Ok(out) => {
            eprintln!(
                "SKIPPED: no de_DE locale: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            None
        }
        Err(error) => {
            eprintln!("SKIPPED: no localedef: {error}");
            None
        }
    }
}

/// Under a translated locale the refused write is still asked about: the agent reads libc's
/// own translation of `EROFS` / `EACCES` for the locale commands inherit.
#[test]
fn a_refused_write_is_asked_about_in_a_translated_locale() {
    crate::support::sandbox::as_root_and_nobody(
        "permit::grants::a_refused_write_is_asked_about_in_a_translated_locale",
        a_refused_write_is_asked_about_in_a_translated_locale_once,
    );
}

fn a_refused_write_is_asked_about_in_a_translated_locale_once() {
    if !crate::support::sandbox::require_namespaces() {
        return;
    }
    let locales = open_folder("acpbash-permit-locale-");
    let Some(locpath) = german_locale(locales.path()) else {
        return;
    };
    runtime().block_on(async {
        let places = Places::new();
        let outside = open_folder("acpbash-permit-outside-");
        let target = outside.path().join("x");
        let locpath = locpath.to_str().unwrap();
        let env = [
            ("LOCPATH", locpath),
            ("LANG", "de_DE.UTF-8"),
            ("LC_ALL", "de_DE.UTF-8"),
        ];
        let mut agent = Agent::start_with_env(
            Face::Plain,
            &["--sandbox", "workspace"],
            places.config.path(),
            &env,
        );
        agent.initialize().await;
        let session = agent.new_session(&places.ws()).await;
        agent.will_answer(&[Pick::Option("reject")]);
        let turn = agent
            .turn(&session, &format!("touch {}", target.display()))
            .await;
        let text = shown(&turn);
        assert!(text.contains("kann nicht"), "not German: {text}");
        assert!(!text.contains("Read-only file system"), "{text}");
        assert_eq!(agent.asked.len(), 1, "{text}");
        assert_eq!(
            agent.asked[0]["_meta"]["acp-bash"]["refused"]["path"],
            target.to_str().unwrap()
        );
        agent.finish().await;
    });
}

/// `acp-bash permissions` (the built binary) lists the always file, and `remove` takes a host
/// or a prefix back through the same code as `/permissions`: every other line byte for byte,
/// the file still 0600, nothing left beside it. Nothing to remove, bad arguments and no config
/// directory each fail, say why, and change nothing.
#[test]
fn the_permissions_cli_lists_and_takes_back_kept_grants() {
    let config = tempfile::tempdir().unwrap();
    let always = always_in(config.path());
    std::fs::create_dir_all(always.parent().unwrap()).unwrap();
    let kept = "# mine\nhost keep.test\r\nwrite /srv/my\\ out cp\nhost drop.test\n\
                workspace npm install\nfull cp\n";
    std::fs::write(&always, kept).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&always, std::fs::Permissions::from_mode(0o600)).unwrap();
    let run = |args: &[&str], config_home: &str| {
        let out = std::process::Command::new(crate::support::acp::binary())
            .arg("permissions")
            .args(args)
            .env("XDG_CONFIG_HOME", config_home)
            .env_remove("HOME")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let home = config.path().to_str().unwrap();
    let read = || std::fs::read_to_string(&always).unwrap();
    for args in [&[][..], &["list"]] {
        let (code, out, err) = run(args, home);
        assert_eq!(code, Some(0), "{out}{err}");
        for line in [
            "host keep.test",
            "host drop.test",
            "write /srv/my\\ out cp",
            "workspace npm install",
        ] {
            assert!(out.lines().any(|l| l.trim() == line), "{line}: {out}");
        }
        assert!(
            out.contains("[ignored] `full cp` is no longer honoured"),
            "{out}"
        );
        assert!(out.contains(&always.display().to_string()), "{out}");
    }

    let (code, out, err) = run(&["remove", "drop.test"], home);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("removed: host drop.test"), "{out}");
    let kept = kept.replace("host drop.test\n", "");
    assert_eq!(read(), kept);
    // A prefix of two words, and one with a write line and an old full line.
    let (code, out, _) = run(&["remove", "npm", "install"], home);
    assert_eq!(code, Some(0), "{out}");
    let (code, out, _) = run(&["remove", "cp"], home);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("removed: write /srv/my\\ out cp"), "{out}");
    assert!(out.contains("removed: full cp"), "{out}");
    assert_eq!(read(), "# mine\nhost keep.test\r\n");
    let mode = std::fs::metadata(&always).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let beside = std::fs::read_dir(always.parent().unwrap()).unwrap().count();
    assert_eq!(beside, 1);

    // Nothing allows it; not an action; no config directory: a failure, the file as it was.
    let (code, _, err) = run(&["remove", "nothing.test"], home);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("nothing in"), "{err}");
    let (code, _, err) = run(&["drop", "keep.test"], home);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is not `list`"), "{err}");
    let (code, _, err) = run(&["remove", "keep.test"], "relative/path");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no config directory"), "{err}");
    assert_eq!(read(), "# mine\nhost keep.test\r\n");
}
