//! A JSON-RPC message's envelope (its top-level `id` and whether it has a `method` or an
//! `error`), read from the raw bytes of a line without parsing or even decoding the rest.
//!
//! Owns: answering a line that is discarded (too long, not UTF-8, not JSON) with the request's own
//! id, so that the client's pending request gets its error instead of hanging; spotting an
//! `initialize` request and its response; spotting error responses. Must not touch: anything
//! inside `params` or `result`.

use serde_json::Value;

/// What the top level of a JSON object says about the message, as far as the bytes go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Envelope {
    /// The `id`, when it is a number, a string or null (what JSON-RPC allows).
    pub id: Option<Value>,
    /// The `method`, when it is a string without escapes.
    pub method: Option<String>,
    /// Whether there is an `error` member.
    pub has_error: bool,
    /// Whether the whole object was read (else the bytes were cut or malformed first).
    pub complete: bool,
}

impl Envelope {
    /// Reads the top-level members of the JSON object at the start of `bytes` until the bytes
    /// end or stop being JSON. Anything it cannot read is simply left out.
    pub fn read(bytes: &[u8]) -> Envelope {
        let mut envelope = Envelope::default();
        let mut scan = Scanner { bytes, at: 0 };
        scan.whitespace();
        if !scan.eat(b'{') {
            return envelope;
        }
        loop {
            scan.whitespace();
            if scan.eat(b'}') {
                envelope.complete = true;
                return envelope;
            }
            let Some(key) = scan.string() else {
                return envelope;
            };
            scan.whitespace();
            if !scan.eat(b':') {
                return envelope;
            }
            scan.whitespace();
            let Some(value) = scan.value() else {
                return envelope;
            };
            match key {
                // The first one counts: a later duplicate cannot change what a prefix said.
                b"id" if envelope.id.is_none() => envelope.id = scalar(value),
                b"method" if envelope.method.is_none() => {
                    envelope.method = match scalar(value) {
                        Some(Value::String(method)) => Some(method),
                        _ => None,
                    }
                }
                b"error" => envelope.has_error = true,
                _ => {}
            }
            scan.whitespace();
            if scan.eat(b',') {
                continue;
            }
            if scan.eat(b'}') {
                envelope.complete = true;
            }
            return envelope;
        }
    }

    /// Whether this is a response (no `method`) to the request `id`.
    pub fn answers(&self, id: &Value) -> bool {
        self.method.is_none() && self.id.as_ref() == Some(id)
    }
}

/// Whether the object at the start of `bytes` has a top-level `method`, reading no further than
/// that member (the SDK writes `method` before `params`, so a large notification is not scanned).
pub fn has_method(bytes: &[u8]) -> bool {
    method(bytes).is_some()
}

/// Whether the object at the start of `bytes` is a `session/update` notification, reading no
/// further than its `method` (counted against the connection's updates in flight,
/// [`super::ClientBehind`]).
pub fn is_session_update(bytes: &[u8]) -> bool {
    method(bytes).is_some_and(|raw| raw == b"\"session/update\"")
}

/// The raw value of the object's top-level `method` (as it is written, quotes included; empty
/// when the member is cut off), reading no further than that member.
fn method(bytes: &[u8]) -> Option<&[u8]> {
    let mut scan = Scanner { bytes, at: 0 };
    scan.whitespace();
    if !scan.eat(b'{') {
        return None;
    }
    loop {
        scan.whitespace();
        let key = scan.string()?;
        scan.whitespace();
        let colon = scan.eat(b':');
        if key == b"method" {
            scan.whitespace();
            return Some(if colon {
                scan.value().unwrap_or_default()
            } else {
                &[]
            });
        }
        if !colon {
            return None;
        }
        scan.whitespace();
        scan.value()?;
        scan.whitespace();
        if !scan.eat(b',') {
            return None;
        }
    }
}

