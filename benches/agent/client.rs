//! A minimal ACP client over the agent's real stdio: JSON-RPC 2.0, one JSON value per line.
//!
//! A reader thread stamps each line with the instant it was read, so that the latencies measured
//! are the wire's, not the bench's bookkeeping.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A line the agent wrote, with when the bench read it.
pub struct Line {
    pub at: Instant,
    pub value: Value,
}

impl Line {
    pub fn method(&self) -> Option<&str> {
        self.value.get("method").and_then(Value::as_str)
    }

    /// The `session/update` payload (`params.update`), if this is one.
    pub fn update(&self) -> Option<&Value> {
        (self.method() == Some("session/update"))
            .then(|| self.value.pointer("/params/update"))
            .flatten()
    }

    /// The live output this update carries, if any.
    pub fn terminal_output(&self) -> Option<&str> {
        self.update()?
            .pointer("/_meta/terminal_output/data")
            .and_then(Value::as_str)
    }
}

/// Zed's `initialize` parameters (the card path is on).
pub fn zed_initialize_params() -> Value {
    json!({
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": true, "writeTextFile": true},
            "terminal": true,
            "_meta": {"terminal_output": true}
        }
    })
}

pub struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    next_id: u64,
    pub pid: u32,
}

#[derive(Debug)]
pub struct ClientError(pub String);

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;

fn fail<T>(message: impl Into<String>) -> Result<T> {
    Err(ClientError(message.into()))
}

impl Agent {
    /// Starts `program` with `args` and `envs` added; its stderr goes to `stderr_log` when given, else nowhere.
    pub fn spawn(
        program: &Path,
        args: &[String],
        envs: &[(&str, &OsStr)],
        stderr_log: Option<&Path>,
    ) -> Result<Agent> {
        let stderr = match stderr_log {
            Some(path) => std::fs::File::create(path)
                .map(Stdio::from)
                .map_err(|e| ClientError(format!("{}: {e}", path.display())))?,
            None => Stdio::null(),
        };
        let mut child = Command::new(program)
            .args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| ClientError(format!("could not start {}: {e}", program.display())))?;
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::with_capacity(1 << 20, stdout);
            let mut buffer = String::new();
            loop {
                buffer.clear();
                match reader.read_line(&mut buffer) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        let at = Instant::now();
                        let value = serde_json::from_str(buffer.trim_end())
                            .unwrap_or_else(|e| json!({"unparsable": e.to_string()}));
                        if sender.send(Line { at, value }).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Agent {
            pid: child.id(),
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 1,
        })
    }

    fn write(&mut self, message: &Value) -> Result<Instant> {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        let stdin = self.stdin.as_mut().unwrap();
        let at = Instant::now();
        stdin
            .write_all(&line)
            .and_then(|()| stdin.flush())
            .map_err(|e| ClientError(format!("writing to the agent: {e}")))?;
        Ok(at)
    }

    /// Sends a request; returns its id and when it was written.
    pub fn send(&mut self, method: &str, params: Value) -> Result<(u64, Instant)> {
        let id = self.next_id;
        self.next_id += 1;
        let at =
            self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok((id, at))
    }

    /// The next line, or None after `timeout` or when the agent closed stdout.
    pub fn next_line(&mut self, timeout: Duration) -> Result<Option<Line>> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => {
                self.answer_agent_request(&line)?;
                Ok(Some(line))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => fail("the agent closed its stdout"),
        }
    }

    /// The agent asked us something (a permission, a file): this client offers nothing.
    fn answer_agent_request(&mut self, line: &Line) -> Result<()> {
        if let (Some(id), Some(_)) = (line.value.get("id"), line.method()) {
            let id = id.clone();
            self.write(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "the bench client offers no methods"}}))?;
        }
        Ok(())
    }

    /// Waits for the response to `id`, passing every other line to `on_other`.
    pub fn wait_response(
        &mut self,
        id: u64,
        timeout: Duration,
        mut on_other: impl FnMut(&Line),
    ) -> Result<Line> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return fail(format!("no response to request {id} within {timeout:?}"));
            }
            let Some(line) = self.next_line(left)? else {
                continue;
            };
            if line.method().is_none() && line.value.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(error) = line.value.get("error") {
                    return fail(format!("request {id} failed: {error}"));
                }
                return Ok(line);
            }
            on_other(&line);
        }
    }

    /// Sends a request and waits for its response.
    pub fn call(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<(Instant, Line)> {
        let (id, sent) = self.send(method, params)?;
        let line = self.wait_response(id, timeout, |_| {})?;
        Ok((sent, line))
    }

    pub fn initialize(&mut self) -> Result<(Instant, Line)> {
        self.call(
            "initialize",
            zed_initialize_params(),
            Duration::from_secs(10),
        )
    }

    /// Opens a session in `cwd`; returns its id.
    pub fn new_session(&mut self, cwd: &Path) -> Result<String> {
        let (_, line) = self.call(
            "session/new",
            json!({"cwd": cwd, "mcpServers": []}),
            Duration::from_secs(10),
        )?;
        match line
            .value
            .pointer("/result/sessionId")
            .and_then(Value::as_str)
        {
            Some(id) => Ok(id.to_string()),
            None => fail(format!("session/new answered {}", line.value)),
        }
    }

    /// Sends `script` as a prompt; returns the request id and when it was written.
    pub fn send_prompt(&mut self, session: &str, script: &str) -> Result<(u64, Instant)> {
        self.send(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": script}]}),
        )
    }

    /// Closes stdin (the agent's cue to shut down) and waits for it to exit, killing it after
    /// `grace`.
    pub fn shutdown(mut self, grace: Duration) {
        drop(self.stdin.take());
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
