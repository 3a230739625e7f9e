//! An independent judge of terminal output: the `vte` crate's VT parser (the one Alacritty
//! uses), not acp-bash's own scanners. See `notes/2026-11-30-vte-test-oracle.md`.

use vte::{Params, Parser, Perform};

/// What a terminal's parser did with some bytes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Print(char),
    Execute(u8),
    /// Any escape sequence that was completed (CSI, ESC, OSC, DCS hook/unhook).
    Sequence(String),
}

#[derive(Default)]
struct Recorder(Vec<Event>);

impl Perform for Recorder {
    fn print(&mut self, c: char) {
        self.0.push(Event::Print(c));
    }
    fn execute(&mut self, byte: u8) {
        self.0.push(Event::Execute(byte));
    }
    fn hook(&mut self, _: &Params, intermediates: &[u8], _: bool, action: char) {
        self.0
            .push(Event::Sequence(format!("DCS {intermediates:?} {action}")));
    }
    fn unhook(&mut self) {
        self.0.push(Event::Sequence("DCS end".into()));
    }
    fn osc_dispatch(&mut self, params: &[&[u8]], _: bool) {
        self.0.push(Event::Sequence(format!("OSC {params:?}")));
    }
    fn csi_dispatch(&mut self, _: &Params, intermediates: &[u8], _: bool, action: char) {
        self.0
            .push(Event::Sequence(format!("CSI {intermediates:?} {action}")));
    }
    fn esc_dispatch(&mut self, intermediates: &[u8], _: bool, byte: u8) {
        self.0
            .push(Event::Sequence(format!("ESC {intermediates:?} {byte}")));
    }
}

/// Everything a fresh VT parser does with `bytes`.
pub fn events(bytes: &[u8]) -> Vec<Event> {
    let mut parser = Parser::new();
    let mut recorder = Recorder::default();
    parser.advance(&mut recorder, bytes);
    recorder.0
}

/// Whether a fresh terminal parser is back in its ground state after `bytes`: a sentinel
/// printable character fed after them is printed (not swallowed as the final byte of an escape
/// sequence, a string's content, or a continuation of a character).
pub fn ends_in_ground(bytes: &[u8]) -> bool {
    let mut input = bytes.to_vec();
    input.push(b'Z');
    events(&input).last() == Some(&Event::Print('Z'))
}

/// What a terminal would print from `text`, with the line controls `\n`, `\r` and `\t` kept
/// and every other control and every escape sequence dropped.
pub fn printed_text(text: &str) -> String {
    events(text.as_bytes())
        .into_iter()
        .filter_map(|event| match event {
            Event::Print(c) => Some(c),
            Event::Execute(b @ (b'\n' | b'\r' | b'\t')) => Some(b as char),
            _ => None,
        })
        .collect()
}

/// Well-formed escape sequences of every family a program prints, for generators.
pub const SEQUENCES: &[&str] = &[
    "\x1b[1;31m",             // SGR
    "\x1b[0m",                // SGR reset
    "\x1b[38:5:196m",         // SGR with sub-parameters
    "\x1b[2 q",               // DECSCUSR: a CSI with an intermediate byte
    "\x1b[?25h",              // private-mode CSI
    "\x1b[>c",                // secondary device attributes
    "\x1b[2K",                // erase line
    "\x1b]0;title\x07",       // OSC ended by BEL
    "\x1b]8;;http://a\x1b\\", // OSC hyperlink ended by ST
    "\x1bP1$r0m\x1b\\",       // DCS ended by ST
    "\x1b_apc\x1b\\",         // APC ended by ST
    "\x1b(B",                 // designate G0 (an intermediate, then the final)
    "\x1b#8",                 // DECALN
    "\x1b7",                  // save cursor
    "\x1bM",                  // reverse index
];
