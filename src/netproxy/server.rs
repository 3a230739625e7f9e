//! The proxy itself: one accept loop per listening socket (one per network namespace), each
//! connection speaking HTTP CONNECT, a plain-HTTP forward request, or SOCKS5, told apart by its
//! first byte. Every connection is checked against [`Rules`] before anything is connected.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::rules::{Decision, Grants, Rules};
use super::tls::Hello;

/// The largest request head (request line and headers) a client may send.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head or SOCKS5 handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to an allowed host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The copy buffers between client and host (each direction): large enough that the proxy
/// keeps up with a direct download on loopback (`benches/`, `notes/benchmarks.md`).
#[cfg(not(target_os = "linux"))]
const COPY_BUFFER: usize = 64 * 1024;
/// Connections one listener (one session's or one command's namespace) serves at once by
/// default; more wait in the kernel's backlog, and other listeners are not affected.
pub const DEFAULT_MAX_CONNECTIONS: usize = 128;
/// Blocks one listener remembers between two [`Serving::take_blocks`].
const MAX_BLOCKS: usize = 64;

/// A connection the proxy refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Blocked {
    /// The host (or address) the command asked for.
    pub host: String,
    /// The port it asked for.
    pub port: u16,
    /// Why, and how to allow it.
    pub reason: String,
}

/// The proxy's configuration, shared by every listener it serves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Proxy {
    rules: Arc<Rules>,
    max_connections: usize,
    grants: Grants,
}

impl Proxy {
    /// A proxy that applies `rules`, serving [`DEFAULT_MAX_CONNECTIONS`] per listener.
    pub fn new(rules: Rules) -> Proxy {
        Proxy {
            rules: Arc::new(rules),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            grants: Grants::default(),
        }
    }

    /// At most `max` connections at once per listener (at least 1).
    pub fn max_connections(mut self, max: usize) -> Proxy {
        self.max_connections = max.max(1);
        self
    }

    /// The same proxy, also allowing the hosts `grants` holds when a connection asks.
    pub fn granting(mut self, grants: Grants) -> Proxy {
        self.grants = grants;
        self
    }

    /// Its rules.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Serves `listener` (a listening socket, possibly made inside a command's network
    /// namespace) on `runtime` until the returned [`Serving`] drops, which closes it and ends
    /// every connection it carries.
    pub fn serve(
        &self,
        listener: std::net::TcpListener,
        runtime: &tokio::runtime::Handle,
    ) -> std::io::Result<Serving> {
        self.serve_recording(listener, runtime, BlockRecord::default())
    }

    /// [`Proxy::serve`], recording refusals in `record` (shared by a session's listeners).
    pub fn serve_recording(
        &self,
        listener: std::net::TcpListener,
        runtime: &tokio::runtime::Handle,
        record: BlockRecord,
    ) -> std::io::Result<Serving> {
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let blocks = record.0;
        let tracker = tokio_util::task::TaskTracker::new();
        let stop = tokio_util::sync::CancellationToken::new();
        let state = Listener {
            rules: self.rules.clone(),
            grants: self.grants.clone(),
            slots: Arc::new(Semaphore::new(self.max_connections)),
            blocks: blocks.clone(),
        };
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)?
        };
        let (tasks, stopped) = (tracker.clone(), stop.clone());
        runtime.spawn(async move {
            tokio::select! {
                () = stopped.cancelled() => {}
                () = accept_loop(listener, state, tasks.clone(), stopped.clone()) => {}
            }
            tasks.close();
        });
        Ok(Serving {
            local,
            blocks,
            stop,
        })
    }
}

/// Where refused connections are recorded (at most 64 between two [`BlockRecord::take`]).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct BlockRecord(Arc<Mutex<Vec<Blocked>>>);

