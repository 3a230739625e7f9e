//! Checks ACP wire traffic against the ACP v1 JSON schema (vendored: `vendor/acp-schema.v1.json`).
//!
//! Owns: loading the schema, picking the `$defs` type a message must match (requests and
//! notifications by method, responses by the method of the request with the same id, errors
//! against `Error`), and saying precisely what is wrong when a message does not match. Must not
//! touch: the agent under test (it only reads lines), Zed's rendering (see `zed_replay`).
//!
//! The method → type table is read from the schema itself (each request, notification and
//! response def carries `x-method` and `x-side`), so a schema update brings its new methods along.
//! Zed-convention `_meta` keys are not in the schema; `_meta` is an open object there, so they
//! pass, and `zed_replay` checks what Zed does with them.
//!
//! The schema is vendored in the repository (`vendor/README.md` says where it comes from and how
//! to update it), so a clone of the repository tests on its own.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use jsonschema::{Draft, Validator};
use serde_json::{json, Value};

/// The draft ACP v2 schema (vendored: `vendor/acp-schema.v2.json`), loaded once per test
/// binary: what the v2 face's messages are checked against.
pub fn schema_v2() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        // Beside the v1 schema: in the ordinary-user half, beside its copy.
        let path = schema_path().with_file_name("acp-schema.v2.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
        let document: Value = serde_json::from_str(&text)
            .unwrap_or_else(|error| panic!("{} is not JSON: {error}", path.display()));
        Schema::from_document(document)
            .unwrap_or_else(|error| panic!("{} is not the ACP schema: {error}", path.display()))
    })
}

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client (the editor) to the agent: the agent's stdin.
    ClientToAgent,
    /// From the agent to the client: the agent's stdout.
    AgentToClient,
}

impl Direction {
    fn reverse(self) -> Direction {
        match self {
            Direction::ClientToAgent => Direction::AgentToClient,
            Direction::AgentToClient => Direction::ClientToAgent,
        }
    }
}

/// Where the schema is read from (in the ordinary-user half of `as_root_and_nobody`, its copy
/// where that user can reach it).
pub fn schema_path() -> PathBuf {
    std::env::var_os(crate::support::sandbox::SCHEMA_COPY)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/it/support/vendor/acp-schema.v1.json")
        })
}

/// The `$defs` types of one method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodTypes {
    /// The type of `params` (a `…Request` or `…Notification` def).
    pub params: String,
    /// The type of a successful response's `result`; `None` for notifications.
    pub result: Option<String>,
    /// Which way requests of this method travel; `None` for protocol-level methods that go both
    /// ways (`$/cancel_request`).
    pub direction: Option<Direction>,
}

/// The loaded schema: every `$defs` type and the method table.
pub struct Schema {
    defs: Value,
    methods: HashMap<String, MethodTypes>,
    validators: Mutex<HashMap<String, Arc<Validator>>>,
}

/// The schema, loaded once per test binary. Panics, saying where it looked, when it is missing.
pub fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = schema_path();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
            panic!(
                "cannot read the ACP schema at {}: {error} (vendored with the tests; see vendor/README.md)",
                path.display()
            )
        });
        let document: Value = serde_json::from_str(&text)
            .unwrap_or_else(|error| panic!("{} is not JSON: {error}", path.display()));
        Schema::from_document(document)
            .unwrap_or_else(|error| panic!("{} is not the ACP schema: {error}", path.display()))
    })
}

impl Schema {
    fn from_document(document: Value) -> Result<Schema, String> {
        let defs = document.get("$defs").cloned().ok_or("it has no $defs")?;
        let all = defs.as_object().ok_or("its $defs is not an object")?;
        let mut methods: HashMap<String, MethodTypes> = HashMap::new();
        for (name, def) in all {
            let Some(method) = def.get("x-method").and_then(Value::as_str) else {
                continue;
            };
            let direction = match def.get("x-side").and_then(Value::as_str) {
                Some("agent") => Some(Direction::ClientToAgent),
                Some("client") => Some(Direction::AgentToClient),
                _ => None,
            };
            let entry = methods
                .entry(method.to_string())
                .or_insert_with(|| MethodTypes {
                    params: String::new(),
                    result: None,
                    direction,
                });
            if name.ends_with("Response") {
                entry.result = Some(name.clone());
            } else {
                entry.params = name.clone();
            }
        }
        if let Some((method, _)) = methods.iter().find(|(_, types)| types.params.is_empty()) {
            return Err(format!(
                "method {method} has a response type but no request type"
            ));
        }
        Ok(Schema {
            defs,
            methods,
            validators: Mutex::new(HashMap::new()),
        })
    }

