//! WSL (issue 44, point 6): the interop socket (`/run/WSL/<pid>_interop`, through which a process
//! starts Windows programs outside every layer), every socket under `/run` however deep, and the
//! Windows homes' credential folders under `/mnt/*/Users/*` (`.ssh` private keys, `.aws`,
//! `.azure`, `.config/gh`) are out of a workspace or read-only command's reach, as root and as
//! `nobody`. The test makes those paths in a private mount namespace of its own (a tmpfs over
//! `/run` and one over `/mnt`, gone with the agent: nothing is left on the host), with a
//! listener answering on both sockets, and starts the BUILT agent inside it as a client does.
//! Full mode (no view) is the control: there the same command reads every file and reaches
//! both sockets, so the setup is what the other modes hide.
#![cfg(target_os = "linux")]

use acp_bash::acp::client::{AcpClient, ClientProfile};

use crate::support::acp::{binary, console_block, converse_with};
use crate::support::sandbox::{agent_binary_for_nobody, require_namespaces};
use crate::support::skip::{root, skip_unless, ROOT};

/// The Windows user's home the test makes.
const WINDOWS_HOME: &str = "/mnt/c/Users/alice";
/// The sockets the test's listener answers on.
const SOCKETS: [&str; 2] = ["/run/WSL/4242_interop", "/run/deep/a/b/c/daemon.sock"];
/// The credential files (under [`WINDOWS_HOME`]) a masked command must not read.
const SECRETS: [&str; 4] = [
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".azure/msal_token_cache.json",
    ".config/gh/hosts.yml",
];

/// Binds [`SOCKETS`] (mode 0777, so `nobody` could connect), says so on the fifo
/// `/run/ready`, then answers each connection with `PONG-<socket name>`. Dies with its parent
/// (the agent, which the setup shell becomes).
const LISTENER: &str = r#"
import ctypes, os, select, signal, socket, sys
ctypes.CDLL(None).prctl(1, signal.SIGKILL)
socks = {}
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    os.chmod(path, 0o777)
    s.listen(16)
    socks[s] = os.path.basename(path)
with open("/run/ready", "w") as ready:
    ready.write("ready\n")
while True:
    for s in select.select(list(socks), [], [])[0]:
        c, _ = s.accept()
        c.sendall(("PONG-" + socks[s] + "\n").encode())
        c.close()
"#;

/// The setup, run by `sh -c` in a new private mount namespace; then it becomes the agent
/// (`"$@"`).
fn setup() -> String {
    let secrets: String = SECRETS
        .iter()
        .map(|rel| format!("printf 'WINSECRET-%s\\n' '{rel}' > {WINDOWS_HOME}/{rel}\n"))
        .collect();
    let dirs: String = SOCKETS
        .iter()
        .map(|s| format!(" {}", std::path::Path::new(s).parent().unwrap().display()))
        .collect();
    format!(
        r#"set -e
mount -t tmpfs -o mode=0755 acpbash-wsl-test /run
mount -t tmpfs -o mode=0755 acpbash-wsl-test /mnt
mkdir -p{dirs} {home}/.ssh {home}/.aws {home}/.azure {home}/.config/gh
{secrets}printf 'KNOWN-HOSTS\n' > {home}/.ssh/known_hosts
chmod -R a+rX /mnt/c
mkfifo /run/ready
/usr/bin/python3 -c '{listener}' {sockets} &
read ready < /run/ready
rm /run/ready
exec "$@"
"#,
        home = WINDOWS_HOME,
        listener = LISTENER.replace('\'', "'\\''"),
        sockets = SOCKETS.join(" "),
    )
}

/// What the command inside tries: read each credential file and `known_hosts` (readable: the
/// Windows home itself is not hidden), and connect to each socket.
fn script() -> String {
    let files: String = SECRETS
        .iter()
        .chain([".ssh/known_hosts"].iter())
        .map(|rel| format!("cat '{WINDOWS_HOME}/{rel}' 2>&1\n"))
        .collect();
    let sockets: String = SOCKETS.map(|s| format!("\"{s}\"")).join(", ");
    format!(
        r#"{files}/usr/bin/python3 -c '
import socket
for p in ({sockets}):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(p)
        print(s.recv(64).decode().strip())
    except OSError as e:
        print("no connection to", p, e)
'
echo "checked""-all"
"#
    )
}

/// The console block of one command run by an agent in `mode`, started as `user` inside the
/// test's mount namespace.
fn run(mode: &str, user: &str, workspace: &std::path::Path) -> String {
    let mut args: Vec<String> = [
        "-m",
        "--propagation",
        "private",
        "--",
        "/bin/sh",
        "-c",
        &setup(),
        "sh",
    ]
    .map(String::from)
    .to_vec();
    let agent = if user == "nobody" {
        args.extend(
            [
                "setpriv",
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                "--",
            ]
            .map(String::from),
        );
        agent_binary_for_nobody()
    } else {
        binary()
    };
    args.push(agent.to_string_lossy().into_owned());
    args.extend(
        [
            "serve",
            "--sandbox",
            mode,
            "--no-history",
            "--log-level",
            "warn",
        ]
        .map(String::from),
    );
    let client = AcpClient::new("unshare", args)
        .env("HOME", workspace.to_string_lossy())
        .profile(ClientProfile::Plain);
    let cwd = workspace.to_path_buf();
    let script = script();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (output, _) = runtime.block_on(converse_with(
        client,
        "a command in a WSL-like setting",
        async move |mut c| {
            let session = c.new_session(&cwd).await?;
            let turn = c.prompt(&session, &script).await?;
            Ok(console_block(&turn.updates))
        },
    ));
    output
}

#[test]
fn wsl_interop_sockets_under_run_and_windows_credentials_are_out_of_reach() {
    if !skip_unless(ROOT, root()) || !require_namespaces() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let ws = tempfile::Builder::new()
        .prefix("acpbash-wsl-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(ws.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    for user in ["root", "nobody"] {
        let control = run("full", user, ws.path());
        for rel in SECRETS {
            assert!(
                control.contains(&format!("WINSECRET-{rel}")),
                "as {user}, full mode does not read {WINDOWS_HOME}/{rel}: the setup is wrong\n{control}"
            );
        }
        for socket in SOCKETS {
            let name = socket.rsplit('/').next().unwrap();
            assert!(
                control.contains(&format!("PONG-{name}")),
                "as {user}, full mode does not reach {socket}: the setup is wrong\n{control}"
            );
        }
        for mode in ["workspace", "read-only"] {
            let output = run(mode, user, ws.path());
            assert!(
                output.contains("checked-all") && output.contains("KNOWN-HOSTS"),
                "as {user}, {mode} mode: the command did not run to its end, or the Windows \
                 home is not there at all\n{output}"
            );
            assert!(
                !output.contains("WINSECRET"),
                "as {user}, {mode} mode: a command reads a Windows credential file\n{output}"
            );
            assert!(
                !output.contains("PONG"),
                "as {user}, {mode} mode: a command reaches a socket under /run\n{output}"
            );
        }
    }
}
