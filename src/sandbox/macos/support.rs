//! Which layers work on this Mac: whether `/usr/bin/sandbox-exec` applies acp-bash's
//! profiles here, probed for real (it cannot inside another Seatbelt sandbox: profiles do not
//! nest). Everything else the backend does is the same on every Mac.

/// Which sandbox layers work on this machine (macOS).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Support {
    /// Whether `sandbox-exec` applied the workspace and read-only profiles here (`Ok`), or
    /// why not (then those modes refuse to start commands).
    pub seatbelt: Result<(), String>,
}

impl Support {
    /// No layer works, for `reason`.
    pub fn none(reason: &str) -> Support {
        Support {
            seatbelt: Err(reason.to_string()),
        }
    }
}

/// Runs `/usr/bin/true` under each mode's profile (with every kind of rule in it) through
/// `sandbox-exec`: what fails there (a profile this macOS does not accept, a sandbox that
/// cannot nest, no sandbox-exec) would fail every command of those modes.
#[cfg(target_os = "macos")]
pub(crate) fn probe() -> Support {
    use super::seatbelt::{profile, Policy, SANDBOX_EXEC};
    use crate::sandbox::Mode;
    if !std::path::Path::new(SANDBOX_EXEC).exists() {
        return Support::none(&format!(
            "{SANDBOX_EXEC} is missing (it ships with every macOS since 10.5)"
        ));
    }
    let temp = std::env::temp_dir();
    let temp = temp.canonicalize().unwrap_or(temp);
    let masked = [temp.join("acp-bash-probe-masked")];
    let repos = [temp.clone()];
    for mode in [Mode::Workspace, Mode::ReadOnly] {
        let profile = profile(&Policy {
            mode,
            workspace: &temp,
            temp: &temp,
            masked: &masked,
            git_repos: &repos,
        });
        let output = std::process::Command::new(SANDBOX_EXEC)
            .args(profile.arguments(std::path::Path::new("/usr/bin/true"), &[]))
            .stdin(std::process::Stdio::null())
            .output();
        let output = match output {
            Ok(output) => output,
            Err(error) => {
                return Support::none(&format!("{SANDBOX_EXEC} could not be started: {error}"))
            }
        };
        if !output.status.success() {
            let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
            let nested = said.contains("Operation not permitted");
            return Support::none(&format!(
                "{SANDBOX_EXEC} refused the {} profile ({}{said}){}",
                mode.id(),
                output
                    .status
                    .code()
                    .map_or(String::new(), |code| format!("exit {code}: ")),
                if nested {
                    "; acp-bash itself runs inside a sandbox and Seatbelt profiles cannot \
                     nest: start it outside one"
                } else {
                    "; please report it with your macOS version"
                }
            ));
        }
    }
    Support { seatbelt: Ok(()) }
}
