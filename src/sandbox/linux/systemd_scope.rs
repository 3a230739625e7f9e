//! A transient systemd scope with `Delegate=yes` holding the agent, asked over D-Bus (zbus): a
//! cgroup v2 folder the agent may manage (`cgroup_v2.rs`). Root asks the system manager; an
//! ordinary user asks its user manager (`user@UID.service`, which delegates `cpu memory pids`
//! by default), which moves the agent out of its login session through the system manager.
//! Used once per agent, at the first command with a limit (`notes/2026-12-06-cgroup-v2-limits.md`).

use std::path::PathBuf;
use std::time::Duration;

use zbus::{MessageStream, OwnedObjectPath, Variant};

/// How long systemd gets to start the scope (a loaded machine, a VM under TCG).
const JOB_TIMEOUT: Duration = Duration::from_secs(20);

/// The socket of the bus to ask: the system bus for root, the user's bus otherwise; `None`
/// where it does not exist.
pub(crate) fn bus_socket(system: bool) -> Option<PathBuf> {
    let path = if system {
        match std::env::var("DBUS_SYSTEM_BUS_ADDRESS") {
            Ok(address) => PathBuf::from(address.strip_prefix("unix:path=")?),
            Err(_) => PathBuf::from("/run/dbus/system_bus_socket"),
        }
    } else {
        user_bus()
    };
    path.exists().then_some(path)
}

/// `$XDG_RUNTIME_DIR/bus`, where the user manager's bus is (dbus-user-session, dbus-broker).
/// The variable only where this user owns it (a process started as another user may have
/// inherited someone else's).
fn user_bus() -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: plain getter.
    let uid = unsafe { libc::geteuid() };
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| std::fs::metadata(dir).is_ok_and(|m| m.uid() == uid))
        .unwrap_or_else(|| PathBuf::from(format!("/run/user/{uid}")));
    runtime.join("bus")
}

/// Starts the scope `name` (`acp-bash-PID.scope`) with `Delegate=yes` holding the process
/// `pid`, and waits until systemd's job is done. Blocks the calling thread (on a thread of its
/// own, with a runtime of its own: the caller may be on the agent's runtime).
pub(crate) fn start_delegated_scope(name: &str, pid: u32, system: bool) -> Result<(), String> {
    let socket = bus_socket(system).ok_or_else(|| {
        if system {
            "there is no system bus (/run/dbus/system_bus_socket)".to_string()
        } else {
            format!(
                "there is no user bus ({}; a systemd user manager with dbus-user-session)",
                user_bus().display()
            )
        }
    })?;
    let name = name.to_string();
    let worker = std::thread::Builder::new()
        .name("acp-bash-systemd".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("no runtime for D-Bus: {e}"))?;
            runtime.block_on(async {
                tokio::time::timeout(JOB_TIMEOUT, start(&socket, &name, pid))
                    .await
                    .unwrap_or_else(|_| {
                        Err(format!("systemd did not start it within {JOB_TIMEOUT:?}"))
                    })
            })
        })
        .map_err(|e| format!("no thread for D-Bus: {e}"))?;
    worker
        .join()
        .unwrap_or_else(|_| Err("the D-Bus thread panicked".to_string()))
}

const SYSTEMD: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";

async fn start(socket: &std::path::Path, name: &str, pid: u32) -> Result<(), String> {
    let address = format!("unix:path={}", socket.display());
    let connection = zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .map_err(|e| format!("cannot connect to {address}: {e}"))?;
    // JobRemoved tells when the scope is there; systemd sends its signals only to subscribers,
    // and the stream queues them from before the call on.
    let mut jobs = MessageStream::for_match_rule(
        format!(
            "type='signal',sender='{SYSTEMD}',path='{MANAGER_PATH}',interface='{MANAGER}',member='JobRemoved'"
        )
        .as_str(),
        &connection,
        None,
    )
    .await
    .map_err(|e| format!("cannot watch systemd's jobs: {e}"))?;
    connection
        .call_method(Some(SYSTEMD), MANAGER_PATH, Some(MANAGER), "Subscribe", &())
        .await
        .map_err(|e| format!("Subscribe: {e}"))?;
    let properties: Vec<(&str, Variant<'_>)> = vec![
        ("PIDs", Variant::from(vec![pid])),
        ("Delegate", Variant::from(true)),
        (
            "Description",
            Variant::from(format!("acp-bash {pid}: per-command limits")),
        ),
    ];
    let auxiliary: Vec<(&str, Vec<(&str, Variant<'_>)>)> = Vec::new();
    let reply = connection
        .call_method(
            Some(SYSTEMD),
            MANAGER_PATH,
            Some(MANAGER),
            "StartTransientUnit",
            &(name, "fail", properties, auxiliary),
        )
        .await
        .map_err(|e| format!("StartTransientUnit {name}: {e}"))?;
    let job: OwnedObjectPath = reply
        .body()
        .deserialize()
        .map_err(|e| format!("StartTransientUnit's answer: {e}"))?;
    use futures::StreamExt;
    while let Some(message) = jobs.next().await {
        let Ok(message) = message else { continue };
        let Ok((_, path, _, result)) = message
            .body()
            .deserialize::<(u32, OwnedObjectPath, String, String)>()
        else {
            continue;
        };
        if path == job {
            let _ = connection
                .call_method(
                    Some(SYSTEMD),
                    MANAGER_PATH,
                    Some(MANAGER),
                    "Unsubscribe",
                    &(),
                )
                .await;
            return if result == "done" {
                Ok(())
            } else {
                Err(format!("systemd's job for {name} ended: {result}"))
            };
        }
    }
    Err("the D-Bus connection closed before systemd's job ended".to_string())
}
