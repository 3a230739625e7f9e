//! The bash tool as a language model sees it: its definition (name, description, JSON schema)
//! for OpenAI-style and Anthropic-style tool APIs, and its arguments ([`BashArgs`]), parsed with
//! errors that tell the model what to fix.
//!
//! The text to hand back to the model is [`crate::present::model::model_result`] (escapes
//! stripped, redraws collapsed, a per-call budget, then the status markers). Must not touch:
//! running commands, ACP.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::BashCall;

/// The tool's name: `bash`.
pub const TOOL_NAME: &str = "bash";

/// What a model is told about the tool.
const DESCRIPTION: &str = "Run a bash script in the user's workspace and get its output \
(stdout and stderr merged), then a status line such as `[exit code: 0]`, \
`[killed by signal: SIGKILL]`, `[timed out after 2m]` or `[cancelled]`. The working directory \
persists between calls (`cd` carries over, and `cd -`), and so do exported variables and `unset` \
(`export`, `source .venv/bin/activate`); functions, aliases, shell options, non-exported variables, \
traps and background jobs do not. \
Commands run in a sandbox without a terminal: stdin is empty, so never wait for input. Long \
output is cut in the middle.";

/// A tool definition: name, description and the JSON schema of the arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What the model is told the tool does.
    pub description: String,
    /// JSON schema (draft 2020-12 subset every tool API accepts) of the arguments object.
    pub input_schema: Value,
}

impl ToolDefinition {
    /// The bash tool's definition.
    pub fn bash() -> Self {
        ToolDefinition {
            name: TOOL_NAME.to_string(),
            description: DESCRIPTION.to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": "The bash script to run (passed to `bash -c`)."
                    },
                    "description": {
                        "type": "string",
                        "description": "What the command does, in a few words, for the user."
                    },
                    "timeout_ms": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Kill the command after this many milliseconds."
                    }
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        }
    }

    /// As an OpenAI-style tool: `{"type": "function", "function": {name, description, parameters}}`.
    pub fn openai(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            }
        })
    }

    /// As an Anthropic-style tool: `{name, description, input_schema}`.
    pub fn anthropic(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        })
    }
}

/// The arguments a model passes: `{"command": "...", "description"?: "...", "timeout_ms"?: N}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BashArgs {
    /// The script.
    pub command: String,
    /// What it does, for the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Timeout in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl BashArgs {
    /// Arguments that run `command`.
    pub fn new(command: impl Into<String>) -> Self {
        BashArgs {
            command: command.into(),
            description: None,
            timeout_ms: None,
        }
    }

    /// Parses the arguments' JSON text (OpenAI passes a string).
    pub fn from_json(text: &str) -> Result<Self, ArgsError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|error| ArgsError::new(format!("the arguments are not JSON: {error}")))?;
        BashArgs::from_value(value)
    }

    /// Parses the arguments' JSON value (Anthropic passes an object).
    pub fn from_value(value: Value) -> Result<Self, ArgsError> {
        if !value.is_object() {
            return Err(ArgsError::new(format!(
                "the arguments must be a JSON object, got {}",
                kind(&value)
            )));
        }
        let args: BashArgs =
            serde_json::from_value(value).map_err(|error| ArgsError::new(error.to_string()))?;
        if args.command.trim().is_empty() {
            return Err(ArgsError::new("`command` is empty: give the script to run"));
        }
        if args.timeout_ms == Some(0) {
            return Err(ArgsError::new(
                "`timeout_ms` is 0: give a positive number of milliseconds, or leave it out",
            ));
        }
        Ok(args)
    }

    /// The call these arguments ask for.
    pub fn into_call(self) -> BashCall {
        let mut call = BashCall::new(self.command);
        call.description = self.description.filter(|d| !d.trim().is_empty());
        call.request.timeout = self.timeout_ms.map(Duration::from_millis);
        // A model's command is shown as the read or search it is (display only).
        call.classify = true;
        call
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Why a model's arguments are not valid: what is wrong, then what is expected. Meant to be
/// returned to the model as the tool's result, so it can try again.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArgsError {
    problem: String,
}

impl ArgsError {
    fn new(problem: impl Into<String>) -> Self {
        ArgsError {
            problem: problem.into(),
        }
    }

    /// What is wrong, without the expected shape.
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid arguments for the bash tool: {}; expected {{\"command\": string, \
             \"description\"?: string, \"timeout_ms\"?: positive integer}}",
            self.problem
        )
    }
}

impl std::error::Error for ArgsError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::RunRequest;

    #[test]
    fn arguments_parse_from_text_and_value() {
        let args = BashArgs::from_json(r#"{"command":"ls","timeout_ms":500}"#).unwrap();
        assert_eq!(
            args.into_call(),
            BashCall::from(RunRequest::new("ls").timeout(Duration::from_millis(500)))
                .classified(true)
        );
        let args = BashArgs::from_value(json!({"command": "make", "description": "Build"}));
        assert_eq!(
            args.unwrap().into_call(),
            BashCall::new("make").description("Build").classified(true)
        );
    }

    #[test]
    fn errors_say_what_is_wrong_and_what_is_expected() {
        let cases = [
            (r#"{"cmd":"ls"}"#, "unknown field `cmd`"),
            (r#"{"description":"x"}"#, "missing field `command`"),
            (
                r#"{"command":42}"#,
                "invalid type: integer `42`, expected a string",
            ),
            (r#"{"command":"  "}"#, "`command` is empty"),
            (r#"{"command":"ls","timeout_ms":0}"#, "`timeout_ms` is 0"),
            (
                r#"{"command":"ls","timeout_ms":-5}"#,
                "invalid value: integer `-5`",
            ),
            (r#"["ls"]"#, "must be a JSON object, got an array"),
            ("ls -la", "the arguments are not JSON"),
        ];
        for (text, problem) in cases {
            let error = BashArgs::from_json(text).unwrap_err().to_string();
            assert!(error.contains(problem), "{text}: {error}");
            assert!(error.contains("expected {\"command\": string"), "{error}");
        }
    }

    #[test]
    fn the_definition_fits_both_tool_apis() {
        let definition = ToolDefinition::bash();
        let openai = definition.openai();
        assert_eq!(openai["type"], "function");
        assert_eq!(openai["function"]["name"], "bash");
        assert_eq!(
            openai["function"]["parameters"]["required"],
            json!(["command"])
        );
        let anthropic = definition.anthropic();
        assert_eq!(anthropic["name"], "bash");
        assert_eq!(anthropic["input_schema"], definition.input_schema);
        let properties = definition.input_schema["properties"].as_object().unwrap();
        let names: Vec<&str> = properties.keys().map(String::as_str).collect();
        assert_eq!(names, ["command", "description", "timeout_ms"]);
    }
}