    /// The types of `method`, if the schema knows it.
    pub fn method(&self, method: &str) -> Option<&MethodTypes> {
        self.methods.get(method)
    }

    /// Checks `value` against the `$defs` type `def`; the error lists what does not match.
    pub fn validate(&self, def: &str, value: &Value) -> Result<(), String> {
        let validator = self.validator(def)?;
        let problems: Vec<String> = validator
            .iter_errors(value)
            .take(5)
            .map(|error| format!("at {:?}: {error}", error.instance_path.to_string()))
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        let mut message = format!("not a valid {def}: {}", problems.join("; "));
        if let Some(detail) = self.variant_detail(def, value) {
            message.push_str(&format!(" ({detail})"));
        }
        Err(message)
    }

    fn validator(&self, def: &str) -> Result<Arc<Validator>, String> {
        if self.defs.get(def).is_none() {
            return Err(format!("the schema has no type {def}"));
        }
        let mut validators = self.validators.lock().unwrap();
        if let Some(validator) = validators.get(def) {
            return Ok(validator.clone());
        }
        let schema = json!({ "$ref": format!("#/$defs/{def}"), "$defs": self.defs });
        let validator = jsonschema::options()
            .with_draft(Draft::Draft202012)
            .build(&schema)
            .map_err(|error| format!("cannot build a validator for {def}: {error}"))?;
        let validator = Arc::new(validator);
        validators.insert(def.to_string(), validator.clone());
        Ok(validator)
    }

    /// A `oneOf` only says "no variant matched". For the session update envelope, this names the
    /// variant the `sessionUpdate` tag selects and what is wrong against that variant alone.
    fn variant_detail(&self, def: &str, value: &Value) -> Option<String> {
        let (update, path) = match def {
            "SessionNotification" | "UpdateSessionNotification" => {
                (value.get("update")?, "/update")
            }
            "SessionUpdate" => (value, ""),
            _ => return None,
        };
        let tag = update.get("sessionUpdate")?.as_str()?;
        let union = self.defs.get("SessionUpdate")?;
        let variants = union
            .get("oneOf")
            .or_else(|| union.get("anyOf"))?
            .as_array()?;
        let Some(variant) = variants.iter().find(|variant| {
            variant
                .pointer("/properties/sessionUpdate/const")
                .and_then(Value::as_str)
                == Some(tag)
        }) else {
            return Some(format!("{tag:?} is not a sessionUpdate kind"));
        };
        let target = variant
            .pointer("/allOf/0/$ref")?
            .as_str()?
            .strip_prefix("#/$defs/")?;
        let errors = self.validate(target, update).err()?;
        Some(format!("as a {tag:?} update at {path:?}: {errors}"))
    }
}

/// Checks one JSON-RPC message without context: the envelope, a request's or notification's
/// params against its method's type, and an error response against `Error`. A successful
/// response's `result` needs the request it answers: use [`WireValidator`] for those.
pub fn validate_wire_line(json: &Value) -> Result<(), String> {
    match classify(json)? {
        Message::Request { method, params, .. } | Message::Notification { method, params } => {
            check_params(method, params, json.get("id").is_some()).map(|_| ())
        }
        Message::Error { error, .. } => schema().validate("Error", error),
        Message::Result { .. } => Ok(()),
    }
}

/// Checks a whole conversation, line by line, remembering requests so that each response's
/// `result` is checked against the type of the method it answers.
#[derive(Debug, Default)]
pub struct WireValidator {
    /// Requests not answered yet, by the direction they travelled and their id.
    pending: HashMap<(Direction, String), String>,
}

impl WireValidator {
    /// Checks one line of the wire going `direction`. The error names the line and the problem.
    pub fn check(&mut self, direction: Direction, line: &str) -> Result<(), String> {
        self.check_line(direction, line)
            .map_err(|problem| format!("{direction:?} line {}: {problem}", shorten(line)))
    }

    /// Requests sent but not answered: (direction, id, method).
    pub fn unanswered(&self) -> Vec<(Direction, String, String)> {
        let mut pending: Vec<_> = self
            .pending
            .iter()
            .map(|((direction, id), method)| (*direction, id.clone(), method.clone()))
            .collect();
        pending.sort_by(|a, b| (a.1.as_str(), a.2.as_str()).cmp(&(b.1.as_str(), b.2.as_str())));
        pending
    }

