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
}

#[test]
fn with_nothing_enforced_every_mode_says_so() {
    let none = Support::none("test: pretend nothing works");
    for mode in [Mode::Workspace, Mode::ReadOnly] {
        let line = sandbox::describe_with(mode, &none);
        assert!(line.starts_with(mode.name()), "{line}");
        assert!(line.contains("Not enforced on this machine"), "{line}");
        assert!(line.contains("write restrictions"), "{line}");
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
    let running =
        crate::support::sandbox::spawn_with("echo hi", Mode::ReadOnly, dir.path(), &none, |_| {});
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
