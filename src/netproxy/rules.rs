//! Which hosts commands may reach through the proxy: the allowlist, the denylist (deny wins),
//! the test and mirror mappings, and the refusal of the host's own private addresses.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

/// The package registries a build needs, allowed by default: crates.io, PyPI, npm, the Go
/// module proxy and sum database, Maven Central, RubyGems, and the GitHub hosts that
/// `git clone` and release downloads use.
pub const DEFAULT_HOSTS: &[&str] = &[
    "crates.io",
    "static.crates.io",
    "index.crates.io",
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "proxy.golang.org",
    "sum.golang.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "rubygems.org",
    "github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "raw.githubusercontent.com",
    "release-assets.githubusercontent.com",
];

/// One entry of a list: a host name (`example.com`), every subdomain of one (`*.example.com`,
/// which does not match `example.com` itself), or an IP address.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostPattern {
    /// Exactly this host (lowercase, without a trailing dot) or IP address (canonical text).
    Exact(String),
    /// Any host ending in `.` + this suffix.
    Subdomains(String),
}

impl HostPattern {
    /// Parses `*.example.com`, `example.com` or an IP address; an error says what is wrong.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let text = text.trim();
        if let Some(suffix) = text.strip_prefix("*.") {
            let suffix = normalize(suffix)
                .ok_or_else(|| format!("`{text}` is not a host pattern (`*.example.com`)"))?;
            return Ok(HostPattern::Subdomains(suffix));
        }
        normalize(text).map(HostPattern::Exact).ok_or_else(|| {
            format!(
                "`{text}` is not a host name, `*.domain` or IP address (give the name only: \
                     no scheme, port or path)"
            )
        })
    }

    /// Whether `host` (normalized) matches.
    fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(name) => name == host,
            HostPattern::Subdomains(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostPattern::Exact(name) => f.write_str(name),
            HostPattern::Subdomains(suffix) => write!(f, "*.{suffix}"),
        }
    }
}

/// `host` lowercased without a trailing dot or IPv6 brackets (`None`: not a host name or IP).
pub(crate) fn normalize(host: &str) -> Option<String> {
    let host = host.trim_end_matches('.');
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(ip.to_string());
    }
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    ok.then(|| host.to_ascii_lowercase())
}

/// Whether `ip` belongs to the host or its private networks: loopback, RFC 1918, link-local,
/// CGNAT, unique-local, unspecified, multicast, and IPv4-mapped forms of these. A name that
/// resolves to one is refused unless mapped (`--map-host`) or the address itself is allowed.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// What the proxy decided for a target.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Connect to these addresses (in order; the first that answers).
    Connect(Vec<SocketAddr>),
    /// Refused: why, in words that end with how to allow it where that is possible.
    Refuse(String),
}

/// The allowlist and its companions; built once from the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rules {
    allow: Vec<HostPattern>,
    deny: Vec<HostPattern>,
    map: HashMap<String, SocketAddr>,
    /// Mapped names that are not allowed by their mapping (`--map-unlisted-host`).
    unlisted: Vec<String>,
}

/// Hosts allowed beyond the [`Rules`] while the agent runs: what the user allowed when asked
/// (for one command, or for the session). Shared: the proxy reads it at each connection. A
/// denied host stays denied.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Grants(std::sync::Arc<std::sync::RwLock<Vec<HostPattern>>>);

impl Grants {
    /// Also allows `pattern` (until [`Grants::remove`]).
    pub fn add(&self, pattern: HostPattern) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(pattern);
    }

    /// Takes back one grant of `pattern` (made by [`Grants::add`]).
    pub fn remove(&self, pattern: &HostPattern) {
        let mut list = self.0.write().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = list.iter().position(|p| p == pattern) {
            list.remove(at);
        }
    }

    /// The grants, in the order they were made (one per [`Grants::add`]).
    pub fn list(&self) -> Vec<HostPattern> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether a grant matches `host`.
    pub fn allows(&self, host: &str) -> bool {
        let Some(host) = normalize(host) else {
            return false;
        };
        let list = self.0.read().unwrap_or_else(|e| e.into_inner());
        list.iter().any(|p| p.matches(&host))
    }
}

