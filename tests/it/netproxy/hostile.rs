//! What the proxy refuses, and that it refuses at once, saying which host and how to allow it.

use std::io::{Read, Write};
use std::net::TcpStream;

use super::{curl, http_server, mapped, runtime, serve};
use acp_bash::netproxy::{HostPattern, Proxy};

#[test]
fn a_host_off_the_list_is_refused_by_every_protocol_and_recorded() {
    let server = http_server(None);
    let rt = runtime();
    let serving = serve(&Proxy::new(mapped(server.addr)), &rt);
    let proxy = serving.local_addr().to_string();

    let (code, out) = curl(&[
        "-i",
        "-x",
        &format!("http://{proxy}"),
        "http://other.test/x",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("--allow-host other.test"), "{out}");

    let (code, out) = curl(&[
        "-p",
        "-x",
        &format!("http://{proxy}"),
        "http://connect.test/",
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("403"), "{out}");

    let (code, out) = curl(&["-x", &format!("socks5h://{proxy}"), "http://socks.test/"]);
    assert_ne!(code, 0, "{out}");
    // curl prints the SOCKS5 reply code: 2, "connection not allowed by ruleset".
    assert!(out.contains("(97)") && out.contains("(2)"), "{out}");

    let hosts: Vec<String> = serving.take_blocks().into_iter().map(|b| b.host).collect();
    assert_eq!(hosts, ["other.test", "connect.test", "socks.test"]);
    assert!(serving.take_blocks().is_empty(), "taken once");
    assert!(server.seen().is_empty(), "{:?}", server.seen());
}

#[test]
fn a_host_header_that_names_another_host_is_refused() {
    let server = http_server(None);
    let rt = runtime();
    let serving = serve(&Proxy::new(mapped(server.addr)), &rt);
    let proxy = format!("http://{}", serving.local_addr());
    let (code, out) = curl(&[
        "-i",
        "-x",
        &proxy,
        "-H",
        "Host: evil.test",
        "http://registry.test/",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("Host header (evil.test)"), "{out}");
    assert!(server.seen().is_empty());
}

#[test]
fn ip_literals_the_hosts_own_addresses_and_the_proxy_itself_are_refused() {
    let server = http_server(None);
    let rt = runtime();
    let rules = mapped(server.addr).allow(HostPattern::parse("localhost").unwrap());
    let serving = serve(&Proxy::new(rules), &rt);
    let proxy = format!("http://{}", serving.local_addr());
    // The server itself, by address: allowed only when the address is listed.
    let direct = format!("http://{}/", server.addr);
    let (_, out) = curl(&["-i", "-x", &proxy, &direct]);
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    // An allowed name that resolves to the host's loopback.
    let local = format!("http://localhost:{}/", server.addr.port());
    let (_, out) = curl(&["-i", "-x", &proxy, &local]);
    assert!(
        out.starts_with("HTTP/1.1 403") && out.contains("private or loopback"),
        "{out}"
    );
    // The proxy asked to connect to itself, and asked as a server.
    let own = format!("http://{}/", serving.local_addr());
    let (_, out) = curl(&["-i", "-p", "-x", &proxy, &own]);
    assert!(out.contains("403"), "{out}");
    let (_, out) = curl(&["-i", &own]);
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    assert!(server.seen().is_empty(), "{:?}", server.seen());
}

#[test]
fn socks5_udp_associate_and_bind_are_refused() {
    let rt = runtime();
    let serving = serve(&Proxy::new(mapped(http_server(None).addr)), &rt);
    for command in [2u8, 3] {
        let mut s = TcpStream::connect(serving.local_addr()).unwrap();
        s.write_all(&[5, 1, 0]).unwrap();
        let mut hello = [0u8; 2];
        s.read_exact(&mut hello).unwrap();
        assert_eq!(hello, [5, 0]);
        s.write_all(&[5, command, 0, 3, 13]).unwrap();
        s.write_all(b"registry.test").unwrap();
        s.write_all(&53u16.to_be_bytes()).unwrap();
        let mut reply = [0u8; 10];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(reply[1], 7, "command {command}: not supported");
    }
}

#[test]
fn a_flood_stays_bounded_and_other_listeners_keep_serving() {
    let server = http_server(None);
    let rt = runtime();
    let proxy = Proxy::new(mapped(server.addr)).max_connections(4);
    let flooded = serve(&proxy, &rt);
    let other = serve(&proxy, &rt);
    // Four connections that never send a request hold every slot of `flooded`.
    let idle: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(flooded.local_addr()).unwrap();
            // A byte proves the proxy accepted it (took a slot) before the next one.
            s.write_all(b"G").unwrap();
            s
        })
        .collect();
    // Another session's listener answers at once.
    let (code, out) = curl(&[
        "-x",
        &format!("http://{}", other.local_addr()),
        "http://registry.test/o",
    ]);
    assert_eq!(
        (code, out.as_str()),
        (0, "GET /o HTTP/1.1|host: registry.test\n")
    );
    // The flooded one takes a fifth request into its backlog only: no answer while full.
    let mut fifth = TcpStream::connect(flooded.local_addr()).unwrap();
    fifth
        .write_all(b"GET http://registry.test/f HTTP/1.1\r\nHost: registry.test\r\n\r\n")
        .unwrap();
    fifth
        .set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert!(fifth.read(&mut byte).is_err(), "served past the bound");
    // A slot frees: the fifth is served.
    drop(idle);
    fifth.set_read_timeout(None).unwrap();
    let mut answer = String::new();
    fifth.read_to_string(&mut answer).unwrap();
    assert!(
        answer.ends_with("GET /f HTTP/1.1|host: registry.test\n"),
        "{answer}"
    );
}

#[test]
fn dropping_the_serving_closes_the_listener_and_its_tunnels() {
    let server = http_server(None);
    let rt = runtime();
    let serving = serve(&Proxy::new(mapped(server.addr)), &rt);
    let addr = serving.local_addr();
    let mut tunnel = TcpStream::connect(addr).unwrap();
    tunnel
        .write_all(b"CONNECT registry.test:80 HTTP/1.1\r\nHost: registry.test:80\r\n\r\n")
        .unwrap();
    let mut established = [0u8; 39];
    tunnel.read_exact(&mut established).unwrap();
    assert!(established.starts_with(b"HTTP/1.1 200"));
    drop(serving);
    // The tunnel ends (EOF or reset), and no new connection is served.
    let mut rest = Vec::new();
    let _ = tunnel.read_to_end(&mut rest);
    loop {
        match TcpStream::connect(addr) {
            Err(_) => break,
            Ok(mut s) => {
                // Accepted by the kernel before the listener closed: it must end unserved.
                let mut buf = Vec::new();
                let _ = s.write_all(b"GET http://registry.test/ HTTP/1.1\r\n\r\n");
                let _ = s.read_to_end(&mut buf);
                assert!(buf.is_empty(), "{}", String::from_utf8_lossy(&buf));
                std::thread::yield_now();
            }
        }
    }
}

/// A loopback TCP server that records the first bytes each connection sends (empty: it sent
/// nothing before closing), then closes it.
fn first_bytes_server() -> (std::net::SocketAddr, std::sync::mpsc::Receiver<Vec<u8>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = vec![0u8; 4096];
            let n = stream.read(&mut buf).unwrap_or(0);
            buf.truncate(n);
            let _ = tx.send(buf);
        }
    });
    (addr, rx)
}

