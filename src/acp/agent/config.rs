//! Session config options: the sandbox mode (and, with a model driver, the model), and
//! whether to ask when the sandbox refuses a command (where the agent asks), as ACP
//! `configOptions`, and `session/set_config_option`.
//!
//! Owns: the list a session's answers carry (`session/new`, `load`, `resume`,
//! `set_config_option`, and `config_option_update`), reading a `set_config_option` request
//! back, and keeping mode-only and config-option clients in step: a change of the mode by
//! `session/set_mode` is announced as a `config_option_update`, a change by
//! `set_config_option` as a `current_mode_update`. Must not touch: what a mode enforces (the
//! sandbox's), which model answers (the driver's, read through the turn).

use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, CurrentModeUpdate, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigOptionValue, SessionConfigSelectOption, SessionModeId, SessionNotification,
    SessionUpdate, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
};

use super::*;
pub use crate::acp::modes::MODE_OPTION_ID;

/// The id of the model's config option (only with a model driver).
pub const MODEL_OPTION_ID: &str = "model";

/// The id of the reasoning level's config option (only with a driver that offers levels).
pub const REASONING_OPTION_ID: &str = "reasoning";

/// The id of the config option that turns permission requests off for the session (only
/// where the agent asks: [`AcpBashAgent::with_permission_requests`]).
pub const PERMISSION_REQUESTS_OPTION_ID: &str = "permission_requests";

impl Connection {
    /// The session's config options as they are now: the sandbox mode, then the model when
    /// the driver offers models.
    pub(super) fn config_options(&self, state: &SessionState) -> Vec<SessionConfigOption> {
        let mut options =
            vec![SandboxModes::new(self.off_allowed()).config_option(state.session.mode())];
        let models = self.driver.models();
        if let Some(default) = models.first().map(|m| m.id.clone()) {
            let chosen = state.model.lock().unwrap().clone();
            let current = chosen.unwrap_or(default);
            let values: Vec<SessionConfigSelectOption> = models
                .iter()
                .map(|model| {
                    SessionConfigSelectOption::new(model.id.clone(), model.name.clone())
                        .description(model.description.clone())
                })
                .collect();
            options.push(
                SessionConfigOption::select(MODEL_OPTION_ID, "Model", current, values)
                    .description("The model that answers the session's next prompt".to_string())
                    .category(SessionConfigOptionCategory::Model),
            );
        }
        let levels = self.driver.thought_levels();
        if let Some(default) = levels.first().map(|l| l.id.clone()) {
            let chosen = state.thought_level.lock().unwrap().clone();
            let values: Vec<SessionConfigSelectOption> = levels
                .iter()
                .map(|level| {
                    SessionConfigSelectOption::new(level.id.clone(), level.name.clone())
                        .description(level.description.clone())
                })
                .collect();
            options.push(
                SessionConfigOption::select(
                    REASONING_OPTION_ID,
                    "Reasoning",
                    chosen.unwrap_or(default),
                    values,
                )
                .description("How hard the model thinks before it answers".to_string())
                .category(SessionConfigOptionCategory::ThoughtLevel),
            );
        }
        if self.permits.ask {
            let current = if state.permits.asks() { "ask" } else { "off" };
            let values = vec![
                SessionConfigSelectOption::new("ask", "Ask").description(
                    "When the sandbox refuses a command something you may allow (a host, a \
                     write outside the workspace, the network in read-only mode), ask"
                        .to_string(),
                ),
                SessionConfigSelectOption::new("off", "Don't ask").description(
                    "The command fails, with a line that says how to allow it".to_string(),
                ),
            ];
            options.push(
                SessionConfigOption::select(
                    PERMISSION_REQUESTS_OPTION_ID,
                    "Permission requests",
                    current,
                    values,
                )
                .description("Whether to ask you when the sandbox refuses a command".to_string()),
            );
        }
        options
    }

