//! What the user adds to every model request: headers (`--header NAME=VALUE`) and body fields
//! (`--extra-body JSON`), for gateways that want their own header and servers that want their
//! own field (Ollama's `options.num_ctx`, vLLM's `top_k`, OpenRouter's `provider`).
//!
//! Owns [`Extras`]: the parsing (with errors that say what to write), the merge of the extra
//! body into the request's (objects merged key by key, anything else replaced: the user's
//! value wins), and a `Debug` that never shows a header's value (it may be a token). Must not
//! touch: HTTP, the loop.

use std::fmt;

use serde_json::{Map, Value};

/// Headers and body fields added to every request of one model.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Extras {
    /// The headers, in order (a name given twice is sent twice).
    pub headers: Vec<(String, String)>,
    /// The fields merged into the body ([`Extras::merge_into`]).
    pub body: Map<String, Value>,
}

impl fmt::Debug for Extras {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Extras")
            .field("headers", &names)
            .field("body", &self.body.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The fields `--extra-body` may not set: the request's own, which acp-bash builds (the
/// conversation, the tools, the stream).
const OWN_FIELDS: [&str; 5] = ["messages", "tools", "stream", "model", "system"];

/// The headers `--header` may not set: the key's and the protocol's.
const OWN_HEADERS: [&str; 5] = [
    "authorization",
    "x-api-key",
    "content-type",
    "accept",
    "content-length",
];

impl Extras {
    /// Whether there is nothing to add.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty() && self.body.is_empty()
    }

    /// Reads `NAME=VALUE` (also `NAME: VALUE`) into a header.
    pub fn parse_header(spec: &str) -> Result<(String, String), String> {
        // Split at the first `=` or `:` (a value may hold either: a URL, `a=b`).
        let (name, value) = spec
            .find(['=', ':'])
            .map(|at| (&spec[..at], &spec[at + 1..]))
            .ok_or_else(|| {
                "write the header as NAME=VALUE, e.g. --header 'HTTP-Referer=https://example.com'"
                    .to_string()
            })?;
        let (name, value) = (name.trim(), value.trim());
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(token) {
            return Err(format!(
                "{name:?} is not a header name (letters, digits and -_. only): write \
                 NAME=VALUE"
            ));
        }
        if OWN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "{name} is set by acp-bash itself (the key goes in the variable --api-key-env \
                 names); choose another header"
            ));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(format!("the value of {name} holds a control character"));
        }
        Ok((name.to_string(), value.to_string()))
    }

    /// Reads `--extra-body`'s JSON: an object whose fields are added to every request.
    pub fn parse_body(json: &str) -> Result<Map<String, Value>, String> {
        let value: Value = serde_json::from_str(json).map_err(|error| {
            format!(
                "--extra-body is not JSON ({error}): write an object, e.g. \
                 --extra-body '{{\"options\":{{\"num_ctx\":32768}}}}'"
            )
        })?;
        let Value::Object(fields) = value else {
            return Err(
                "--extra-body must be a JSON object, e.g. '{\"top_k\":20}': its fields are \
                 added to each request's body"
                    .to_string(),
            );
        };
        if let Some(own) = OWN_FIELDS.iter().find(|f| fields.contains_key(**f)) {
            return Err(format!(
                "--extra-body may not set {own:?}: acp-bash builds it (use --model for the \
                 model)"
            ));
        }
        Ok(fields)
    }

    /// Merges the extra fields into `body`: an object into an object key by key (so
    /// `{"options":{"num_ctx":32768}}` keeps the body's other options), anything else replaces
    /// the body's value.
    pub fn merge_into(&self, body: &mut Value) {
        fn merge(into: &mut Value, from: &Value) {
            match (into, from) {
                (Value::Object(into), Value::Object(from)) => {
                    for (key, value) in from {
                        match into.get_mut(key) {
                            Some(slot) => merge(slot, value),
                            None => {
                                into.insert(key.clone(), value.clone());
                            }
                        }
                    }
                }
                (into, from) => *into = from.clone(),
            }
        }
        if !self.body.is_empty() {
            merge(body, &Value::Object(self.body.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Extras;
    use serde_json::json;

    #[test]
    fn headers_and_bodies_are_read_with_errors_that_say_what_to_write() {
        assert_eq!(
            Extras::parse_header("X-Title=acp bash").unwrap(),
            ("X-Title".into(), "acp bash".into())
        );
        assert_eq!(
            Extras::parse_header("HTTP-Referer: https://a.example/x=1").unwrap(),
            ("HTTP-Referer".into(), "https://a.example/x=1".into())
        );
        assert!(Extras::parse_header("novalue")
            .unwrap_err()
            .contains("NAME=VALUE"));
        assert!(Extras::parse_header("Authorization=Bearer x")
            .unwrap_err()
            .contains("--api-key-env"));
        assert!(Extras::parse_header("a b=c").is_err());
        assert!(Extras::parse_body("[1]").unwrap_err().contains("object"));
        assert!(Extras::parse_body("{").unwrap_err().contains("not JSON"));
        assert!(Extras::parse_body(r#"{"messages":[]}"#).is_err());
    }

    #[test]
    fn the_extra_body_merges_objects_and_replaces_the_rest() {
        let extras = Extras {
            headers: vec![("X-Secret".into(), "tok3n".into())],
            body: Extras::parse_body(r#"{"options":{"num_ctx":32768},"top_k":20,"n":{"a":1}}"#)
                .unwrap(),
        };
        let mut body = json!({"model":"m","options":{"seed":1},"n":1});
        extras.merge_into(&mut body);
        assert_eq!(
            body,
            json!({"model":"m","options":{"seed":1,"num_ctx":32768},"top_k":20,"n":{"a":1}})
        );
        assert!(!format!("{extras:?}").contains("tok3n"));
    }
}
