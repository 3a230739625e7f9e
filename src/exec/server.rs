//! A long-lived program of the session's, confined like its commands, that the agent talks to
//! over pipes: an MCP stdio server (`crate::mcp`).
//!
//! Owns: starting such a program on the engine's own spawn path (the session's mode and roots,
//! [`crate::sandbox::confine`], [`super::process::start`] with the session's sandbox, the
//! scrubbed environment of a command plus the variables given, the session's current
//! directory), handing back its stdin and stdout as pipes and its stderr as a third, and killing
//! its process group when it is dropped. Must not touch: what is said over the pipes.
//!
//! The program is started by bash (`exec "$@" <&3 >&4`): the sandbox gives a command stdin
//! from `/dev/null` and one pipe for stdout and stderr, and passes other fds by number; bash
//! moves the two pipes to 0 and 1 and finds the program on the session's `PATH`. It gets no
//! timeout: it lives until [`ServerProcess`] is dropped (the session ends) or it exits.

use std::ffi::OsString;
use std::os::fd::OwnedFd;

use super::process;
use super::{RunRequest, Session};
use crate::sandbox::{self, Launch};

/// A started server program. Dropping it kills its process group (and, where the sandbox
/// gives it a PID namespace, everything it started).
#[non_exhaustive]
pub struct ServerProcess {
    started: Option<Running>,
}

/// A started server and its pipes: what the agent writes (its stdin), what it reads (its
/// stdout), and its stderr (with bash's own complaints, such as a command not found).
pub type StartedServer = (
    ServerProcess,
    tokio::net::unix::pipe::Sender,
    tokio::net::unix::pipe::Receiver,
    tokio::net::unix::pipe::Receiver,
);

/// What keeps the program: its handle, its group, the session's sandbox helpers in use.
struct Running {
    child: process::Child,
    pgid: i32,
    _in_use: Option<sandbox::InUse>,
    /// The session's sandbox: its network allowlist keeps this program's own proxy listener
    /// (where it has a namespace of its own) until it ends.
    sandbox: std::sync::Arc<sandbox::SessionSandbox>,
}

impl ServerProcess {
    /// The process group (the pid the sandbox handed back).
    pub fn pgid(&self) -> i32 {
        self.started.as_ref().map_or(0, |started| started.pgid)
    }

    /// Waits for the program to exit (cancel-safe).
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self.started.as_mut() {
            Some(started) => started.child.wait().await,
            None => std::future::pending().await,
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(started) = self.started.take() {
            process::signal_group(started.pgid, libc::SIGKILL);
            sandbox::command_ended();
            if let Some(network) = &started.sandbox.network {
                network.ended(started.pgid);
            }
        }
    }
}

impl Session {
    /// Starts `program` with `args` in the session's current directory and mode, confined as a
    /// command is, with a command's scrubbed environment plus `env` (which wins). `Err` says
    /// why it could not start (the sandbox refused, the spawn failed); a program that is not
    /// found starts, prints bash's complaint on stderr and exits 127.
    pub async fn start_server(
        &self,
        program: &str,
        args: &[String],
        env: &[(String, String)],
    ) -> std::io::Result<StartedServer> {
        let inner = &self.inner;
        let engine = &inner.engine.inner;
        let config = &engine.config;
        let mut request = RunRequest::new("");
        for (name, value) in env {
            request = request.set_env(name, value);
        }
        let mut env: Vec<(OsString, OsString)> = super::run::run_env(inner, &request);
        let mut bash_args: Vec<OsString> = vec![
            "-c".into(),
            "exec \"$@\" <&3 >&4 3<&- 4>&-".into(),
            "mcp-server".into(),
            program.into(),
        ];
        bash_args.extend(args.iter().map(OsString::from));
        let launch = Launch::new(engine.bash.clone(), bash_args);
        let mode = self.mode();
        if config.require_sandbox {
            if let Some(refused) = sandbox::refusal(mode) {
                return Err(std::io::Error::other(refused));
            }
        }
        let roots = inner.roots(mode);
        // Workspace mode's allowlist, as for a command: the program finds the proxy on its
        // namespace's loopback, and reaches nothing else.
        let proxied = mode == sandbox::Mode::Workspace
            && roots.proxied_network
            && sandbox::network_proxied_here(sandbox::Support::current()).is_ok();
        if proxied {
            for (name, value) in crate::netproxy::proxy_env(crate::netproxy::PROXY_PORT) {
                env.retain(|(existing, _)| existing != name);
                env.push((name.into(), value.into()));
            }
        }
        let limits = config.limits;
        let confined =
            tokio::task::spawn_blocking(move || sandbox::confine(launch, mode, &roots, limits))
                .await
                .map_err(|error| {
                    std::io::Error::other(format!("the sandbox setup failed: {error}"))
                })?;
        // The program reads `server_in` as fd 3 (its stdin) and writes `server_out` as fd 4
        // (its stdout); our ends are the others.
        let (server_in, to_server) = std::io::pipe()?;
        let (from_server, server_out) = std::io::pipe()?;
        let pass: Vec<(OwnedFd, i32)> = vec![(server_in.into(), 3), (server_out.into(), 4)];
        let process::Started {
            child,
            pgid,
            output,
            _in_use,
            ..
        } = process::start(
            confined,
            env,
            self.cwd(),
            pass,
            Some(inner.sandbox.clone()),
            process::ForkOn::SpawnerThread,
        )
        .await?;
        let running = Running {
            child,
            pgid,
            _in_use,
            sandbox: inner.sandbox.clone(),
        };
        let stdin = tokio::net::unix::pipe::Sender::from_owned_fd(OwnedFd::from(to_server))?;
        let stdout = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(from_server))?;
        let process = ServerProcess {
            started: Some(running),
        };
        Ok((process, stdin, stdout, output))
    }
}