/// A number, a string or null, parsed by serde_json (so exactly as the SDK would read it).
fn scalar(raw: &[u8]) -> Option<Value> {
    match raw.first()? {
        b'"' | b'-' | b'0'..=b'9' | b'n' => {
            let value: Value = serde_json::from_slice(raw).ok()?;
            (value.is_string() || value.is_number() || value.is_null()).then_some(value)
        }
        _ => None,
    }
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// A string's raw contents (escapes left as they are), after its closing quote.
    fn string(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        self.skip_string()?;
        Some(&self.bytes[start + 1..self.at - 1])
    }

    fn skip_string(&mut self) -> Option<()> {
        if !self.eat(b'"') {
            return None;
        }
        loop {
            let rest = self.bytes.get(self.at..)?;
            self.at += memchr::memchr2(b'"', b'\\', rest)?;
            match self.bytes[self.at] {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                _ => self.at += 2,
            }
        }
    }

    /// One value's raw bytes (quotes included for a string), after it.
    fn value(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        match self.peek()? {
            b'"' => self.skip_string()?,
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.skip_string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.at += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    self.at += 1;
                }
            }
            _ => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.at += 1;
                }
                if self.at == start || self.peek().is_none() {
                    // Empty, or cut off where it might have gone on (`12` of `123`).
                    return None;
                }
            }
        }
        Some(&self.bytes[start..self.at])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn reads_the_id_and_method_of_a_request() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"id":99,"x":[1,{"y":"}"}]}}"#;
        let envelope = Envelope::read(line);
        assert_eq!(envelope.id, Some(json!(7)));
        assert_eq!(envelope.method.as_deref(), Some("session/prompt"));
        assert!(envelope.complete && !envelope.has_error);
    }

    #[test]
    fn reads_the_id_before_a_cut_or_broken_rest() {
        let line = b"{\"id\": \"a\\\"b\", \"method\":\"session/prompt\", \"params\": {\"prompt\": \"caf\xe9";
        let envelope = Envelope::read(line);
        assert_eq!(envelope.id, Some(json!("a\"b")));
        assert!(!envelope.complete);
    }

    #[test]
    fn a_number_cut_at_the_end_is_not_guessed() {
        assert_eq!(Envelope::read(br#"{"id":12"#).id, None);
        assert_eq!(Envelope::read(br#"{"id":{"x":1},"method":"m"}"#).id, None);
    }

    #[test]
    fn an_error_response_is_recognised() {
        let envelope = Envelope::read(br#"{"jsonrpc":"2.0","id":"x","error":{"code":-32602}}"#);
        assert!(envelope.has_error && envelope.answers(&json!("x")));
        assert!(!envelope.answers(&json!("y")));
    }

    proptest::proptest! {
        /// Whatever else an object holds, in any order, the id and method read from its bytes
        /// are the ones serde_json reads from the whole object.
        #[test]
        fn agrees_with_serde_on_whole_objects(
            id in proptest::prop_oneof![
                any::<i64>().prop_map(Value::from),
                any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
                ".{0,12}".prop_map(Value::from),
                Just(Value::Null),
            ],
            method in proptest::option::of("[a-z/_]{1,12}"),
            others in proptest::collection::vec(("[a-z\"\\\\{}]{0,6}", ".{0,16}"), 0..5),
            nested in proptest::option::of(".{0,20}"),
        ) {
            let mut object = serde_json::Map::new();
            for (key, value) in others {
                object.insert(key, Value::from(value));
            }
            if let Some(nested) = nested {
                object.insert("params".into(), json!({"id": nested, "list": [nested, {"method": 1}]}));
            }
            object.insert("id".into(), id.clone());
            if let Some(method) = &method {
                object.insert("method".into(), Value::from(method.clone()));
            }
            let line = serde_json::to_string(&Value::Object(object)).unwrap();
            let envelope = Envelope::read(line.as_bytes());
            let parsed: Value = serde_json::from_str(&line).unwrap();
            proptest::prop_assert_eq!(envelope.id, Some(parsed["id"].clone()));
            proptest::prop_assert_eq!(envelope.method, method);
            proptest::prop_assert!(envelope.complete);
        }

        /// Arbitrary bytes never panic, and a prefix never invents an id the whole does not have.
        #[test]
        fn arbitrary_bytes_and_prefixes_are_safe(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            cut in 0usize..200,
        ) {
            let whole = Envelope::read(&bytes);
            let prefix = Envelope::read(&bytes[..cut.min(bytes.len())]);
            if prefix.id.is_some() {
                proptest::prop_assert_eq!(prefix.id, whole.id);
            }
        }
    }
}