impl BlockRecord {
    /// The connections refused since the last call.
    pub fn take(&self) -> Vec<Blocked> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One listener being served; dropping it stops the listener and its connections.
#[derive(Debug)]
#[non_exhaustive]
pub struct Serving {
    local: SocketAddr,
    blocks: Arc<Mutex<Vec<Blocked>>>,
    stop: tokio_util::sync::CancellationToken,
}

impl Serving {
    /// The address it listens on (in its own network namespace).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The connections refused since the last call (at most 64 are kept, the first ones).
    pub fn take_blocks(&self) -> Vec<Blocked> {
        std::mem::take(&mut *self.blocks.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[derive(Clone)]
struct Listener {
    rules: Arc<Rules>,
    grants: Grants,
    slots: Arc<Semaphore>,
    blocks: Arc<Mutex<Vec<Blocked>>>,
}

impl Listener {
    fn record(&self, host: &str, port: u16, reason: &str) {
        tracing::info!(host, port, reason, "netproxy: blocked");
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        let known = blocks.iter().any(|b| b.host == host && b.port == port);
        if !known && blocks.len() < MAX_BLOCKS {
            blocks.push(Blocked {
                host: host.to_string(),
                port,
                reason: reason.to_string(),
            });
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    state: Listener,
    tasks: tokio_util::task::TaskTracker,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        // A slot first: past the bound, connections wait in the backlog, not in the agent.
        let Ok(slot) = state.slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::debug!(%error, "netproxy: accept failed");
                // EMFILE and the like: let the moment pass rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = state.clone();
        let stop = stop.clone();
        tasks.spawn(async move {
            let _slot = slot;
            tokio::select! {
                () = stop.cancelled() => {}
                result = handle(stream, &state) => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "netproxy: connection ended");
                    }
                }
            }
        });
    }
}

async fn handle(client: TcpStream, state: &Listener) -> std::io::Result<()> {
    let _ = client.set_nodelay(true);
    let mut first = [0u8; 1];
    let n = tokio::time::timeout(HANDSHAKE_TIMEOUT, client.peek(&mut first))
        .await
        .map_err(|_| std::io::Error::other("no request in time"))??;
    if n == 0 {
        return Ok(());
    }
    if first[0] == 5 {
        socks5(client, state).await
    } else {
        http(client, state).await
    }
}

/// The request head of an HTTP client, as far as the proxy needs it.
struct Head {
    method: String,
    target: String,
    version: String,
    headers: Vec<(String, String)>,
}

fn parse_head(bytes: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !version.starts_with("HTTP/1.") {
        return None;
    }
    let mut headers = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    Some(Head {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
    })
}

/// `host:port` (IPv6 in brackets) into its parts; `default_port` when there is no port.
fn split_authority(authority: &str, default_port: Option<u16>) -> Option<(String, u16)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default_port?,
            None => return None,
        };
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_string(), port.parse().ok()?)),
        None => Some((authority.to_string(), default_port?)),
    }
}