    fn check_line(&mut self, direction: Direction, line: &str) -> Result<(), String> {
        if line.trim_end_matches(['\r', '\n']).contains('\n') {
            return Err("one message must be one line".to_string());
        }
        let json: Value =
            serde_json::from_str(line).map_err(|error| format!("not JSON: {error}"))?;
        match classify(&json)? {
            Message::Request { id, method, params } => {
                if let Some(types) = check_params(method, params, true)? {
                    check_direction(method, types, direction)?;
                }
                let key = (direction, id.to_string());
                if self.pending.insert(key, method.to_string()).is_some() {
                    return Err(format!(
                        "request id {id} is already in use by an unanswered request"
                    ));
                }
                Ok(())
            }
            Message::Notification { method, params } => {
                if let Some(types) = check_params(method, params, false)? {
                    check_direction(method, types, direction)?;
                }
                Ok(())
            }
            Message::Result { id, result } => {
                let method = self.answered(direction, id)?;
                match schema()
                    .method(&method)
                    .and_then(|types| types.result.clone())
                {
                    Some(def) => schema()
                        .validate(&def, result)
                        .map_err(|error| format!("result of {method}: {error}")),
                    // Extension methods (`_…`) have no schema type.
                    None => Ok(()),
                }
            }
            Message::Error { id, error } => {
                if !id.is_null() {
                    self.answered(direction, id)?;
                }
                schema().validate("Error", error)
            }
        }
    }

    /// The method of the request that `id` answers, which must have travelled the other way.
    fn answered(&mut self, direction: Direction, id: &Value) -> Result<String, String> {
        self.pending
            .remove(&(direction.reverse(), id.to_string()))
            .ok_or_else(|| {
                format!("a response to id {id}, but no request with that id is waiting for one")
            })
    }
}

enum Message<'a> {
    Request {
        id: &'a Value,
        method: &'a str,
        params: Option<&'a Value>,
    },
    Notification {
        method: &'a str,
        params: Option<&'a Value>,
    },
    Result {
        id: &'a Value,
        result: &'a Value,
    },
    Error {
        id: &'a Value,
        error: &'a Value,
    },
}

/// The JSON-RPC 2.0 envelope: what kind of message this is.
fn classify(json: &Value) -> Result<Message<'_>, String> {
    let object = json
        .as_object()
        .ok_or("a JSON-RPC message must be an object")?;
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err("\"jsonrpc\" must be \"2.0\"".to_string());
    }
    let id = object.get("id");
    if let Some(id) = id {
        if !(id.is_string() || id.is_i64() || id.is_u64() || id.is_null()) {
            return Err(format!("the id {id} is not a string, an integer or null"));
        }
    }
    let params = object.get("params");
    match (
        object.get("method"),
        id,
        object.get("result"),
        object.get("error"),
    ) {
        (Some(method), _, None, None) => {
            let method = method.as_str().ok_or("\"method\" must be a string")?;
            Ok(match id {
                Some(id) => Message::Request { id, method, params },
                None => Message::Notification { method, params },
            })
        }
        (None, Some(id), Some(result), None) => Ok(Message::Result { id, result }),
        (None, Some(id), None, Some(error)) => Ok(Message::Error { id, error }),
        (None, Some(_), Some(_), Some(_)) => {
            Err("a response carries both \"result\" and \"error\"".to_string())
        }
        _ => Err("neither a request, a notification nor a response".to_string()),
    }
}

/// Checks params against the method's type; `Ok(None)` for extension methods (`_…`).
fn check_params(
    method: &str,
    params: Option<&Value>,
    has_id: bool,
) -> Result<Option<&'static MethodTypes>, String> {
    let Some(types) = schema().method(method) else {
        if method.starts_with('_') {
            return Ok(None);
        }
        return Err(format!(
            "{method:?} is not an ACP method (nor an extension method `_…`)"
        ));
    };
    match (has_id, types.result.is_some()) {
        (false, true) => return Err(format!("{method} is a request but has no id")),
        (true, false) => return Err(format!("{method} is a notification but has an id")),
        _ => {}
    }
    let params = params.unwrap_or(&Value::Null);
    schema()
        .validate(&types.params, params)
        .map_err(|error| format!("params of {method}: {error}"))?;
    Ok(Some(types))
}

fn check_direction(method: &str, types: &MethodTypes, direction: Direction) -> Result<(), String> {
    match types.direction {
        Some(expected) if expected != direction => {
            Err(format!("{method} travels {expected:?}, not {direction:?}"))
        }
        _ => Ok(()),
    }
}

fn shorten(line: &str) -> String {
    match line.char_indices().nth(300) {
        Some((cut, _)) => format!("{:?}…", &line[..cut]),
        None => format!("{line:?}"),
    }
}
