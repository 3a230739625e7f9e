//! The incoming side of the line transport: splits the client's bytes into lines and hands the
//! SDK only lines it can use.
//!
//! Owns: the line length limit (a longer line is discarded as it streams in, never buffered
//! whole), lines that are not UTF-8 or not JSON (answered here with a parse error that carries
//! the request's id and never the line itself), blank lines (skipped), and arrival order around
//! `initialize` (the next line waits until its response is queued, so that a request pipelined
//! behind it is not refused as "before initialization"). Must not touch: what a valid message
//! means (the SDK and the agent decide).

use std::io;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::envelope::Envelope;
use super::outgoing::Shared;
use super::TransportLimits;

/// How much is read from the client at a time.
const READ_BYTES: usize = 64 * 1024;
/// How much of a discarded line is kept to find its id.
const HEAD_BYTES: usize = 64 * 1024;

/// JSON-RPC's "Parse error" and "Invalid request" codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// Reads lines from the client; see the module doc.
pub(super) struct LineReader<R> {
    reader: R,
    shared: Arc<Shared>,
    limits: TransportLimits,
    /// What was read and not yet handed out, from `consumed` on. It is reused from read to read
    /// (reads go into its spare capacity, which is never zeroed), and a line is copied out at its
    /// own length: a 64 KiB buffer zeroed per read and carried away by each line cost 131 k
    /// instructions and 16 pages before the first answer (`notes/2026-12-02-start-up.md`).
    buffer: Vec<u8>,
    /// Where the bytes not yet handed out start in `buffer`.
    consumed: usize,
    /// How far `buffer` is known to hold no newline (never below `consumed`).
    scanned: usize,
    /// Set while the current line is being discarded for its length.
    discarding: Option<Discarded>,
    /// 1-based number of the line being read.
    line: u64,
    eof: bool,
}

struct Discarded {
    head: Vec<u8>,
    bytes: u64,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(super) fn new(reader: R, shared: Arc<Shared>, limits: TransportLimits) -> Self {
        LineReader {
            reader,
            shared,
            limits,
            buffer: Vec::new(),
            consumed: 0,
            scanned: 0,
            discarding: None,
            line: 1,
            eof: false,
        }
    }

    /// The lines as the SDK's `Lines` transport wants them.
    pub(super) fn into_stream(self) -> impl futures::Stream<Item = io::Result<String>> {
        futures::stream::unfold(self, |mut reader| async move {
            let next = reader.next_line().await?;
            Some((next, reader))
        })
    }

    /// The next line for the SDK, `None` at the end of input.
    pub(super) async fn next_line(&mut self) -> Option<io::Result<String>> {
        loop {
            self.shared.reading_allowed().await;
            if let Some(line) = self.take_line() {
                if let Some(line) = self.accept(line) {
                    return Some(Ok(line));
                }
                continue;
            }
            if self.eof {
                return None;
            }
            if let Err(error) = self.fill().await {
                return Some(Err(error));
            }
        }
    }