async fn read_head(client: &mut TcpStream) -> std::io::Result<(Vec<u8>, usize)> {
    let mut buf = Vec::with_capacity(2048);
    let read = async {
        loop {
            if let Some(end) = memchr::memmem::find(&buf, b"\r\n\r\n") {
                return Ok(end + 4);
            }
            if buf.len() >= MAX_HEAD {
                return Err(std::io::Error::other("request head too large"));
            }
            let mut chunk = [0u8; 4096];
            let n = client.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    let end = tokio::time::timeout(HANDSHAKE_TIMEOUT, read)
        .await
        .map_err(|_| std::io::Error::other("no request head in time"))??;
    Ok((buf, end))
}

async fn answer(client: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\nX-Acp-Bash-Proxy: blocked\r\n\r\n{body}\n",
        body.len() + 1
    );
    client.write_all(reply.as_bytes()).await?;
    client.shutdown().await
}

async fn http(mut client: TcpStream, state: &Listener) -> std::io::Result<()> {
    let (buf, end) = read_head(&mut client).await?;
    let Some(head) = parse_head(&buf[..end]) else {
        return answer(
            &mut client,
            "400 Bad Request",
            "acp-bash proxy: not an HTTP request",
        )
        .await;
    };
    if head.method.eq_ignore_ascii_case("CONNECT") {
        let Some((host, port)) = split_authority(&head.target, None) else {
            return answer(
                &mut client,
                "400 Bad Request",
                "acp-bash proxy: CONNECT needs HOST:PORT",
            )
            .await;
        };
        let upstream = match connect(state, &host, port).await {
            Ok(upstream) => upstream,
            Err((status, why)) => return answer(&mut client, status, &why).await,
        };
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
        return checked_tunnel(client, upstream, &buf[end..], (&host, port), state).await;
    }
    // A plain-HTTP forward: `GET http://host[:port]/path HTTP/1.1`.
    let Some(rest) = head.target.strip_prefix("http://") else {
        let why = if head.target.starts_with("https://") {
            "acp-bash proxy: an https:// URL goes through CONNECT, not a plain request"
        } else {
            "acp-bash proxy: this is a proxy; send an absolute http:// URL or CONNECT"
        };
        return answer(&mut client, "400 Bad Request", why).await;
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let Some((host, port)) = split_authority(authority, Some(80)) else {
        return answer(
            &mut client,
            "400 Bad Request",
            "acp-bash proxy: bad host in the URL",
        )
        .await;
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    // The Host header must name the host the request goes to: a server behind an allowed
    // name must not be asked for another (virtual) host.
    for (name, value) in &head.headers {
        if name.eq_ignore_ascii_case("host") {
            let named = split_authority(value, Some(port)).map(|(h, _)| h);
            let same = named
                .and_then(|h| super::rules::normalize(&h))
                .zip(super::rules::normalize(&host))
                .is_some_and(|(a, b)| a == b);
            if !same {
                let why = format!(
                    "acp-bash blocked a request whose Host header ({value}) is not the host it \
                     goes to ({host})"
                );
                state.record(value, port, &why);
                return answer(&mut client, "403 Forbidden", &why).await;
            }
        }
    }
    let mut upstream = match connect(state, &host, port).await {
        Ok(upstream) => upstream,
        Err((status, why)) => return answer(&mut client, status, &why).await,
    };
    let mut out = format!("{} {} {}\r\n", head.method, path, head.version);
    let mut has_host = false;
    for (name, value) in &head.headers {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("proxy-") || lower == "connection" || lower == "keep-alive" {
            continue;
        }
        has_host |= lower == "host";
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if !has_host {
        out.push_str(&format!("Host: {authority}\r\n"));
    }
    // One request per connection: the next one on this connection could name another host.
    out.push_str("Connection: close\r\n\r\n");
    upstream.write_all(out.as_bytes()).await?;
    tunnel(client, upstream, &buf[end..]).await
}

/// Checks `host:port` and connects to it: `Err((HTTP status, text))` when refused or
/// unreachable (refusals are recorded).
async fn connect(
    state: &Listener,
    host: &str,
    port: u16,
) -> Result<TcpStream, (&'static str, String)> {
    let addrs = match state.rules.decide_granted(host, port, &state.grants).await {
        Decision::Connect(addrs) => addrs,
        Decision::Refuse(why) => {
            state.record(host, port, &why);
            return Err(("403 Forbidden", why));
        }
    };
    let mut last = None;
    for addr in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(error)) => last = Some(error.to_string()),
            Err(_) => last = Some("timed out".into()),
        }
    }
    Err((
        "502 Bad Gateway",
        format!(
            "acp-bash proxy: {host}:{port} is allowed but did not answer: {}",
            last.unwrap_or_default()
        ),
    ))
}

async fn tunnel(
    mut client: TcpStream,
    mut upstream: TcpStream,
    early: &[u8],
) -> std::io::Result<()> {
    if !early.is_empty() {
        upstream.write_all(early).await?;
    }
    copy_both(&mut client, &mut upstream).await
}

/// A tunnel to `target` (already checked and connected): its client's first flight is read
/// before anything reaches the host, and a TLS ClientHello that names another server (SNI ≠
/// the CONNECT target: fronting a disallowed name through an allowed host's server) ends the
/// tunnel, recorded as a block. A host that speaks first (the client sends nothing before it)
/// and anything that is not TLS pass as they are.
async fn checked_tunnel(
    mut client: TcpStream,
    upstream: TcpStream,
    early: &[u8],
    (host, port): (&str, u16),
    state: &Listener,
) -> std::io::Result<()> {
    let mut first = early.to_vec();
    loop {
        let why = match super::tls::client_hello(&first) {
            Hello::Incomplete => None,
            Hello::NotTls | Hello::ServerName(None) => break,
            Hello::ServerName(Some(name)) => {
                let same = super::rules::normalize(&name)
                    .zip(super::rules::normalize(host))
                    .is_some_and(|(a, b)| a == b);
                if same {
                    break;
                }
                let why = format!(
                    "acp-bash blocked {name}: a TLS handshake named it (SNI) inside a tunnel to \
                     {host}:{port}, which reaches {host} only. To reach {name}, connect to it \
                     itself (it must be on the network allowlist)"
                );
                Some((name, why))
            }
            Hello::Malformed => Some((
                host.to_string(),
                format!(
                    "acp-bash blocked a tunnel to {host}:{port}: its TLS handshake could not be \
                     read, so the server name it asks for is unknown"
                ),
            )),
        };
        if let Some((blocked, why)) = why {
            state.record(&blocked, port, &why);
            return Ok(());
        }
        if first.is_empty() {
            // Nothing yet: the client speaks first (TLS), or the host does.
            tokio::select! {
                ready = client.readable() => ready?,
                ready = upstream.readable() => { ready?; break }
            }
        }
        if first.len() >= super::tls::MAX_CLIENT_HELLO + 64 {
            state.record(
                host,
                port,
                "acp-bash blocked a tunnel: its TLS ClientHello is too long",
            );
            return Ok(());
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(HANDSHAKE_TIMEOUT, client.read(&mut chunk))
            .await
            .map_err(|_| std::io::Error::other("no TLS handshake in time"))??;
        if n == 0 {
            break;
        }
        first.extend_from_slice(&chunk[..n]);
    }
    tunnel(client, upstream, &first).await
}

/// The tunnel's bytes, both ways: moved by the kernel on Linux (`splice.rs`), copied through
/// buffers elsewhere.
#[cfg(target_os = "linux")]
async fn copy_both(a: &mut TcpStream, b: &mut TcpStream) -> std::io::Result<()> {
    super::splice::copy_both(a, b).await
}

#[cfg(not(target_os = "linux"))]
async fn copy_both(a: &mut TcpStream, b: &mut TcpStream) -> std::io::Result<()> {
    tokio::io::copy_bidirectional_with_sizes(a, b, COPY_BUFFER, COPY_BUFFER)
        .await
        .map(|_| ())
}

async fn socks5(mut client: TcpStream, state: &Listener) -> std::io::Result<()> {
    let handshake = async {
        let mut greeting = [0u8; 2];
        client.read_exact(&mut greeting).await?;
        let mut methods = vec![0u8; greeting[1] as usize];
        client.read_exact(&mut methods).await?;
        if !methods.contains(&0) {
            client.write_all(&[5, 0xff]).await?;
            return Ok(None);
        }
        client.write_all(&[5, 0]).await?;
        let mut request = [0u8; 4];
        client.read_exact(&mut request).await?;
        let host = match request[3] {
            1 => {
                let mut ip = [0u8; 4];
                client.read_exact(&mut ip).await?;
                std::net::Ipv4Addr::from(ip).to_string()
            }
            4 => {
                let mut ip = [0u8; 16];
                client.read_exact(&mut ip).await?;
                std::net::Ipv6Addr::from(ip).to_string()
            }
            3 => {
                let mut len = [0u8; 1];
                client.read_exact(&mut len).await?;
                let mut name = vec![0u8; len[0] as usize];
                client.read_exact(&mut name).await?;
                String::from_utf8_lossy(&name).into_owned()
            }
            _ => {
                client.write_all(&reply(8)).await?;
                return Ok(None);
            }
        };
        let mut port = [0u8; 2];
        client.read_exact(&mut port).await?;
        Ok::<_, std::io::Error>(Some((request[1], host, u16::from_be_bytes(port))))
    };
    let Some((command, host, port)) =
        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
            .await
            .map_err(|_| std::io::Error::other("no SOCKS5 handshake in time"))??
    else {
        return Ok(());
    };
    if command != 1 {
        // BIND and UDP ASSOCIATE: commands get TCP streams to allowed hosts only.
        let why =
            format!("acp-bash proxy: only SOCKS5 CONNECT is served (asked for {host}:{port})");
        state.record(&host, port, &why);
        return client.write_all(&reply(7)).await;
    }
    let upstream = match connect(state, &host, port).await {
        Ok(upstream) => upstream,
        // 2: connection not allowed by ruleset; 4: host unreachable.
        Err(("403 Forbidden", _)) => return client.write_all(&reply(2)).await,
        Err(_) => return client.write_all(&reply(4)).await,
    };
    client.write_all(&reply(0)).await?;
    checked_tunnel(client, upstream, &[], (&host, port), state).await
}

fn reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}
