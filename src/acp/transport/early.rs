//! The first line, answered before the async runtime exists: when stdin is a pipe or a socket
//! and its first line is an ACP v1 `initialize` request, the agent's answer is written at once,
//! from the main thread, with blocking reads and writes of its own.
//!
//! Owns: reading stdin up to its first newline (bounded), deciding whether that line is a
//! request this path may answer, and writing the answer. Must not touch: what the answer says
//! (the agent makes it, [`crate::acp::AcpBashAgent::initialize_response`]) and everything after
//! the first line: every byte read here is handed to the line transport as if it had just
//! arrived, so the SDK still sees the `initialize` (it picks the protocol face from it, and the
//! agent's handler remembers what the client renders). The transport then leaves out the SDK's
//! own response to that request, which the client already has
//! (`notes/2026-12-03-initialize-before-the-runtime.md`).
//!
//! Why: an agent's start-up is spawn → `initialize` answered, and building the multi-thread
//! runtime alone takes some 0.5 ms of it here. Everything else the runtime carries (the SDK,
//! the sessions) starts while the client reads the answer and writes its next request.

use std::os::fd::{AsRawFd, BorrowedFd};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{InitializeRequest, InitializeResponse};
use serde_json::Value;

/// How much is read while looking for the first newline. A client's `initialize` is a
/// kilobyte or two; past this, the line is left to the transport and its limits.
pub(super) const MAX_FIRST_LINE_BYTES: usize = 64 * 1024;

/// What was read from stdin before the runtime, and the request already answered, if any.
#[derive(Debug, Default)]
pub(super) struct FirstLine {
    /// Every byte read, the first line included: the transport reads these first.
    pub(super) read: Vec<u8>,
    /// The id of the `initialize` request answered here: the SDK's response to it is not
    /// written again.
    pub(super) answered: Option<Value>,
}

/// Reads `input` up to its first newline (blocking) and, when that line is an ACP v1
/// `initialize` request with an id, writes `answer`'s response to it on `output`. Anything
/// else (another message first, protocol version 2, a line that is not UTF-8 or JSON, no
/// newline within [`MAX_FIRST_LINE_BYTES`], the end of input, a read error) is left unanswered
/// for the transport, with the bytes read so far.
pub(super) fn answer_first_line(
    input: BorrowedFd<'_>,
    output: BorrowedFd<'_>,
    answer: impl FnOnce(&InitializeRequest) -> InitializeResponse,
) -> FirstLine {
    let mut first = FirstLine::default();
    let Some(end) = read_first_line(input, &mut first.read) else {
        return first;
    };
    let Some((id, request)) = v1_initialize(&first.read[..end]) else {
        return first;
    };
    let line = response_line(&id, &answer(&request));
    match write_all(output, line.as_bytes()) {
        Ok(()) => tracing::debug!("initialize answered before the runtime started"),
        // The client closed its end: the transport finds out too, and ends as at EOF.
        Err(error) => tracing::info!(%error, "writing the early initialize answer failed"),
    }
    // Answered or not written at all: either way the SDK's own answer must not follow it.
    first.answered = Some(id);
    first
}

/// Reads into `read` until it holds a newline; returns the first line's length (newline
/// excluded), or `None` at the end of input, on an error, or past the bound.
fn read_first_line(input: BorrowedFd<'_>, read: &mut Vec<u8>) -> Option<usize> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(at) = memchr::memchr(b'\n', read) {
            return Some(at);
        }
        if read.len() >= MAX_FIRST_LINE_BYTES {
            return None;
        }
        // SAFETY: reads at most `chunk.len()` bytes into the live buffer.
        let n = unsafe { libc::read(input.as_raw_fd(), chunk.as_mut_ptr().cast(), chunk.len()) };
        match n {
            0 => return None,
            n if n > 0 => read.extend_from_slice(&chunk[..n as usize]),
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            // Non-blocking (the launcher's choice) with nothing there yet, or a real error: the
            // transport waits for the line the usual way.
            _ => return None,
        }
    }
}

