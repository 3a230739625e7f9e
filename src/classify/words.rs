//! A script as literal words, from tree-sitter-bash's parse: `a && b | c` is two segments
//! (joined by `&&`), the second a pipeline of two commands, each a list of words as bash would
//! pass them to the program. Anything whose words bash would only know when it runs (a
//! variable, a substitution, a glob, a tilde, a redirection, an assignment) makes the script
//! unclassifiable ([`None`]).

use tree_sitter::{Node, Parser};

/// The words of one command, its name first.
pub(super) type Command = Vec<String>;

/// `script`'s `&&`-joined segments, each a pipeline of commands; `None` when the script is
/// anything else (comments aside).
pub(super) fn parse(script: &str) -> Option<Vec<Vec<Command>>> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .ok()?;
    let tree = parser.parse(script, None)?;
    let root = tree.root_node();
    if root.has_error() || root.kind() != "program" {
        return None;
    }
    // `cmd &` runs in the background: a terminal, whatever it runs.
    if children(root).any(|node| !node.is_named() && !matches!(node.kind(), ";" | "\n")) {
        return None;
    }
    let source = script.as_bytes();
    if !blank_between(root, source, 0, source.len()) {
        return None;
    }
    let mut statements = named_children(root).filter(|node| node.kind() != "comment");
    let statement = statements.next()?;
    if statements.next().is_some() {
        return None;
    }
    let mut segments = Vec::new();
    segments_of(statement, source, &mut segments)?;
    Some(segments)
}

fn named_children(node: Node<'_>) -> impl Iterator<Item = Node<'_>> {
    (0..node.named_child_count()).filter_map(move |i| node.named_child(i))
}

fn children(node: Node<'_>) -> impl Iterator<Item = Node<'_>> {
    (0..node.child_count()).filter_map(move |i| node.child(i))
}

/// Appends `node`'s `&&`-joined segments.
fn segments_of(node: Node<'_>, source: &[u8], out: &mut Vec<Vec<Command>>) -> Option<()> {
    match node.kind() {
        "list" => {
            if !blank_between(node, source, node.start_byte(), node.end_byte()) {
                return None;
            }
            for child in children(node) {
                if child.is_named() {
                    if child.kind() == "comment" {
                        continue;
                    }
                    segments_of(child, source, out)?;
                } else if child.kind() != "&&" {
                    return None;
                }
            }
            Some(())
        }
        "pipeline" | "command" => {
            let mut pipeline = Vec::new();
            pipeline_of(node, source, &mut pipeline)?;
            out.push(pipeline);
            Some(())
        }
        _ => None,
    }
}

/// Appends the commands of `node` (a pipeline of `|` only, or one command).
fn pipeline_of(node: Node<'_>, source: &[u8], out: &mut Vec<Command>) -> Option<()> {
    match node.kind() {
        "pipeline" => {
            if !blank_between(node, source, node.start_byte(), node.end_byte()) {
                return None;
            }
            for child in children(node) {
                if child.is_named() {
                    pipeline_of(child, source, out)?;
                } else if child.kind() != "|" {
                    return None;
                }
            }
            Some(())
        }
        "command" => {
            out.push(command_words(node, source)?);
            Some(())
        }
        _ => None,
    }
}

/// Whether everything of `source[start..end]` outside `node`'s children is blank (spaces,
/// tabs, newlines, escaped newlines): the grammar left out nothing bash reads (`f\<tab>`, which
/// bash makes part of the word `f<tab>`, is dropped from tree-sitter-bash's word).
fn blank_between(node: Node<'_>, source: &[u8], start: usize, end: usize) -> bool {
    let mut at = start;
    for child in children(node) {
        match source.get(at..child.start_byte()) {
            Some(gap) if blank(gap) => at = child.end_byte(),
            _ => return false,
        }
    }
    source.get(at..end).is_some_and(blank)
}

/// Only spaces, tabs, newlines and escaped newlines.
fn blank(gap: &[u8]) -> bool {
    let mut bytes = gap.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b' ' | b'\t' | b'\n' => {}
            b'\\' if bytes.next() == Some(&b'\n') => {}
            _ => return false,
        }
    }
    true
}

/// The words of a simple command made of literal words only.
fn command_words(node: Node<'_>, source: &[u8]) -> Option<Command> {
    let mut words = Vec::new();
    let mut end = None;
    for child in children(node) {
        if !child.is_named() {
            return None;
        }
        // Words are apart in the source: where the grammar splits what bash joins into one
        // word (`f'\n'\$x`), the words are not bash's.
        if let Some(end) = end {
            let gap = source.get(end..child.start_byte())?;
            if gap.is_empty() || !blank(gap) {
                return None;
            }
        }
        end = Some(child.end_byte());
        let word = match child.kind() {
            "command_name" => {
                let mut inner = named_children(child);
                let name = inner.next()?;
                if inner.next().is_some() {
                    return None;
                }
                literal(name, source)?
            }
            _ => literal(child, source)?,
        };
        words.push(word);
    }
    (!words.is_empty()).then_some(words)
}

/// The word bash makes of `node`, when it is literal.
fn literal(node: Node<'_>, source: &[u8]) -> Option<String> {
    let text = node.utf8_text(source).ok()?;
    match node.kind() {
        "word" | "number" => unquoted(text),
        "raw_string" => Some(text.strip_prefix('\'')?.strip_suffix('\'')?.to_string()),
        "string" => {
            if named_children(node).any(|child| child.kind() != "string_content") {
                return None;
            }
            double_quoted(text.strip_prefix('"')?.strip_suffix('"')?)
        }
        "concatenation" => {
            let mut word = String::new();
            let mut end = node.start_byte();
            for part in children(node) {
                // One word: its parts touch.
                if !part.is_named() || part.start_byte() != end {
                    return None;
                }
                end = part.end_byte();
                word.push_str(&literal(part, source)?);
            }
            Some(word)
        }
        _ => None,
    }
}

/// An unquoted word's value: backslashes escape the next character. `None` when bash would
/// expand it: a `$`, a backtick, a glob (`*`, `?`, `[`), braces or a tilde.
fn unquoted(text: &str) -> Option<String> {
    let mut word = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(escaped) => word.push(escaped),
                // The grammar ended the word on an escaped blank (`f\<tab>`): not bash's word.
                None => return None,
            },
            '$' | '`' | '*' | '?' | '[' | ']' | '{' | '}' | '~' | '(' | ')' | '<' | '>' | '&'
            | ';' | '|' | '\'' | '"' | ' ' | '\t' | '\n' => return None,
            c => word.push(c),
        }
    }
    Some(word)
}

/// A double-quoted string's value: `\` escapes only `$`, `` ` ``, `"`, `\` and a newline.
/// `None` when it holds an expansion.
fn double_quoted(text: &str) -> Option<String> {
    let mut word = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some('$' | '`' | '"' | '\\') => word.push(chars.next()?),
                Some('\n') => {
                    chars.next();
                }
                _ => word.push('\\'),
            },
            '$' | '`' => return None,
            c => word.push(c),
        }
    }
    Some(word)
}