impl Default for Rules {
    /// [`DEFAULT_HOSTS`], nothing denied, nothing mapped.
    fn default() -> Self {
        Rules {
            allow: DEFAULT_HOSTS
                .iter()
                .map(|h| HostPattern::Exact(h.to_string()))
                .collect(),
            deny: Vec::new(),
            map: HashMap::new(),
            unlisted: Vec::new(),
        }
    }
}

impl Rules {
    /// No host allowed at all (the defaults left out: `--no-default-hosts`).
    pub fn empty() -> Rules {
        Rules {
            allow: Vec::new(),
            deny: Vec::new(),
            map: HashMap::new(),
            unlisted: Vec::new(),
        }
    }

    /// Also allows `pattern` (`--allow-host`).
    pub fn allow(mut self, pattern: HostPattern) -> Self {
        self.allow.push(pattern);
        self
    }

    /// Refuses `pattern` even where an allow entry matches (`--deny-host`).
    pub fn deny(mut self, pattern: HostPattern) -> Self {
        self.deny.push(pattern);
        self
    }

    /// Sends connections for `host` (any port) to `to` instead of resolving it, and allows it
    /// unless denied (`--map-host NAME=IP:PORT`: for tests against a loopback server and for a
    /// registry mirror; the mapped address may be private or loopback).
    pub fn map(mut self, host: &str, to: SocketAddr) -> Result<Self, String> {
        let host = normalize(host).ok_or_else(|| format!("`{host}` is not a host name"))?;
        self.map.insert(host, to);
        Ok(self)
    }

    /// Like [`Rules::map`], without allowing `host`: it is still refused (and asked about)
    /// until allowed (`--map-unlisted-host`: for tests of permission requests).
    pub fn map_unlisted(mut self, host: &str, to: SocketAddr) -> Result<Self, String> {
        self = self.map(host, to)?;
        self.unlisted.extend(normalize(host));
        Ok(self)
    }

    /// Whether `host` is refused only because no entry allows it (not denied, not malformed):
    /// what the user may be asked to allow.
    pub fn only_unlisted(&self, host: &str) -> bool {
        let Some(host) = normalize(host) else {
            return false;
        };
        !self.deny.iter().any(|p| p.matches(&host)) && self.check(&host).is_err()
    }

    /// Parses `NAME=IP:PORT` for [`Rules::map`].
    pub fn parse_map(text: &str) -> Result<(String, SocketAddr), String> {
        let (name, to) = text.split_once('=').ok_or_else(|| {
            format!("`{text}` is not NAME=IP:PORT (e.g. crates.io=127.0.0.1:8080)")
        })?;
        let to = to
            .parse::<SocketAddr>()
            .map_err(|_| format!("`{to}` in `{text}` is not IP:PORT (e.g. 127.0.0.1:8080)"))?;
        Ok((name.to_string(), to))
    }

    /// The allowed patterns, in order.
    pub fn allowed(&self) -> &[HostPattern] {
        &self.allow
    }

    /// The denied patterns, in order.
    pub fn denied(&self) -> &[HostPattern] {
        &self.deny
    }

    /// The mapped hosts, sorted.
    pub fn mapped(&self) -> Vec<(String, SocketAddr)> {
        let mut all: Vec<_> = self.map.iter().map(|(h, a)| (h.clone(), *a)).collect();
        all.sort();
        all
    }

    /// Whether `host` may be reached before any resolution (`Err`: why not and how to allow it).
    pub fn check(&self, host: &str) -> Result<(), String> {
        self.check_granted(host, &Grants::default())
    }

    /// [`Rules::check`], with `grants` allowing more hosts (never a denied one).
    pub fn check_granted(&self, host: &str, grants: &Grants) -> Result<(), String> {
        let Some(host) = normalize(host) else {
            return Err(format!("`{host}` is not a host name"));
        };
        if let Some(deny) = self.deny.iter().find(|p| p.matches(&host)) {
            return Err(format!(
                "acp-bash blocked {host}: it is denied (--deny-host {deny}); remove that option \
                 to reach it"
            ));
        }
        let mapped = self.map.contains_key(&host) && !self.unlisted.contains(&host);
        if mapped || self.allow.iter().any(|p| p.matches(&host)) || grants.allows(&host) {
            return Ok(());
        }
        Err(format!(
            "acp-bash blocked {host}: it is not on the network allowlist. To allow it, start \
             acp-bash with --allow-host {host} (or --network full for an unfiltered network)"
        ))
    }