/// Python's own TLS client, through a CONNECT tunnel to `target` on `proxy`, asking for
/// `server_name` (SNI): prints the proxy's answer line, then how the handshake ended.
fn tls_through_connect(proxy: std::net::SocketAddr, target: &str, server_name: &str) -> String {
    let script = r#"
import socket, ssl, sys
proxy, target, name = sys.argv[1], sys.argv[2], sys.argv[3]
host, port = proxy.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=60)
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
head = b""
while b"\r\n\r\n" not in head:
    byte = s.recv(1)
    if not byte:
        break
    head += byte
print(head.split(b"\r\n")[0].decode())
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    ctx.wrap_socket(s, server_hostname=name).do_handshake()
    print("handshake: ok")
except Exception as e:
    print("handshake: failed")
"#;
    let out = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script, &proxy.to_string(), target, server_name])
        .output()
        .expect("python3 runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_tls_server_name_other_than_the_connect_target_never_reaches_the_host() {
    if !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: no /usr/bin/python3 to make a TLS ClientHello");
        return;
    }
    let (addr, first) = first_bytes_server();
    let rt = runtime();
    let serving = serve(&Proxy::new(mapped(addr)), &rt);
    let wait = std::time::Duration::from_secs(120);

    // The allowed name, asked for by its own name: the ClientHello reaches the host.
    let out = tls_through_connect(serving.local_addr(), "registry.test:443", "registry.test");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let bytes = first.recv_timeout(wait).unwrap();
    assert_eq!(bytes.first(), Some(&22), "a TLS handshake record: {out}");
    assert!(serving.take_blocks().is_empty());

    // Another name (fronting through the allowed host's server): the tunnel ends before
    // a byte reaches the host, and the block names the host asked for.
    let out = tls_through_connect(serving.local_addr(), "registry.test:443", "evil.test");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("handshake: failed"), "{out}");
    let bytes = first.recv_timeout(wait).unwrap();
    assert!(
        bytes.is_empty(),
        "the host got {} bytes: {out}",
        bytes.len()
    );
    let blocks = serving.take_blocks();
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    assert_eq!(
        (blocks[0].host.as_str(), blocks[0].port),
        ("evil.test", 443)
    );
    assert!(blocks[0].reason.contains("(SNI)"), "{blocks:?}");

    // The same through SOCKS5 (curl's socks5h): its own name passes, by byte 22 at the host.
    let (_, out) = curl(&[
        "-k",
        "--max-time",
        "30",
        "-x",
        &format!("socks5h://{}", serving.local_addr()),
        "https://registry.test/",
    ]);
    let bytes = first.recv_timeout(wait).unwrap();
    assert_eq!(bytes.first(), Some(&22), "{out}");
    assert!(serving.take_blocks().is_empty());
}
