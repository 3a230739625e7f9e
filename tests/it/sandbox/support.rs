//! The sandbox's probes and descriptions on this machine.

use acp_bash::sandbox::{self, Mode, Support};

#[test]
#[cfg(target_os = "linux")]
fn doctor_probes_every_layer() {
    let report = sandbox::doctor_report();
    eprintln!("{report}");
    for mode in Mode::ALL {
        eprintln!("{}", sandbox::describe(mode));
    }
    assert!(report.contains("PID + mount namespaces"));
    assert!(report.contains("user namespace"));
    assert!(report.contains("read-only filesystem view"));
    assert!(report.contains("resource limits"));
}

/// What each mode says it allows is one sentence, then (for `full` and `off`) what it gives up,
/// and never the mode's own name.
#[test]
fn descriptions_are_short_and_do_not_repeat_the_name() {
    let all = Support::all(7);
    for mode in Mode::ALL.into_iter().chain([Mode::Off]) {
        let line = sandbox::describe_with(mode, &all);
        assert!(!line.contains(mode.name()), "{line}");
        assert!(line.len() < 420, "{} chars: {line}", line.len());
    }
    let root = unsafe { libc::geteuid() } == 0;
    let off = sandbox::describe_with(Mode::Off, &all);
    assert_eq!(off.contains("As root"), root, "{off}");
}

#[test]
fn with_nothing_enforced_every_mode_says_so() {
    let none = Support::none("test: pretend nothing works");
    for mode in [Mode::Workspace, Mode::ReadOnly] {
        let line = sandbox::describe_with(mode, &none);
        // The picker shows the name already: the description does not repeat it.
        assert!(!line.contains(mode.name()), "{line}");
        assert!(line.contains("Not enforced on this machine"), "{line}");
        assert!(line.contains("any write restriction"), "{line}");
    }
    let report = sandbox::DoctorReport::from_support(&none).to_string();
    assert!(
        report.contains("[missing] Landlock filesystem rules: test: pretend nothing works"),
        "{report}"
    );
}

#[test]
#[cfg(target_os = "linux")]
fn degraded_support_still_runs_commands_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let none = Support::none("test: pretend nothing works");
    let running = crate::support::sandbox::spawn_with("echo hi", Mode::ReadOnly, dir.path(), &none);
    assert!(
        running
            .notices
            .iter()
            .any(|n| n.contains("writes are NOT restricted")),
        "{:?}",
        running.notices
    );
    assert!(
        running
            .notices
            .iter()
            .any(|n| n.contains("network is NOT blocked")),
        "{:?}",
        running.notices
    );
    let (status, output) = running.finish();
    assert!(status.success());
    assert_eq!(output, "hi\n");
    let line = sandbox::describe_with(Mode::Workspace, &none);
    assert!(line.contains("Not enforced on this machine"), "{line}");
}