    /// Decides for `host:port` and, when allowed, where to connect: the mapping, the IP
    /// literal itself, or the resolved addresses that are not the host's private ones.
    pub async fn decide(&self, host: &str, port: u16) -> Decision {
        self.decide_granted(host, port, &Grants::default()).await
    }

    /// [`Rules::decide`], with `grants` allowing more hosts.
    pub async fn decide_granted(&self, host: &str, port: u16, grants: &Grants) -> Decision {
        if let Err(why) = self.check_granted(host, grants) {
            return Decision::Refuse(why);
        }
        let name = normalize(host).unwrap_or_default();
        if let Some(to) = self.map.get(&name) {
            return Decision::Connect(vec![*to]);
        }
        if let Ok(ip) = name.parse::<IpAddr>() {
            // Allowed by name: an IP literal was listed explicitly.
            return Decision::Connect(vec![SocketAddr::new(ip, port)]);
        }
        let resolved: Vec<SocketAddr> = match tokio::net::lookup_host((name.as_str(), port)).await {
            Ok(addrs) => addrs.collect(),
            Err(error) => return Decision::Refuse(format!("{name} does not resolve: {error}")),
        };
        let public: Vec<SocketAddr> = resolved
            .iter()
            .copied()
            .filter(|a| !is_private(a.ip()))
            .collect();
        if public.is_empty() {
            let first = resolved
                .first()
                .map(|a| a.ip().to_string())
                .unwrap_or_default();
            return Decision::Refuse(format!(
                "acp-bash blocked {name}: it resolves to {first}, a private or loopback address \
                 of this host, which commands do not reach through the proxy. To reach a mirror \
                 there, start acp-bash with --map-host {name}=IP:PORT"
            ));
        }
        Decision::Connect(public)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_subdomains_only_and_deny_wins() {
        let rules = Rules::empty()
            .allow(HostPattern::parse("*.example.com").unwrap())
            .allow(HostPattern::parse("Exact.ORG.").unwrap())
            .deny(HostPattern::parse("bad.example.com").unwrap());
        assert!(rules.check("a.example.com").is_ok());
        assert!(rules.check("x.y.example.com").is_ok());
        assert!(rules.check("example.com").is_err());
        assert!(rules.check("evilexample.com").is_err());
        assert!(rules.check("exact.org").is_ok());
        assert!(rules.check("sub.exact.org").is_err());
        let denied = rules.check("BAD.example.com").unwrap_err();
        assert!(denied.contains("--deny-host bad.example.com"), "{denied}");
        let blocked = rules.check("other.net").unwrap_err();
        assert!(blocked.contains("--allow-host other.net"), "{blocked}");
    }

    #[test]
    fn bad_patterns_say_what_to_give() {
        for bad in ["https://x.org", "x.org:443", "", "*.", "a/b"] {
            assert!(HostPattern::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            HostPattern::parse("[::1]").unwrap(),
            HostPattern::Exact("::1".into())
        );
        assert!(Rules::parse_map("x=1.2.3.4").is_err());
        assert!(Rules::parse_map("x=127.0.0.1:80").is_ok());
    }

    #[test]
    fn private_addresses_are_recognized() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["1.1.1.1", "140.82.112.3", "2606:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn ip_literals_need_an_explicit_entry_and_names_of_the_host_are_refused() {
        let rules = Rules::default();
        assert!(matches!(
            rules.decide("1.1.1.1", 443).await,
            Decision::Refuse(_)
        ));
        assert!(matches!(
            rules.decide("127.0.0.1", 80).await,
            Decision::Refuse(_)
        ));
        let rules = Rules::empty().allow(HostPattern::parse("localhost").unwrap());
        match rules.decide("localhost", 80).await {
            Decision::Refuse(why) => assert!(why.contains("private or loopback"), "{why}"),
            other => panic!("{other:?}"),
        }
        let rules = Rules::empty().allow(HostPattern::parse("9.9.9.9").unwrap());
        assert_eq!(
            rules.decide("9.9.9.9", 53).await,
            Decision::Connect(vec!["9.9.9.9:53".parse().unwrap()])
        );
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let rules = Rules::empty().map("mirror.test", to).unwrap();
        assert_eq!(
            rules.decide("MIRROR.test", 443).await,
            Decision::Connect(vec![to])
        );
    }
}
