//! Workspace mode's allowlist as a client gets it: the BUILT binary (`acp-bash serve` over
//! pipes), its commands driving real tools against a loopback server whose name
//! `--map-host` maps, and every other way out tried from inside the command.
#![cfg(target_os = "linux")]

use acp_bash::acp::client::{AcpClient, ClientProfile};

use super::http_server;
use crate::support::acp::{binary, console_block, converse_with};
use crate::support::sandbox::{as_root_and_nobody, require_namespaces};

/// Each probe prints `NAME: ok` when the way out works and `NAME: no` when it does not.
const HOSTILE: &str = r#"
probe() { local name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name: ok"; else echo "$name: no"; fi; }
probe allowed curl -sSf --max-time 20 http://registry.test/allowed
curl -sS --max-time 20 http://other.test/x; echo
probe other-host curl -sSf --max-time 20 http://other.test/
probe host-header curl -sSf --max-time 20 -H 'Host: other.test' http://registry.test/h
probe direct-loopback bash -c 'exec 3<>/dev/tcp/127.0.0.1/SERVER_PORT'
probe direct-ip bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'
probe ipv6 bash -c 'exec 3<>/dev/tcp/2606:4700:4700::1111/80'
probe udp-dns bash -c 'exec 3<>/dev/udp/8.8.8.8/53 && printf x >&3'
probe resolver getent hosts registry.test
probe raw /usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.sendto(b"\x08\0\xf7\xff\0\0\0\0", ("1.1.1.1", 0))'
probe unset-proxy env -u http_proxy -u HTTP_PROXY -u ALL_PROXY -u all_proxy curl -sSf --max-time 20 http://registry.test/unset
probe no-proxy env NO_PROXY='*' no_proxy='*' curl -sSf --max-time 20 http://registry.test/noproxy
probe proxy-as-server curl -sSf --max-time 20 --noproxy '*' http://127.0.0.1:3128/
probe sni-fronting /usr/bin/python3 -c '
import socket, ssl
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(b"CONNECT registry.test:443 HTTP/1.1\r\nHost: registry.test:443\r\n\r\n")
head = b""
while not head.endswith(b"\r\n\r\n"):
    head += s.recv(1)
assert head.startswith(b"HTTP/1.1 200"), head
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.wrap_socket(s, server_hostname="fronted.test").do_handshake()
'
"#;

#[test]
fn a_served_workspace_command_reaches_allowed_hosts_only() {
    as_root_and_nobody(
        "netproxy::served::a_served_workspace_command_reaches_allowed_hosts_only",
        || {
            if !require_namespaces() {
                return;
            }
            let server = http_server(None);
            let ws = tempfile::Builder::new()
                .prefix("acpbash-netproxy-")
                .tempdir_in("/var/tmp")
                .unwrap();
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(ws.path(), std::fs::Permissions::from_mode(0o777))
                    .unwrap();
            }
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
            let script = HOSTILE.replace("SERVER_PORT", &server.addr.port().to_string());
            let cwd = ws.path().to_path_buf();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let (output, _) = runtime.block_on(converse_with(
                client,
                "the network allowlist",
                async move |mut c| {
                    let session = c.new_session(&cwd).await?;
                    let turn = c.prompt(&session, &script).await?;
                    Ok(console_block(&turn.updates))
                },
            ));
            // Root or not: where namespaces work, the allowlist holds (as an ordinary user,
            // the zygote or the command makes the proxy's listener inside its own namespace
            // and passes it back).
            let proxied =
                acp_bash::sandbox::network_proxied_here(acp_bash::sandbox::Support::current());
            assert_eq!(proxied, Ok(()), "{output}");
            for line in [
                "allowed: ok",
                "other-host: no",
                "host-header: no",
                "direct-loopback: no",
                "direct-ip: no",
                "ipv6: no",
                "udp-dns: no",
                "resolver: no",
                "raw: no",
                "unset-proxy: no",
                "no-proxy: no",
                "proxy-as-server: no",
                "sni-fronting: no",
            ] {
                assert!(
                    output.lines().any(|l| l == line),
                    "no `{line}` in:\n{output}"
                );
            }
            // The 403's body names the host and how to allow it; the engine's own line, read
            // from the proxy's record, says the same in the result.
            assert!(
                output.contains("start acp-bash with --allow-host other.test"),
                "{output}"
            );
            assert!(
                output
                    .contains("[acp-bash: blocked other.test: it is not on the network allowlist"),
                "{output}"
            );
            // A TLS handshake for another name inside a tunnel to an allowed host is cut
            // before it reaches that host, and said so.
            assert!(
                output.contains("[acp-bash: blocked fronted.test: a TLS handshake named it (SNI)"),
                "{output}"
            );
            assert_eq!(server.seen(), ["GET /allowed HTTP/1.1"], "{output}");
        },
    );
}
