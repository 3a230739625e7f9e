//! A request flood against the proxy through the BUILT binary (`acp-bash serve`): one
//! session's command holds more connections than its listener serves at once; that session's
//! own next request waits (the bound holds), while another session's command of the same agent
//! still reaches an allowed host at once.
#![cfg(target_os = "linux")]

use acp_bash::acp::client::{AcpClient, ClientProfile};

use super::http_server;
use crate::support::acp::{binary, console_block, converse_with};
use crate::support::sandbox::{as_root_and_nobody, require_namespaces};

/// Session A: 200 connections to the proxy (past its 128 slots), each with a byte sent so the
/// proxy takes a slot for it; then its own request, which must get no answer in 5 s; then
/// it says so in a file and holds the flood until session B's file appears.
const FLOOD: &str = r#"
/usr/bin/python3 - <<'PY'
import os, socket, subprocess, time
held = []
for _ in range(200):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    s.send(b"G")
    held.append(s)
own = subprocess.run(["curl", "-sSf", "--max-time", "5", "http://registry.test/a"],
                     capture_output=True)
open("flooded", "w").write("own: %s\n" % ("ok" if own.returncode == 0 else "no"))
deadline = time.time() + 300
while not os.path.exists(os.environ["OTHER"] + "/done") and time.time() < deadline:
    time.sleep(0.05)
print("held", len(held))
PY
"#;

#[test]
fn a_flood_in_one_session_leaves_another_sessions_network_working() {
    as_root_and_nobody(
        "netproxy::flood::a_flood_in_one_session_leaves_another_sessions_network_working",
        || {
            if !require_namespaces() {
                return;
            }
            let server = http_server(None);
            let folder = || {
                let dir = tempfile::Builder::new()
                    .prefix("acpbash-netflood-")
                    .tempdir_in("/var/tmp")
                    .unwrap();
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
                    .unwrap();
                dir
            };
            let (a, b) = (folder(), folder());
            let map = format!("registry.test={}", server.addr);
            let client = AcpClient::new(
                binary(),
                [
                    "serve",
                    "--sandbox",
                    "workspace",
                    "--map-host",
                    map.as_str(),
                    "--no-history",
                    "--log-level",
                    "warn",
                ],
            )
            .profile(ClientProfile::Plain);
            let flood = format!("export OTHER={}\n{FLOOD}", b.path().display());
            let other = format!(
                "while [ ! -e {}/flooded ]; do sleep 0.05; done\n\
                 curl -sS --max-time 60 http://registry.test/b && touch done",
                a.path().display()
            );
            let (a_dir, b_dir) = (a.path().to_path_buf(), b.path().to_path_buf());
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let (output, _) = runtime.block_on(converse_with(
                client,
                "a flood in one session",
                async move |mut c| {
                    let session_a = c.new_session(&a_dir).await?;
                    let session_b = c.new_session(&b_dir).await?;
                    let flooding = c.start_prompt(&session_a, &flood);
                    let turn = c.prompt(&session_b, &other).await?;
                    flooding.block_task().await?;
                    Ok(console_block(&turn.updates))
                },
            ));
            assert!(
                output.contains("GET /b HTTP/1.1|host: registry.test"),
                "{output}"
            );
            assert!(b.path().join("done").exists(), "{output}");
            let flooded = std::fs::read_to_string(a.path().join("flooded")).unwrap();
            assert_eq!(
                flooded, "own: no\n",
                "the flooded session was served past its bound"
            );
            // (A's own request may still be served once its flood ends: it waited in the
            // backlog, which is the bound working.)
            assert!(server.seen().contains(&"GET /b HTTP/1.1".to_string()));
        },
    );
}
