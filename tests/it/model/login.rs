//! `acp-bash login` and the key file through the BUILT BINARY: the key read from stdin (never
//! an argument) and stored 0600 in `$XDG_CONFIG_HOME/acp-bash/keys/PROVIDER`; the serve flags
//! an editor puts before `login`; the driver using the file when the variable is unset (read
//! again at each prompt and by `authenticate`); a file open to others refused; the auth method
//! advertised as `terminal` to a client that runs terminal logins and with Zed's
//! `_meta["terminal-auth"]` to one that does not; the key file hidden from commands.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{AuthenticateRequest, StopReason};

use crate::support::acp::*;
use crate::support::fake_model::{openai, FakeModel};
use crate::support::sandbox::as_root_and_nobody;

const FILE_KEY: &str = "sk-from-the-login-file-51d2";

/// `acp-bash ARGS` with `stdin` piped in and `XDG_CONFIG_HOME=config`.
fn login(config: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(binary())
        .args(args)
        .env("XDG_CONFIG_HOME", config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start acp-bash login");
    // A login that fails on its arguments exits without reading stdin: under churn it can be
    // gone before this write, which then fails with EPIPE, and that is no failure of the test.
    let written = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    if let Err(error) = written {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    child.wait_with_output().unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The binary with `--model openai:fake` at the fake, no key variable, `XDG_CONFIG_HOME=config`.
fn client(profile: ClientProfile, fake: &FakeModel, config: &Path, sandbox: &str) -> AcpClient {
    AcpClient::new(
        binary(),
        [
            "serve",
            "--sandbox",
            sandbox,
            "--no-history",
            "--log-level",
            "acp_bash=debug",
            "--model",
            "openai:fake",
            "--base-url",
            &format!("{}/v1", fake.base),
            "--api-key-env",
            "ACPBASH_TEST_NO_SUCH_KEY",
        ],
    )
    .profile(profile)
    .env("XDG_CONFIG_HOME", config.to_string_lossy())
}

#[test]
fn login_stores_the_key_from_stdin_0600_and_never_takes_it_as_an_argument() {
    let (_tmp, config) = temp_dir();
    let output = login(&config, &["login", "openai"], &format!("  {FILE_KEY}\n"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(!stderr.contains(FILE_KEY), "{stderr}");
    let file = config.join("acp-bash/keys/openai");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("{FILE_KEY}\n")
    );
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    // An existing file open to others is replaced by a 0600 one.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let again = login(&config, &["login", "openai"], "sk-second\n");
    assert!(again.status.success());
    assert_eq!(mode(&file), 0o600);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "sk-second\n");
    // Never from argv; an empty stdin stores nothing.
    let argv = login(&config, &["login", "openai", "sk-argv"], "");
    assert!(!argv.status.success());
    let empty = login(&config, &["login", "anthropic"], "\n");
    assert!(!empty.status.success());
    assert!(String::from_utf8_lossy(&empty.stderr).contains("empty"));
    assert!(!config.join("acp-bash/keys/anthropic").exists());
    let none = login(&config, &["login"], "sk\n");
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("acp-bash login openai"));
}

/// An editor's terminal login appends `login PROVIDER` to the agent's own arguments (Zed's
/// `args`: serve flags): they are taken, and `--model` names the provider when none is given.
#[test]
fn login_takes_the_serve_flags_an_editor_puts_before_it() {
    let (_tmp, config) = temp_dir();
    let args = [
        "--sandbox",
        "workspace",
        "--no-history",
        "--model",
        "anthropic:claude-x",
        "--base-url",
        "http://127.0.0.1:9",
        "login",
    ];
    let output = login(&config, &args, "sk-ant-1\n");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(config.join("acp-bash/keys/anthropic")).unwrap(),
        "sk-ant-1\n"
    );
    let help = Command::new(binary())
        .args(["login", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("in order: the variable"), "{help}");
}

/// Without a key: a terminal method for a client with `auth.terminal` (Zed's profile), an
/// agent method carrying `_meta["terminal-auth"]` for one without; the prompt's auth-required
/// error names the variable and the login command. After a login (while the agent runs),
/// `authenticate` succeeds and the next prompt uses the file's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_while_the_agent_runs_is_used_by_authenticate_and_the_next_prompt() {
    let (_tmp, config) = temp_dir();
    let (_ws, dir) = temp_dir();
    let fake = FakeModel::start(vec![openai::reply(&["Logged in."], &[])]).await;
    let plain = client(ClientProfile::Plain, &fake, &config, "full");
    let (plain_methods, _) = converse_with(plain, "plain initialize", async |c| {
        Ok(serde_json::to_value(&c.init.auth_methods).unwrap())
    })
    .await;
    let method = &plain_methods[0];
    assert!(method.get("type").is_none(), "{plain_methods}");
    assert_eq!(
        method["_meta"]["terminal-auth"]["args"],
        serde_json::json!(["login", "openai"])
    );
    assert_eq!(
        method["_meta"]["terminal-auth"]["command"].as_str(),
        Some(binary().to_str().unwrap())
    );
    let zed = client(ClientProfile::Zed, &fake, &config, "full");
    let config_for_login = config.clone();
    let ((methods, refused, error, authenticated, turn), _) =
        converse_with(zed, "a login while serving", async |mut c| {
            let methods = serde_json::to_value(&c.init.auth_methods).unwrap();
            let session = c.new_session(&dir).await?;
            let refused = c
                .connection()
                .send_request(AuthenticateRequest::new("acp-bash-login"))
                .block_task()
                .await
                .unwrap_err();
            let error = c.prompt(&session, "hello").await.unwrap_err();
            let stored = login(&config_for_login, &["login", "openai"], FILE_KEY);
            assert!(stored.status.success());
            let authenticated = c
                .connection()
                .send_request(AuthenticateRequest::new("acp-bash-login"))
                .block_task()
                .await;
            let turn = c.prompt(&session, "hello").await?;
            Ok((methods, refused, error, authenticated.is_ok(), turn))
        })
        .await;
    assert_eq!(methods[0]["type"], "terminal", "{methods}");
    assert_eq!(methods[0]["args"], serde_json::json!(["login", "openai"]));
    assert_eq!(
        refused.code,
        agent_client_protocol::ErrorCode::INVALID_PARAMS
    );
    assert_eq!(error.code, agent_client_protocol::ErrorCode::AUTH_REQUIRED);
    let message = format!("{error:?}");
    assert!(
        message.contains("ACPBASH_TEST_NO_SUCH_KEY") && message.contains("acp-bash login openai"),
        "{message}"
    );
    assert!(authenticated);
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {FILE_KEY}").as_str())
    );
}

