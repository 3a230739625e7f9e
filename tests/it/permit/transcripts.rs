//! Transcripts (issue 49, point 4): a blocked host with each answer (once, session, always,
//! reject) and a write outside the workspace (allowed once), in Zed, a plain client and ACP v2.
//! Everything that crossed the pipes, normalized (the workspace `[TMP]`, the config folder
//! `[CONFIG]`, the folder outside `[OUTSIDE]`), pinned as insta snapshots.

use super::{allowlist_holds, runtime, unlisted_registry, Agent, Face, Pick, Places, FETCH};
use crate::netproxy::http_server;

/// What the transcript shows.
#[derive(Debug, Clone, Copy)]
enum Case {
    /// `curl` to a host the allowlist refuses, answered with this option.
    Host(&'static str),
    /// `touch` of a file outside the workspace, allowed once.
    WriteOutside,
}

fn transcript(face: Face, case: Case) {
    let host_case = matches!(case, Case::Host(_));
    if host_case && !allowlist_holds() {
        return;
    }
    if !crate::support::sandbox::require_namespaces()
        || !crate::support::skip::skip_unless(
            crate::support::skip::ROOT,
            crate::support::skip::root(),
        )
    {
        return;
    }
    runtime().block_on(async {
        let server = http_server(None);
        let places = Places::new();
        let outside = tempfile::Builder::new()
            .prefix("acpbash-permit-outside-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let outside_path = outside.path().to_str().unwrap().to_string();
        let args = unlisted_registry(&server);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut agent = Agent::start(face, &args, places.config.path());
        agent.initialize().await;
        let session = agent.new_session(&places.ws()).await;
        let name = match case {
            Case::Host(option) => {
                agent.will_answer(&[Pick::Option(option)]);
                agent.turn(&session, FETCH).await;
                if option == "allow-session" {
                    // The session's next command is not asked about.
                    agent.turn(&session, FETCH).await;
                }
                format!("host_{}", option.replace('-', "_"))
            }
            Case::WriteOutside => {
                agent.will_answer(&[Pick::Option("allow-once")]);
                agent
                    .turn(&session, &format!("touch {outside_path}/made"))
                    .await;
                assert!(outside.path().join("made").exists());
                "write_outside_once".to_string()
            }
        };
        let transcript = agent.finish().await;
        let config = places.config.path().to_str().unwrap().to_string();
        // The agent's own request ids (v2: UUIDs) differ on every run.
        let uuid = regex::Regex::new(
            "\"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\"",
        )
        .unwrap();
        let places_of = |text: &str| text.replace(&config, "[CONFIG]").replace(&outside_path, "[OUTSIDE]");
        let lines: Vec<String> = transcript
            .iter()
            .map(|line| uuid.replace_all(&places_of(line), "\"[REQUEST]\"").into_owned())
            .collect();
        let ws = places.ws();
        let (normalized, face_name) = match face {
            Face::V2 => (crate::acp::v2_face::normalized(&lines, &ws), "v2"),
            Face::Zed => (
                crate::support::acp::normalize_with(&lines, &ws, false, false).join("\n"),
                "zed",
            ),
            Face::Plain => (
                crate::support::acp::normalize_with(&lines, &ws, false, false).join("\n"),
                "plain",
            ),
        };
        // Decoded terminal bytes name them too.
        let normalized = places_of(&normalized);
        insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(format!("permit__{face_name}__{name}"), normalized);
        });
    });
}

macro_rules! transcripts {
    ($($test:ident: $face:expr, $case:expr;)*) => {$(
        #[test]
        fn $test() {
            transcript($face, $case);
        }
    )*};
}

transcripts! {
    zed_host_once: Face::Zed, Case::Host("allow-once");
    zed_host_session: Face::Zed, Case::Host("allow-session");
    zed_host_always: Face::Zed, Case::Host("allow-always");
    zed_host_reject: Face::Zed, Case::Host("reject");
    zed_write_outside: Face::Zed, Case::WriteOutside;
    plain_host_once: Face::Plain, Case::Host("allow-once");
    plain_host_session: Face::Plain, Case::Host("allow-session");
    plain_host_always: Face::Plain, Case::Host("allow-always");
    plain_host_reject: Face::Plain, Case::Host("reject");
    plain_write_outside: Face::Plain, Case::WriteOutside;
    v2_host_once: Face::V2, Case::Host("allow-once");
    v2_host_session: Face::V2, Case::Host("allow-session");
    v2_host_always: Face::V2, Case::Host("allow-always");
    v2_host_reject: Face::V2, Case::Host("reject");
    v2_write_outside: Face::V2, Case::WriteOutside;
}