    /// The ids [`Self::config_options`] offers.
    fn option_ids(&self) -> Vec<&'static str> {
        let mut ids = vec![MODE_OPTION_ID];
        if !self.driver.models().is_empty() {
            ids.push(MODEL_OPTION_ID);
        }
        if !self.driver.thought_levels().is_empty() {
            ids.push(REASONING_OPTION_ID);
        }
        if self.permits.ask {
            ids.push(PERMISSION_REQUESTS_OPTION_ID);
        }
        ids
    }

    /// `session/set_config_option`: changes the sandbox mode or the model for the session's
    /// next command or model request, answers with every option, and (for the mode) sends a
    /// `current_mode_update` so that a client that shows modes stays in step.
    pub(super) fn set_config_option(
        &self,
        request: SetSessionConfigOptionRequest,
        responder: Responder<SetSessionConfigOptionResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let state = match self.session_state(&request.session_id) {
            Ok(state) => state,
            Err(error) => return responder.respond_with_error(error),
        };
        let value = request.value.as_value_id().map(|v| v.0.to_string());
        let changed = self.change_config_option(
            &state,
            &request.session_id.0,
            &request.config_id.0,
            value,
            value_json(&request.value),
        );
        let mode_changed = match changed {
            Ok(mode_changed) => mode_changed,
            Err(error) => return responder.respond_with_error(error),
        };
        // Before the answer, so that its place on the wire is fixed.
        if let Some(mode_id) = mode_changed {
            cx.send_notification(SessionNotification::new(
                request.session_id,
                SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode_id)),
            ))?;
        }
        responder.respond(SetSessionConfigOptionResponse::new(
            self.config_options(&state),
        ))
    }

    /// Sets option `config_id` of `state` (of session `session_id`) to `value` (a value id;
    /// `None` for a value of another type, which `quoted` shows in the error): the mode's new
    /// id when the sandbox mode changed, `None` for the model and the reasoning level. An unknown id or value is an
    /// invalid-params error listing the valid ones, and changes nothing. Both faces' handlers.
    pub(super) fn change_config_option(
        &self,
        state: &SessionState,
        session_id: &str,
        config_id: &str,
        value: Option<String>,
        quoted: serde_json::Value,
    ) -> Result<Option<SessionModeId>, Error> {
        if !self.option_ids().contains(&config_id) {
            let ids = self.option_ids();
            return Err(invalid_params(
                format!(
                    "unknown config option {:?}: the options are {}",
                    short(config_id),
                    ids.join(", ")
                ),
                json!({ "configId": short(config_id), "configOptions": ids }),
            ));
        }
        let valid: Vec<String> = match config_id {
            MODE_OPTION_ID => SandboxModes::new(self.off_allowed())
                .modes()
                .into_iter()
                .map(|m| m.id.0.to_string())
                .collect(),
            REASONING_OPTION_ID => self
                .driver
                .thought_levels()
                .into_iter()
                .map(|l| l.id)
                .collect(),
            PERMISSION_REQUESTS_OPTION_ID => vec!["ask".into(), "off".into()],
            _ => self.driver.models().into_iter().map(|m| m.id).collect(),
        };
        let refuse = |why: String| {
            invalid_params(
                format!(
                    "{why}: the values of {config_id:?} are {}",
                    valid.join(", ")
                ),
                json!({ "configId": config_id, "value": quoted, "values": valid }),
            )
        };
        let Some(value) = value else {
            return Err(refuse(format!(
                "{config_id:?} is a select: its value is one of its value ids, not a boolean"
            )));
        };
        match config_id {
            MODE_OPTION_ID => {
                let modes = SandboxModes::new(self.off_allowed());
                let mode = match modes.parse(&value) {
                    ModeChoice::Sandbox(mode) => mode,
                    ModeChoice::NotOffered(why) => return Err(refuse(why)),
                    ModeChoice::Other => {
                        return Err(refuse(format!("unknown mode {:?}", short(&value))))
                    }
                };
                tracing::info!(session = %session_id, mode = mode.id(), "session/set_config_option");
                let was = state.session.mode();
                state.session.set_mode(mode);
                state.log.set_mode(mode.id());
                self.restart_mcp_if_mode_changed(state, was);
                Ok(Some(modes.id(mode)))
            }
            REASONING_OPTION_ID => {
                if !valid.contains(&value) {
                    return Err(refuse(format!(
                        "unknown reasoning level {:?}",
                        short(&value)
                    )));
                }
                tracing::info!(session = %session_id, reasoning = %value, "session/set_config_option");
                state.log.set_thought_level(Some(&value));
                *state.thought_level.lock().unwrap() = Some(value);
                Ok(None)
            }
            PERMISSION_REQUESTS_OPTION_ID => {
                if !valid.contains(&value) {
                    return Err(refuse(format!("unknown value {:?}", short(&value))));
                }
                tracing::info!(session = %session_id, permission_requests = %value, "session/set_config_option");
                state.permits.set_asking(value == "ask");
                Ok(None)
            }
            _ => {
                if !valid.contains(&value) {
                    return Err(refuse(format!("unknown model {:?}", short(&value))));
                }
                tracing::info!(session = %session_id, model = %value, "session/set_config_option");
                state.log.set_model(Some(&value));
                *state.model.lock().unwrap() = Some(value);
                Ok(None)
            }
        }
    }

    /// After `session/set_mode`: the new list as a `config_option_update`, for clients that
    /// show config options instead of modes.
    pub(super) fn announce_config_options(
        &self,
        cx: &ConnectionTo<Client>,
        session_id: SessionId,
        state: &SessionState,
    ) -> agent_client_protocol::Result<()> {
        cx.send_notification(SessionNotification::new(
            session_id,
            SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(self.config_options(state))),
        ))
    }
}

/// A request's value as an error quotes it.
fn value_json(value: &SessionConfigOptionValue) -> serde_json::Value {
    match value {
        SessionConfigOptionValue::Boolean { value } => json!(value),
        SessionConfigOptionValue::ValueId { value } => json!(short(&value.0)),
        _ => serde_json::Value::Null,
    }
}
