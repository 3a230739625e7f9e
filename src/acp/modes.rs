//! The sandbox choice as ACP session modes that an agent merges with its own, and as the
//! `mode` config option.
//!
//! Owns [`SandboxModes`]: the modes to offer (ids optionally prefixed, so they cannot collide
//! with an embedder's own), the same choice as a config option (a select of category `mode`,
//! [`SandboxModes::config_option`]), and reading a `session/set_mode` id (or the option's
//! value) back. It does not own the
//! session's modes: an embedder appends these to its list and asks [`SandboxModes::parse`]
//! whether an id is one of them. Must not touch: what each mode enforces (the sandbox's).

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode,
    SessionModeId, SessionModeState,
};

use crate::sandbox::{self, Mode};

/// The id of the sandbox mode's config option.
pub const MODE_OPTION_ID: &str = "mode";

/// The sandbox modes as a building block for an agent's session modes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxModes {
    /// Whether `off` (no kernel sandbox) may be chosen: only when whoever started the agent
    /// chose it.
    pub off_allowed: bool,
    /// Put before every mode id (`""`: the bare ids `workspace`, `read-only`, …).
    pub id_prefix: String,
}

/// What a `session/set_mode` id means to [`SandboxModes::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeChoice {
    /// One of the sandbox modes offered.
    Sandbox(Mode),
    /// A sandbox mode id that is not offered; the text says why (for the error response).
    NotOffered(String),
    /// Not a sandbox mode id: the embedder's own, or unknown.
    Other,
}

impl SandboxModes {
    /// The sandbox modes with bare ids; `off` only when `off_allowed`.
    pub fn new(off_allowed: bool) -> Self {
        SandboxModes {
            off_allowed,
            id_prefix: String::new(),
        }
    }

    /// Sets [`SandboxModes::id_prefix`] (say `"sandbox:"`).
    pub fn id_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.id_prefix = prefix.into();
        self
    }

    /// The modes offered, in order.
    pub fn offered(&self) -> Vec<Mode> {
        Mode::offered(self.off_allowed)
    }

    /// The id of `mode` as offered.
    pub fn id(&self, mode: Mode) -> SessionModeId {
        SessionModeId::new(format!("{}{}", self.id_prefix, mode.id()))
    }

    /// The offered modes as ACP session modes (each description says what the mode enforces on
    /// this machine), to append to an agent's own.
    pub fn modes(&self) -> Vec<SessionMode> {
        self.offered()
            .into_iter()
            .map(|mode| {
                SessionMode::new(self.id(mode), mode.name()).description(sandbox::describe(mode))
            })
            .collect()
    }

    /// The whole mode state when the sandbox modes are an agent's only modes.
    pub fn state(&self, current: Mode) -> SessionModeState {
        SessionModeState::new(self.id(current), self.modes())
    }

    /// The sandbox mode as a config option (id [`MODE_OPTION_ID`]): a select of category
    /// `mode` whose values are the mode ids of [`SandboxModes::modes`], each described the
    /// same way, `current` selected.
    pub fn config_option(&self, current: Mode) -> SessionConfigOption {
        let options: Vec<SessionConfigSelectOption> = self
            .offered()
            .into_iter()
            .map(|mode| {
                SessionConfigSelectOption::new(self.id(mode).0, mode.name())
                    .description(sandbox::describe(mode))
            })
            .collect();
        SessionConfigOption::select(MODE_OPTION_ID, "Sandbox", self.id(current).0, options)
            .description("What the kernel sandbox lets the session's next commands do".to_string())
            .category(SessionConfigOptionCategory::Mode)
    }

    /// What the id of a `session/set_mode` request (or a value of the `mode` config option)
    /// means.
    pub fn parse(&self, id: &str) -> ModeChoice {
        let Some(bare) = id.strip_prefix(self.id_prefix.as_str()) else {
            return ModeChoice::Other;
        };
        match Mode::from_id(bare) {
            Some(mode) if self.offered().contains(&mode) => ModeChoice::Sandbox(mode),
            Some(Mode::Off) => ModeChoice::NotOffered(
                "mode \"off\" is not available: the sandbox can be turned off only by whoever \
                 starts the agent (`acp-bash --sandbox off`)"
                    .to_string(),
            ),
            Some(mode) => ModeChoice::NotOffered(format!("mode {:?} is not offered", mode.id())),
            None => ModeChoice::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixed_modes_merge_with_an_agents_own() {
        let sandbox = SandboxModes::new(false).id_prefix("sandbox:");
        let mut modes = vec![
            SessionMode::new("ask", "Ask"),
            SessionMode::new("code", "Code"),
        ];
        modes.extend(sandbox.modes());
        let ids: Vec<&str> = modes.iter().map(|m| &*m.id.0).collect();
        assert_eq!(
            ids,
            [
                "ask",
                "code",
                "sandbox:workspace",
                "sandbox:read-only",
                "sandbox:full"
            ]
        );
        assert_eq!(sandbox.parse("code"), ModeChoice::Other);
        assert_eq!(sandbox.parse("read-only"), ModeChoice::Other);
        assert_eq!(
            sandbox.parse("sandbox:read-only"),
            ModeChoice::Sandbox(Mode::ReadOnly)
        );
        assert!(
            matches!(sandbox.parse("sandbox:off"), ModeChoice::NotOffered(why) if why.contains("--sandbox off"))
        );
        assert_eq!(sandbox.parse("sandbox:nope"), ModeChoice::Other);
    }

    #[test]
    fn the_config_option_offers_the_same_modes_as_the_modes() {
        let sandbox = SandboxModes::new(false);
        let option = sandbox.config_option(Mode::ReadOnly);
        let json = serde_json::to_value(&option).unwrap();
        assert_eq!(json["id"], "mode");
        assert_eq!(json["type"], "select");
        assert_eq!(json["category"], "mode");
        assert_eq!(json["currentValue"], "read-only");
        let values: Vec<&str> = json["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["value"].as_str().unwrap())
            .collect();
        let modes: Vec<String> = sandbox
            .modes()
            .into_iter()
            .map(|m| m.id.0.to_string())
            .collect();
        assert_eq!(values, modes);
        for (option, mode) in json["options"]
            .as_array()
            .unwrap()
            .iter()
            .zip(sandbox.modes())
        {
            assert_eq!(option["description"].as_str(), mode.description.as_deref());
        }
    }

    #[test]
    fn bare_ids_are_the_agents_own_modes() {
        let state = SandboxModes::new(true).state(Mode::Off);
        assert_eq!(&*state.current_mode_id.0, "off");
        assert_eq!(state.available_modes.len(), 4);
        assert_eq!(
            SandboxModes::new(true).parse("off"),
            ModeChoice::Sandbox(Mode::Off)
        );
    }
}
