//! The project's instructions for agents: `AGENTS.md` (and `CLAUDE.md`) from the session's
//! folder and its parents up to the repository's root, for the system prompt.
//!
//! Owns [`project_instructions`]: the folders from the repository's root (the nearest parent
//! with `.git`; the session's folder alone when there is none) down to the session's folder,
//! each one's `AGENTS.md` then `CLAUDE.md` (the same text once), outermost first so that the
//! nearest file is read last and wins. Bounded: [`MAX_INSTRUCTION_BYTES`] in all, cut at a
//! line end with a line that says where and how to read the rest. Read by the agent itself,
//! outside the sandbox, so only regular files are read: a symlink (which could point at a
//! secret outside the project) and a FIFO (which would block) are skipped. Must not touch:
//! HTTP, ACP.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The most bytes of instructions put into the system prompt (all files together): 32 KiB,
/// about 8 000 tokens, as Codex bounds its `AGENTS.md`.
pub const MAX_INSTRUCTION_BYTES: usize = 32 * 1024;

/// The file names read in each folder, in order.
pub const INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// The folders whose instructions apply to `dir`: from the repository's root down to `dir`.
fn folders(dir: &Path) -> Vec<PathBuf> {
    let mut chain = Vec::new();
    for folder in dir.ancestors() {
        chain.push(folder.to_path_buf());
        if folder.join(".git").exists() {
            chain.reverse();
            return chain;
        }
    }
    // No repository: the session's folder only (never the whole file system's parents).
    vec![dir.to_path_buf()]
}

/// The text of `path` when it is a regular file (not through a symlink), at most `max` bytes
/// read (plus one, to know whether there was more).
fn read_regular(path: &Path, max: usize) -> Option<(String, bool)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    // No symlink swapped in after the check; never block (a FIFO swapped in).
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.file_type().is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max as u64 + 1).read_to_end(&mut bytes).ok()?;
    let more = bytes.len() > max;
    bytes.truncate(max);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Some((text, more))
}

/// The instructions that apply to `dir`, as a section of the system prompt (empty when there
/// are none).
pub fn project_instructions(dir: &Path) -> String {
    let mut out = String::new();
    let mut seen: Vec<String> = Vec::new();
    let mut room = MAX_INSTRUCTION_BYTES;
    for folder in folders(dir) {
        for name in INSTRUCTION_FILES {
            let path = folder.join(name);
            if room == 0 {
                break;
            }
            let Some((text, more)) = read_regular(&path, room) else {
                continue;
            };
            if text.trim().is_empty() || seen.contains(&text) {
                continue;
            }
            seen.push(text.clone());
            let (kept, cut) = if more {
                // Cut at a line end when there is one.
                let end = text.rfind('\n').map_or(text.len(), |at| at + 1);
                (&text[..end], true)
            } else {
                (text.as_str(), false)
            };
            room = room.saturating_sub(kept.len());
            out.push_str(&format!(
                "\n<instructions file=\"{}\">\n{}",
                path.display(),
                kept
            ));
            if !kept.ends_with('\n') {
                out.push('\n');
            }
            if cut {
                out.push_str(&format!(
                    "[… cut here: the instructions are bounded to {} KiB in all; read the rest \
                     with `tail -c +{} {}`]\n",
                    MAX_INSTRUCTION_BYTES / 1024,
                    kept.len() + 1,
                    path.display()
                ));
                room = 0;
            }
            out.push_str("</instructions>\n");
        }
    }
    if out.is_empty() {
        return out;
    }
    format!(
        "\n# The project's instructions\n\nThe project's AGENTS.md / CLAUDE.md files (from the \
         repository's root down to the current folder; a nearer file wins where they \
         disagree). Follow them unless the user says otherwise.\n{out}"
    )
}
