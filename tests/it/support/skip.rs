//! The one way a test skips for lack of a capability: [`skip_unless`].
//!
//! A skip is never silent:
//! - it is printed (`skipping: …`) and appended to the skip list (`target/skipped-tests.txt`, or
//!   the file `ACPBASH_SKIP_LOG` names), which `.ci/run` prints at the end of the run;
//! - when `ACPBASH_REQUIRE_SANDBOX=1` (`.ci/run` sets it when it runs as root), a capability that
//!   `acp-bash doctor` reported working (`ACPBASH_REQUIRED_LAYERS`, `;`-separated layer names,
//!   plus `root`) is required: the test FAILS instead of skipping;
//! - under `ACPBASH_REQUIRE_SANDBOX=1`, a capability name that `doctor` does not report at all
//!   (`ACPBASH_DOCTOR_LAYERS`) fails too: a renamed layer must not turn into a silent skip.

use std::fmt::Display;
use std::io::Write;
use std::path::PathBuf;

/// Capabilities that are not `doctor` layers.
pub const ROOT: &str = "root";
/// Running as an unprivileged user with user namespaces (not required: `doctor` doesn't report
/// it, so a machine without it only lists the skip).
pub const UNPRIVILEGED_USER_NAMESPACES: &str = "unprivileged user namespaces";

/// A cgroup v2 subtree the agent may manage (its own cgroup, or a scope with `Delegate=yes`
/// from systemd): not a layer of its own in `doctor` (its "resource limits" line says which
/// cgroup serves the limits), so a machine without it only lists the skip.
pub const CGROUP_V2_DELEGATION: &str = "a delegated cgroup v2 subtree";

/// Whether the test may go on: `true` when `available` is `Ok`. Otherwise records the skip and
/// returns `false` (the caller returns), or panics when CI requires `capability`.
///
/// `capability` is a layer name as `acp-bash doctor` prints it (`"Landlock filesystem rules"`,
/// `"PID + mount namespaces"`, `"private /proc"`, `"network namespace"`, …), or [`ROOT`], or
/// [`UNPRIVILEGED_USER_NAMESPACES`].
pub fn skip_unless(capability: &str, available: Result<(), impl Display>) -> bool {
    let why = match available {
        Ok(()) => return true,
        Err(why) => why.to_string(),
    };
    let test = std::thread::current()
        .name()
        .unwrap_or("an unnamed test")
        .to_string();
    if std::env::var("ACPBASH_REQUIRE_SANDBOX").as_deref() == Ok("1") {
        let listed = |var: &str| {
            std::env::var(var)
                .unwrap_or_default()
                .split(';')
                .any(|name| name.trim() == capability)
        };
        let special = capability == UNPRIVILEGED_USER_NAMESPACES
            || capability == ROOT
            || capability == CGROUP_V2_DELEGATION;
        if !special && !listed("ACPBASH_DOCTOR_LAYERS") {
            panic!(
                "{test}: needs {capability:?}, which `acp-bash doctor` does not report \
                 (layers: {:?}); use a layer name doctor prints",
                std::env::var("ACPBASH_DOCTOR_LAYERS").unwrap_or_default()
            );
        }
        if listed("ACPBASH_REQUIRED_LAYERS") {
            panic!(
                "{test}: needs {capability}, which doctor reports working and CI requires \
                 (ACPBASH_REQUIRE_SANDBOX=1), but: {why}"
            );
        }
    }
    eprintln!("skipping {test}: needs {capability}: {why}");
    record(&format!(
        "{test}: needs {capability}: {}",
        why.replace('\n', " ")
    ));
    false
}

/// Appends one line to the skip list. The ordinary-user half of a test (which may not write
/// the list) has its `skipping …` lines recorded this way by the root half.
pub fn record(line: &str) {
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(skip_log())
    {
        // One write per line: concurrent tests append whole lines.
        let _ = file.write_all(format!("{line}\n").as_bytes());
    }
}

/// Where skips are listed.
pub fn skip_log() -> PathBuf {
    if let Some(path) = std::env::var_os("ACPBASH_SKIP_LOG") {
        return path.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("skipped-tests.txt")
}

/// `Ok` when this process runs as root.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // used by Linux-only tests
pub fn root() -> Result<(), &'static str> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err("not running as root")
    }
}