/// A key file that others may read is never used: the prompt is refused with a message that
/// says why and what to do, and no request is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_file_open_to_others_is_refused() {
    let (_tmp, config) = temp_dir();
    let (_ws, dir) = temp_dir();
    assert!(login(&config, &["login", "openai"], FILE_KEY)
        .status
        .success());
    let file = config.join("acp-bash/keys/openai");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o604)).unwrap();
    let fake = FakeModel::start(vec![]).await;
    let agent = client(ClientProfile::Zed, &fake, &config, "full");
    let (error, transcript) = converse_with(agent, "an open key file", async |mut c| {
        let session = c.new_session(&dir).await?;
        Ok(c.prompt(&session, "hello").await.unwrap_err())
    })
    .await;
    assert_eq!(error.code, agent_client_protocol::ErrorCode::AUTH_REQUIRED);
    let message = format!("{error:?}");
    assert!(
        message.contains("open to others") && message.contains("chmod 600"),
        "{message}"
    );
    assert!(fake.requests().is_empty());
    let everything = [transcript.lines(), transcript.stderr()]
        .concat()
        .join("\n");
    assert!(!everything.contains(FILE_KEY));
}

/// The key file is the agent's own: a command the model runs in the sandbox cannot read it
/// (workspace mode, as root and as an ordinary user), and the key never shows in its result.
#[test]
fn the_models_commands_cannot_read_the_key_file() {
    as_root_and_nobody(
        "model::login::the_models_commands_cannot_read_the_key_file",
        || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                // Not under /tmp, which commands see replaced by their own: a config dir the
                // view would otherwise show as it is.
                let tmp = tempfile::tempdir_in("/var/tmp").expect("a dir in /var/tmp");
                let config = tmp.path().canonicalize().unwrap();
                let (_ws, dir) = temp_dir();
                assert!(login(&config, &["login", "openai"], FILE_KEY)
                    .status
                    .success());
                let file = config.join("acp-bash/keys/openai");
                let command = format!(
                    "{{\"command\": \"cat {}; ls {}; echo read-done\"}}",
                    file.display(),
                    file.parent().unwrap().display()
                );
                let fake = FakeModel::start(vec![
                    openai::reply(&[], &[("call_1", "bash", &[&command])]),
                    openai::reply(&["Done."], &[]),
                ])
                .await;
                let agent = client(ClientProfile::Plain, &fake, &config, "workspace");
                let (turn, _) = converse_with(agent, "read the key file", async |mut c| {
                    let session = c.new_session(&dir).await?;
                    c.prompt(&session, "read it").await
                })
                .await;
                assert_eq!(turn.stop_reason, StopReason::EndTurn);
                let requests = fake.requests();
                assert_eq!(
                    requests[0].header("authorization"),
                    Some(format!("Bearer {FILE_KEY}").as_str())
                );
                let result = requests[1].body["messages"][3]["content"]
                    .as_str()
                    .unwrap()
                    .to_string();
                assert!(result.contains("read-done"), "{result}");
                assert!(!result.contains(FILE_KEY), "{result}");
                // Masked: the directory shows empty, the file is not there.
                assert!(result.contains("No such file"), "{result}");
            });
        },
    );
}
