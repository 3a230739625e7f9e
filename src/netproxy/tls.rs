//! The one thing the proxy reads inside a CONNECT tunnel: the server name (SNI) of a TLS
//! ClientHello, so that a tunnel opened to an allowed host cannot ask that host's server (a
//! CDN's front, say) for another name.

/// The most a ClientHello may take before the proxy gives up reading it (and refuses).
pub(crate) const MAX_CLIENT_HELLO: usize = 16 * 1024;

/// What the first bytes a client sent in a tunnel say.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hello {
    /// Not TLS (the first byte is not a handshake record): nothing to check.
    NotTls,
    /// A TLS handshake whose ClientHello is not complete yet: read more.
    Incomplete,
    /// A complete ClientHello, with the server name it asks for (`None`: it names none).
    ServerName(Option<String>),
    /// A TLS handshake record that is not a well-formed ClientHello.
    Malformed,
}

/// Reads `bytes`, the start of what a client sent: TLS records of type handshake (22) whose
/// payloads, joined, begin with a ClientHello (RFC 8446 §4.1.2; the same layout in TLS 1.0–1.2).
pub(crate) fn client_hello(bytes: &[u8]) -> Hello {
    if bytes.first().is_some_and(|&b| b != 22) {
        return Hello::NotTls;
    }
    // The handshake messages, from as many whole records as have come.
    let mut handshake = Vec::new();
    let mut rest = bytes;
    // Another record type after the handshake's (TLS 1.3's early data, say) ends it: what
    // came before must hold the whole ClientHello then.
    let mut ended = false;
    while rest.len() >= 5 {
        if rest[0] != 22 {
            ended = true;
            break;
        }
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if rest.len() < 5 + len {
            break;
        }
        handshake.extend_from_slice(&rest[5..5 + len]);
        rest = &rest[5 + len..];
    }
    let incomplete = if ended {
        Hello::Malformed
    } else {
        Hello::Incomplete
    };
    if handshake.len() < 4 {
        return incomplete;
    }
    if handshake[0] != 1 {
        return Hello::Malformed;
    }
    let len = usize::from(handshake[1]) << 16
        | usize::from(handshake[2]) << 8
        | usize::from(handshake[3]);
    if len > MAX_CLIENT_HELLO {
        return Hello::Malformed;
    }
    let Some(body) = handshake.get(4..4 + len) else {
        return incomplete;
    };
    match server_name(body) {
        Some(name) => Hello::ServerName(name),
        None => Hello::Malformed,
    }
}

/// The SNI of a ClientHello's body; `Some(None)` when it has no such extension, `None` when
/// the body does not parse.
fn server_name(body: &[u8]) -> Option<Option<String>> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // version, random
    let session = r.u8()?;
    r.take(usize::from(session))?;
    let suites = r.u16()?;
    r.take(usize::from(suites))?;
    let compression = r.u8()?;
    r.take(usize::from(compression))?;
    if r.0.is_empty() {
        return Some(None); // no extensions at all
    }
    let extensions = r.u16()?;
    let mut ext = Reader(r.take(usize::from(extensions))?);
    while !ext.0.is_empty() {
        let kind = ext.u16()?;
        let len = ext.u16()?;
        let data = ext.take(usize::from(len))?;
        if kind != 0 {
            continue;
        }
        let mut list = Reader(data);
        let list_len = list.u16()?;
        let mut names = Reader(list.take(usize::from(list_len))?);
        while !names.0.is_empty() {
            let name_type = names.u8()?;
            let name_len = names.u16()?;
            let name = names.take(usize::from(name_len))?;
            if name_type == 0 {
                return Some(Some(String::from_utf8_lossy(name).into_owned()));
            }
        }
        return Some(None);
    }
    Some(None)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ClientHello record naming `name` (or none), as a client would send it.
    fn hello(name: Option<&str>) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.push(0); // no session id
        body.extend_from_slice(&[0, 2, 0x13, 0x01]); // one suite
        body.extend_from_slice(&[1, 0]); // null compression
        let mut extensions = Vec::new();
        // An extension before SNI (supported_versions), to be skipped.
        extensions.extend_from_slice(&[0, 43, 0, 3, 2, 3, 4]);
        if let Some(name) = name {
            let n = name.len() as u16;
            extensions.extend_from_slice(&[0, 0]);
            extensions.extend_from_slice(&(n + 5).to_be_bytes());
            extensions.extend_from_slice(&(n + 3).to_be_bytes());
            extensions.push(0);
            extensions.extend_from_slice(&n.to_be_bytes());
            extensions.extend_from_slice(name.as_bytes());
        }
        body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
        body.extend_from_slice(&extensions);
        let mut handshake = vec![1, 0];
        handshake.extend_from_slice(&(body.len() as u16).to_be_bytes());
        handshake.extend_from_slice(&body);
        let mut record = vec![22, 3, 1];
        record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
        record.extend_from_slice(&handshake);
        record
    }

    #[test]
    fn the_server_name_of_a_client_hello_is_read_whole_or_asked_for_more() {
        let full = hello(Some("registry.test"));
        assert_eq!(
            client_hello(&full),
            Hello::ServerName(Some("registry.test".into()))
        );
        for cut in [1, 5, 9, full.len() - 1] {
            assert_eq!(client_hello(&full[..cut]), Hello::Incomplete, "{cut}");
        }
        assert_eq!(client_hello(&hello(None)), Hello::ServerName(None));
        // Early data after the ClientHello (TLS 1.3's 0-RTT) is fine; before it, not.
        let mut early = full.clone();
        early.extend_from_slice(&[23, 3, 3, 0, 1, 0]);
        assert_eq!(
            client_hello(&early),
            Hello::ServerName(Some("registry.test".into()))
        );
        assert_eq!(
            client_hello(&[22, 3, 1, 0, 1, 1, 23, 3, 3, 0, 0]),
            Hello::Malformed
        );
        assert_eq!(client_hello(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
        let mut bad = full.clone();
        bad[5] = 2; // a ServerHello, not a ClientHello
        assert_eq!(client_hello(&bad), Hello::Malformed);
    }

    #[test]
    fn a_client_hello_split_over_two_records_is_joined() {
        let full = hello(Some("a.example"));
        let payload = &full[5..];
        let (one, two) = payload.split_at(20);
        let mut split = vec![22, 3, 1];
        split.extend_from_slice(&(one.len() as u16).to_be_bytes());
        split.extend_from_slice(one);
        split.extend_from_slice(&[22, 3, 1]);
        split.extend_from_slice(&(two.len() as u16).to_be_bytes());
        split.extend_from_slice(two);
        assert_eq!(
            client_hello(&split),
            Hello::ServerName(Some("a.example".into()))
        );
    }
}