    /// Reads once into the buffer, or past the line being discarded.
    async fn fill(&mut self) -> io::Result<()> {
        // What was handed out goes first (one move of the rest per read, not one per line).
        if self.consumed > 0 {
            self.buffer.drain(..self.consumed);
            self.scanned -= self.consumed;
            self.consumed = 0;
        }
        // A buffer that grew for a long line does not stay that big once the line is out.
        if self.buffer.len() < READ_BYTES && self.buffer.capacity() > 2 * READ_BYTES {
            self.buffer.shrink_to(READ_BYTES);
        }
        self.buffer.reserve(READ_BYTES);
        let read = loop {
            match self.reader.read_buf(&mut self.buffer).await {
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        }?;
        if read == 0 {
            self.eof = true;
            // A last line without a newline is still a line (as for the SDK's reader).
            if !self.buffer.is_empty() || self.discarding.is_some() {
                self.buffer.push(b'\n');
            }
            return Ok(());
        }
        if let Some(discarded) = &mut self.discarding {
            // Only the part up to a newline belongs to the discarded line.
            match memchr::memchr(b'\n', &self.buffer) {
                Some(_) => {}
                None => {
                    discarded.bytes += self.buffer.len() as u64;
                    self.buffer.clear();
                    self.scanned = 0;
                }
            }
        }
        Ok(())
    }

    /// Takes the next whole line out of the buffer (its newline included), or starts
    /// discarding the line when it grew past the limit without one.
    fn take_line(&mut self) -> Option<Vec<u8>> {
        let from = self.scanned.max(self.consumed);
        match memchr::memchr(b'\n', &self.buffer[from..]) {
            Some(at) => {
                let end = from + at + 1;
                let line = self.buffer[self.consumed..end].to_vec();
                if end == self.buffer.len() {
                    // All handed out: a buffer that grew for a long line is let go.
                    if self.buffer.capacity() > 2 * READ_BYTES {
                        self.buffer = Vec::new();
                    }
                    self.buffer.clear();
                    self.consumed = 0;
                    self.scanned = 0;
                } else {
                    self.consumed = end;
                    self.scanned = end;
                }
                Some(line)
            }
            None => {
                self.scanned = self.buffer.len();
                let pending = self.buffer.len() - self.consumed;
                if self.discarding.is_none() && pending > self.limits.max_line_bytes {
                    let head = self.buffer[self.consumed..][..HEAD_BYTES.min(pending)].to_vec();
                    self.discarding = Some(Discarded {
                        head,
                        bytes: pending as u64,
                    });
                    self.buffer = Vec::new();
                    self.consumed = 0;
                    self.scanned = 0;
                }
                None
            }
        }
    }

    /// What becomes of one whole line: the line for the SDK, or `None` when it was skipped or
    /// answered here.
    fn accept(&mut self, mut line: Vec<u8>) -> Option<String> {
        let number = self.line;
        self.line += 1;
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let discarded = self.discarding.take();
        if discarded.is_some() || line.len() > self.limits.max_line_bytes {
            let (head, bytes) = match &discarded {
                Some(discarded) => (&discarded.head[..], discarded.bytes + line.len() as u64),
                None => (&line[..HEAD_BYTES.min(line.len())], line.len() as u64),
            };
            self.reject(
                head,
                INVALID_REQUEST,
                format!(
                    "line {number} is {bytes} bytes, over the limit of {} bytes per message, and \
                     was discarded; a prompt may be at most {} bytes (acp-bash --max-prompt-bytes){}",
                    self.limits.max_line_bytes,
                    self.limits.max_prompt_bytes,
                    match self.limits.image_bytes {
                        0 => String::new(),
                        room => format!(", with images of at most {} MiB in all", room >> 20),
                    }
                ),
                json!({ "line": number, "bytes": bytes, "maxLineBytes": self.limits.max_line_bytes }),
            );
            return None;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let line = match String::from_utf8(line) {
            Ok(line) => line,
            Err(error) => {
                let at = error.utf8_error().valid_up_to();
                let bytes = error.into_bytes();
                self.reject(
                    &bytes,
                    PARSE_ERROR,
                    format!(
                        "line {number} is not valid UTF-8 (byte 0x{:02X} at offset {at}): JSON-RPC \
                         messages must be UTF-8 text; the line was discarded",
                        bytes[at]
                    ),
                    json!({ "line": number, "offset": at }),
                );
                return None;
            }
        };
        if let Err(error) = serde_json::from_str::<serde::de::IgnoredAny>(&line) {
            self.reject(
                line.as_bytes(),
                PARSE_ERROR,
                format!("line {number} is not valid JSON: {error}"),
                json!({ "line": number, "bytes": line.len() }),
            );
            return None;
        }
        if memchr::memmem::find(line.as_bytes(), b"\"initialize\"").is_some() {
            let envelope = Envelope::read(line.as_bytes());
            if let (Some("initialize"), Some(id)) = (envelope.method.as_deref(), envelope.id) {
                if !id.is_null() {
                    self.shared.await_response(id);
                }
            }
        }
        Some(line)
    }

    /// Answers a discarded line with an error, under the request's id when its start shows one
    /// (else `null`, as JSON-RPC has it); a line that shows itself to be a notification gets no
    /// answer.
    fn reject(&self, head: &[u8], code: i64, message: String, data: Value) {
        let envelope = Envelope::read(head);
        tracing::warn!(%message, "discarded an input line");
        if envelope.id.is_none() && envelope.method.is_some() && envelope.complete {
            return;
        }
        let response = json!({
            "jsonrpc": "2.0",
            "id": envelope.id.unwrap_or(Value::Null),
            "error": { "code": code, "message": message, "data": data },
        });
        self.shared.push(response.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Feeds `pieces` through a reader with `limits`, returns the lines it yields and the lines
    /// it queued as answers.
    fn read_all(pieces: Vec<Vec<u8>>, limits: TransportLimits) -> (Vec<String>, Vec<Value>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let shared = Shared::new(limits.clone());
            let (mut client, agent) = tokio::io::duplex(1024);
            let feeder = tokio::spawn(async move {
                for piece in pieces {
                    tokio::io::AsyncWriteExt::write_all(&mut client, &piece)
                        .await
                        .unwrap();
                }
            });
            let mut reader = LineReader::new(agent, shared.clone(), limits);
            let mut lines = Vec::new();
            while let Some(line) = reader.next_line().await {
                lines.push(line.unwrap());
            }
            feeder.await.unwrap();
            (lines, shared.queued_json())
        })
    }

    fn limits(max_line_bytes: usize) -> TransportLimits {
        TransportLimits {
            max_line_bytes,
            ..TransportLimits::default()
        }
    }

    #[test]
    fn bad_lines_are_answered_with_their_id_and_good_ones_pass() {
        let input = b"{\"id\":1,\"method\":\"a\"}\n\n   \r\n{\"id\":2,\"method\":\"p\",\"params\":\"caf\xe9\"}\n{\"id\":3,\"method\":\"b\"}\r\n{\"id\":4,\"method\"\n".to_vec();
        let (lines, answers) = read_all(vec![input], limits(1000));
        assert_eq!(
            lines,
            [r#"{"id":1,"method":"a"}"#, r#"{"id":3,"method":"b"}"#]
        );
        assert_eq!(answers.len(), 2, "{answers:?}");
        assert_eq!(answers[0]["id"], 2);
        assert_eq!(answers[0]["error"]["code"], PARSE_ERROR);
        assert!(answers[0]["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("line 4 is not valid UTF-8 (byte 0xE9 at offset 34)"));
        assert_eq!(answers[1]["id"], 4);
        assert_eq!(answers[1]["error"]["code"], PARSE_ERROR);
    }

    #[test]
    fn a_long_line_is_discarded_as_it_streams_and_answered_once() {
        let long = format!(
            "{{\"id\":\"big\",\"method\":\"p\",\"params\":\"{}\"}}\n",
            "x".repeat(300_000)
        );
        let pieces: Vec<Vec<u8>> = long.as_bytes().chunks(7000).map(<[u8]>::to_vec).collect();
        let mut input = pieces;
        input.push(b"{\"id\":5}\n".to_vec());
        let (lines, answers) = read_all(input, limits(100_000));
        assert_eq!(lines, [r#"{"id":5}"#]);
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0]["id"], "big");
        assert_eq!(answers[0]["error"]["code"], INVALID_REQUEST);
        assert_eq!(answers[0]["error"]["data"]["bytes"], long.len() - 1);
    }

    /// The read buffer is reused, not handed out: each line comes out at its own length, and a
    /// long line accepted (under the limit) does not leave the buffer that big for the next reads.
    #[test]
    fn lines_come_out_at_their_own_size_and_the_buffer_shrinks_after_a_long_line() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let limits = limits(10 << 20);
            let shared = Shared::new(limits.clone());
            let (mut client, agent) = tokio::io::duplex(64 * 1024);
            let long = format!("{{\"id\":1,\"params\":\"{}\"}}\n", "x".repeat(1 << 20));
            let feeder = tokio::spawn(async move {
                use tokio::io::AsyncWriteExt as _;
                client.write_all(b"{\"id\":0}\n").await.unwrap();
                client.write_all(long.as_bytes()).await.unwrap();
                client.write_all(b"{\"id\":2}\n").await.unwrap();
            });
            let mut reader = LineReader::new(agent, shared, limits);
            let first = reader.next_line().await.unwrap().unwrap();
            assert_eq!(first, r#"{"id":0}"#);
            assert!(
                first.capacity() < 64,
                "a short line carries {} bytes",
                first.capacity()
            );
            let long = reader.next_line().await.unwrap().unwrap();
            assert_eq!(long.len(), (1 << 20) + 20);
            let last = reader.next_line().await.unwrap().unwrap();
            assert_eq!(last, r#"{"id":2}"#);
            assert!(
                reader.buffer.capacity() <= 2 * READ_BYTES,
                "the buffer kept {} bytes after the long line",
                reader.buffer.capacity()
            );
            feeder.await.unwrap();
            assert!(reader.next_line().await.is_none());
        });
    }

    /// Splits `lines` at newlines the way a reader with no limits would: the oracle.
    fn expected_lines(input: &[u8]) -> Vec<String> {
        input
            .split(|b| *b == b'\n')
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
            .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
            .map(|line| String::from_utf8(line.to_vec()).unwrap())
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// However the bytes are cut into reads, the reader yields the same lines as splitting
        /// the whole input at newlines, and answers each bad line exactly once.
        #[test]
        fn the_lines_do_not_depend_on_how_the_input_was_cut(
            lines in prop::collection::vec(prop_oneof![
                "[a-z ]{0,20}".prop_map(|s| serde_json::to_string(&s).unwrap()),
                Just(String::new()),
                Just("{\"id\":9,".to_string()),
                "[a-z]{200,300}".prop_map(|s| serde_json::to_string(&s).unwrap()),
            ], 0..12),
            cuts in prop::collection::vec(0usize..4000, 0..10),
            crlf in any::<bool>(),
        ) {
            let newline = if crlf { "\r\n" } else { "\n" };
            let input: String = lines.iter().map(|l| format!("{l}{newline}")).collect();
            let input = input.into_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(input.len())).collect();
            cuts.sort();
            let mut pieces = Vec::new();
            let mut start = 0;
            for end in cuts.into_iter().chain([input.len()]) {
                pieces.push(input[start..end].to_vec());
                start = end;
            }
            let (got, answers) = read_all(pieces, limits(150));
            let expected: Vec<String> = expected_lines(&input)
                .into_iter()
                .filter(|l| l.len() <= 150 && l != "{\"id\":9,")
                .collect();
            let bad = lines.iter().filter(|l| l.len() > 150 || *l == "{\"id\":9,").count();
            prop_assert_eq!(got, expected);
            prop_assert_eq!(answers.len(), bad);
        }

        /// Arbitrary bytes never stop the reader or panic, and nothing it yields is anything
        /// but valid JSON.
        #[test]
        fn arbitrary_bytes_yield_only_json_lines(
            input in prop::collection::vec(any::<u8>(), 0..600),
            cut in 0usize..600,
        ) {
            let cut = cut.min(input.len());
            let (got, _) = read_all(vec![input[..cut].to_vec(), input[cut..].to_vec()], limits(64));
            for line in got {
                prop_assert!(serde_json::from_str::<Value>(&line).is_ok(), "{line:?}");
            }
        }
    }
}
