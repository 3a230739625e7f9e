//! The allowlist through the engine on the per-command path (this test binary serves no
//! zygote, so each command makes its own namespaces): as an ordinary user the command's first
//! process makes the proxy's listener in the network namespace it creates and passes it back
//! before its shell starts (`child::sys::send_listener`); as root the agent makes it in a
//! prepared namespace.
#![cfg(target_os = "linux")]

use super::http_server;
use crate::support::engine::run;
use crate::support::sandbox::{as_root_and_nobody, require_namespaces};
use acp_bash::exec::{Engine, EngineConfig, Exit};
use acp_bash::netproxy::{Proxy, Rules};
use acp_bash::sandbox::Mode;

#[test]
fn a_command_on_the_per_command_path_reaches_allowed_hosts_only() {
    as_root_and_nobody(
        "netproxy::engine::a_command_on_the_per_command_path_reaches_allowed_hosts_only",
        || {
            if !require_namespaces() {
                return;
            }
            let support = acp_bash::sandbox::Support::current();
            assert_eq!(acp_bash::sandbox::network_proxied_here(support), Ok(()));
            let server = http_server(None);
            let rules = Rules::empty().map("registry.test", server.addr).unwrap();
            let ws = tempfile::Builder::new()
                .prefix("acpbash-netengine-")
                .tempdir_in("/var/tmp")
                .unwrap();
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(ws.path(), std::fs::Permissions::from_mode(0o777))
                    .unwrap();
            }
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let port = server.addr.port();
            let script = format!(
                "curl -sS --max-time 20 http://registry.test/first; \
                 curl -sSf --max-time 20 http://other.test/ >/dev/null 2>&1 || echo other: no; \
                 (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null || echo direct: no"
            );
            runtime.block_on(async {
                let engine =
                    Engine::new(EngineConfig::default().network_proxy(Some(Proxy::new(rules))));
                let session = engine.session(ws.path()).unwrap();
                assert_eq!(session.mode(), Mode::Workspace);
                // Twice: each command has a namespace and a listener of its own.
                for round in ["first", "second"] {
                    let outcome = run(&session, &script.replace("first", round)).await;
                    let out = &outcome.output;
                    assert_eq!(outcome.status.exit, Exit::Code(0), "{out}");
                    let seen = format!("GET /{round} HTTP/1.1|host: registry.test");
                    assert!(out.contains(&seen), "{out}");
                    assert!(out.contains("other: no"), "{out}");
                    assert!(out.contains("direct: no"), "{out}");
                }
            });
            assert_eq!(
                server.seen(),
                ["GET /first HTTP/1.1", "GET /second HTTP/1.1"]
            );
        },
    );
}