/// The id and the request, when `line` is an `initialize` request that the v1 face would get
/// as it is: JSON-RPC 2.0, a number or string id, protocol version 1 exactly (the SDK's router
/// rewrites other versions' parameters, and version 2 goes to the v2 face).
fn v1_initialize(line: &[u8]) -> Option<(Value, InitializeRequest)> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut message: serde_json::Map<String, Value> = serde_json::from_slice(line).ok()?;
    if message.get("jsonrpc")? != "2.0" || message.get("method")? != "initialize" {
        return None;
    }
    let id = message.get("id")?.clone();
    if !(id.is_number() || id.is_string()) {
        return None;
    }
    let request: InitializeRequest = serde_json::from_value(message.remove("params")?).ok()?;
    (request.protocol_version == ProtocolVersion::V1).then_some((id, request))
}

/// The JSON-RPC response line (with its newline) for request `id`.
fn response_line(id: &Value, response: &InitializeResponse) -> String {
    let mut line =
        serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": response }).to_string();
    line.push('\n');
    line
}

/// Writes all of `bytes`, waiting for room when `output` is non-blocking.
fn write_all(output: BorrowedFd<'_>, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: writes from a live slice, at most its length.
        let n = unsafe { libc::write(output.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if n >= 0 {
            bytes = &bytes[n as usize..];
            continue;
        }
        let error = std::io::Error::last_os_error();
        match error.kind() {
            std::io::ErrorKind::Interrupted => {}
            std::io::ErrorKind::WouldBlock => {
                let mut poll = libc::pollfd {
                    fd: output.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: polls one live pollfd.
                unsafe { libc::poll(&mut poll, 1, -1) };
            }
            _ => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::fd::{AsFd, OwnedFd};

    use agent_client_protocol::v1::schema::Implementation;
    use serde_json::json;

    use super::*;

    fn pipe() -> (OwnedFd, std::fs::File) {
        let (read, write) = nix::unistd::pipe().unwrap();
        (read, std::fs::File::from(write))
    }

    fn initialize(id: Value, version: u16) -> String {
        json!({
            "jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": { "protocolVersion": version, "clientCapabilities": {} }
        })
        .to_string()
    }

    /// Feeds `input` (then EOF) to the first-line reader and returns what it kept, what it
    /// wrote, and how often the agent was asked.
    fn run(input: &[u8]) -> (FirstLine, Vec<Value>, usize) {
        let (input_read, mut input_write) = pipe();
        input_write.write_all(input).unwrap();
        drop(input_write);
        let (output_read, output_write) = pipe();
        let mut asked = 0;
        let first = answer_first_line(input_read.as_fd(), output_write.as_fd(), |request| {
            asked += 1;
            InitializeResponse::new(request.protocol_version)
                .agent_info(Implementation::new("test-agent", "1.0"))
        });
        drop(output_write);
        let written = std::io::read_to_string(std::fs::File::from(output_read)).unwrap();
        let lines = written
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        (first, lines, asked)
    }

    #[test]
    fn a_v1_initialize_is_answered_and_every_byte_read_is_kept_for_the_transport() {
        let first_line = initialize(json!(7), 1);
        let input =
            format!("{first_line}\n{{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"session/new\"");
        let (first, written, asked) = run(input.as_bytes());
        assert_eq!(asked, 1);
        assert_eq!(first.answered, Some(json!(7)));
        assert_eq!(
            first.read,
            input.as_bytes(),
            "the pipelined rest is kept too"
        );
        assert_eq!(written.len(), 1);
        assert_eq!(written[0]["jsonrpc"], "2.0");
        assert_eq!(written[0]["id"], 7);
        assert_eq!(written[0]["result"]["protocolVersion"], 1);
        assert_eq!(written[0]["result"]["agentInfo"]["name"], "test-agent");
    }

    #[test]
    fn a_string_id_and_a_crlf_line_end_are_answered() {
        let input = format!("{}\r\n", initialize(json!("init-1"), 1));
        let (first, written, _) = run(input.as_bytes());
        assert_eq!(first.answered, Some(json!("init-1")));
        assert_eq!(written[0]["id"], "init-1");
    }

    #[test]
    fn a_line_that_arrives_in_pieces_is_answered_once_whole() {
        let line = format!("{}\n", initialize(json!(1), 1));
        let (input_read, mut input_write) = pipe();
        let (output_read, output_write) = pipe();
        let (head, tail) = line.as_bytes().split_at(10);
        input_write.write_all(head).unwrap();
        let tail = tail.to_vec();
        // The rest comes from another thread once the reader is blocked on the first piece.
        let writer = std::thread::spawn(move || {
            input_write.write_all(&tail).unwrap();
        });
        let first = answer_first_line(input_read.as_fd(), output_write.as_fd(), |request| {
            InitializeResponse::new(request.protocol_version)
        });
        writer.join().unwrap();
        drop(output_write);
        assert_eq!(first.answered, Some(json!(1)));
        assert_eq!(first.read, line.as_bytes());
        let written = std::io::read_to_string(std::fs::File::from(output_read)).unwrap();
        assert_eq!(written.lines().count(), 1);
    }

    #[test]
    fn anything_else_first_is_left_unanswered_with_its_bytes() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("protocol version 2 (the v2 face)", initialize(json!(1), 2).into_bytes()),
            ("protocol version 0", initialize(json!(1), 0).into_bytes()),
            ("a null id", initialize(Value::Null, 1).into_bytes()),
            ("an object id", initialize(json!({"a": 1}), 1).into_bytes()),
            (
                "no id (a notification)",
                br#"{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":1}}"#
                    .to_vec(),
            ),
            (
                "another method first",
                br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}"#.to_vec(),
            ),
            (
                "not JSON-RPC 2.0",
                br#"{"jsonrpc":"1.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#
                    .to_vec(),
            ),
            (
                "params the SDK would refuse",
                br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"one"}}"#
                    .to_vec(),
            ),
            ("not JSON", b"initialize please".to_vec()),
            ("not UTF-8", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}".to_vec()),
            ("a JSON array (a batch)", b"[1,2]".to_vec()),
            ("a blank line", b"   ".to_vec()),
        ];
        for (case, line) in cases {
            let mut input = line.clone();
            input.extend_from_slice(b"\nrest");
            let (first, written, asked) = run(&input);
            assert_eq!(first.answered, None, "{case}");
            assert_eq!(asked, 0, "{case}");
            assert!(written.is_empty(), "{case}: {written:?}");
            assert_eq!(first.read, input, "{case}: every byte read is kept");
        }
    }

    #[test]
    fn no_newline_before_the_end_of_input_leaves_the_line_to_the_transport() {
        let line = initialize(json!(1), 1);
        let (first, written, asked) = run(line.as_bytes());
        assert_eq!((first.answered, asked), (None, 0));
        assert!(written.is_empty());
        assert_eq!(first.read, line.as_bytes());
    }

    #[test]
    fn a_first_line_past_the_bound_is_not_read_to_its_end() {
        // A line of 1 MiB with no newline: reading stops at the bound, with the bytes kept,
        // and the writer is not left blocked for the reader's sake (it is only read that far).
        let (input_read, mut input_write) = pipe();
        let (_output_read, output_write) = pipe();
        let writer = std::thread::spawn(move || {
            let _ = input_write.write_all(&vec![b'x'; MAX_FIRST_LINE_BYTES + 4096]);
        });
        let first = answer_first_line(input_read.as_fd(), output_write.as_fd(), |_| {
            panic!("nothing to answer")
        });
        assert_eq!(first.answered, None);
        assert!(
            first.read.len() >= MAX_FIRST_LINE_BYTES,
            "{}",
            first.read.len()
        );
        assert!(first.read.len() < MAX_FIRST_LINE_BYTES + 4096);
        drop(input_read);
        writer.join().unwrap();
    }

    #[test]
    fn a_closed_output_still_counts_the_request_as_answered() {
        // The client went away before the answer: the SDK's own answer must not be written
        // after a failed one either (the transport ends at its first write anyway).
        let (input_read, mut input_write) = pipe();
        input_write
            .write_all(format!("{}\n", initialize(json!(3), 1)).as_bytes())
            .unwrap();
        let (output_read, output_write) = pipe();
        drop(output_read);
        let first = answer_first_line(input_read.as_fd(), output_write.as_fd(), |request| {
            InitializeResponse::new(request.protocol_version)
        });
        assert_eq!(first.answered, Some(json!(3)));
    }
}
