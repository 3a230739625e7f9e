//! The network allowlist: a proxy the agent runs for commands, reached from inside their
//! network namespace (which has only a loopback), that connects only to listed hosts.
//!
//! Owns: the host rules ([`Rules`]: the default package registries, `--allow-host`,
//! `--deny-host`, `--map-host`), the proxy protocols (HTTP CONNECT, plain-HTTP forward,
//! SOCKS5 CONNECT with the name resolved by the proxy), the per-listener bound on connections
//! and the record of what was refused ([`Serving::take_blocks`]). Must not touch: namespaces
//! (the sandbox makes the listening socket inside a command's namespace and hands it here),
//! the environment (the engine sets the proxy variables), ACP.
//!
//! Why tokio directly and not hyper: `notes/2026-12-06-network-allowlist.md`.

mod rules;
mod server;
#[cfg(target_os = "linux")]
mod splice;
mod tls;

pub use rules::{is_private, Decision, Grants, HostPattern, Rules, DEFAULT_HOSTS};
pub use server::{BlockRecord, Blocked, Proxy, Serving, DEFAULT_MAX_CONNECTIONS};

/// The port the proxy listens on inside each command's network namespace (its own loopback,
/// so the number never clashes with the host's).
pub const PROXY_PORT: u16 = 3128;

/// The environment a command gets so that its tools use the proxy on `port`: `HTTP_PROXY`,
/// `HTTPS_PROXY`, `ALL_PROXY` (socks5h: the proxy resolves names), `NO_PROXY` for the
/// loopback, each also in lowercase.
pub fn proxy_env(port: u16) -> Vec<(&'static str, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let no = "localhost,127.0.0.1,::1".to_string();
    vec![
        ("HTTP_PROXY", http.clone()),
        ("http_proxy", http.clone()),
        ("HTTPS_PROXY", http.clone()),
        ("https_proxy", http),
        ("ALL_PROXY", socks.clone()),
        ("all_proxy", socks),
        ("NO_PROXY", no.clone()),
        ("no_proxy", no),
    ]
}

/// A session's part of the proxy: the proxy, the runtime it runs on, what it refused for the
/// session's commands, and the listeners of commands that have their own namespace.
// The bridge is Linux's (a network namespace); elsewhere only the block record is read.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug)]
pub(crate) struct SessionNetwork {
    proxy: Proxy,
    runtime: tokio::runtime::Handle,
    record: BlockRecord,
    grants: Grants,
    per_command: std::sync::Mutex<Vec<(i32, Serving)>>,
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
impl SessionNetwork {
    /// A session's network through `proxy`, served on `runtime`.
    pub(crate) fn new(proxy: Proxy, runtime: tokio::runtime::Handle) -> SessionNetwork {
        let grants = Grants::default();
        SessionNetwork {
            proxy: proxy.granting(grants.clone()),
            runtime,
            record: BlockRecord::default(),
            grants,
            per_command: Default::default(),
        }
    }

    /// Serves `listener` (made inside a namespace of this session's) until the result drops.
    pub(crate) fn serve(&self, listener: std::net::TcpListener) -> std::io::Result<Serving> {
        self.proxy
            .serve_recording(listener, &self.runtime, self.record.clone())
    }

    /// [`SessionNetwork::serve`] for one command that may also reach `also` (an "allow once"
    /// host): its listener alone allows them, besides the session's grants as they are now.
    pub(crate) fn serve_also(
        &self,
        listener: std::net::TcpListener,
        also: &[HostPattern],
    ) -> std::io::Result<Serving> {
        if also.is_empty() {
            return self.serve(listener);
        }
        let grants = Grants::default();
        for pattern in self.grants.list().into_iter().chain(also.iter().cloned()) {
            grants.add(pattern);
        }
        self.proxy.clone().granting(grants).serve_recording(
            listener,
            &self.runtime,
            self.record.clone(),
        )
    }

    /// Keeps the listener of the command whose pid is `pid` until [`SessionNetwork::ended`].
    pub(crate) fn keep(&self, pid: i32, serving: Serving) {
        self.per_command
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((pid, serving));
    }

    /// The command `pid` ended: its own listener (if any) closes.
    pub(crate) fn ended(&self, pid: i32) {
        self.per_command
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(p, _)| *p != pid);
    }

    /// The hosts the user allowed for this session's commands (beyond the rules).
    pub(crate) fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The proxy's rules.
    pub(crate) fn rules(&self) -> &Rules {
        self.proxy.rules()
    }

    /// What the proxy refused for this session since the last call.
    pub(crate) fn take_blocks(&self) -> Vec<Blocked> {
        self.record.take()
    }
}
