//! What a command changed, on the wire: a completed tool call of `kind: edit` that follows the
//! command's card ("Changed 3 files"), one `diff` content item per text file (`path`, `oldText`
//! `null` for a new file, `newText`), a text line per file that is not diffed (binary, over
//! 1 MiB, a symlink) and per counted folder, and `locations`; a client without the terminal
//! card also gets the bounded ```` ```diff ```` block. On ACP v2, one `diff` with `changes[]`
//! (add, delete, modify, move) and the Git `patch`. Pure. Must not touch: tracking, diffing
//! (the presentation's).

use agent_client_protocol::v1::schema::{
    Content, Diff, SessionUpdate, ToolCall, ToolCallContent, ToolCallId, ToolCallLocation,
    ToolCallStatus, ToolKind,
};
use agent_client_protocol::v2::schema as v2;

use super::bridge::ClientFeatures;
use crate::present::changes::{ChangeView, FileOp, FileType};

/// The id of the edit call that shows call `id`'s changes.
pub fn changes_call_id(id: &ToolCallId) -> ToolCallId {
    ToolCallId::new(format!("{}-changes", id.0))
}

/// The v1 edit call for `view`.
pub fn changes_call(id: &ToolCallId, view: &ChangeView, features: ClientFeatures) -> SessionUpdate {
    let mut content: Vec<ToolCallContent> = view
        .files
        .iter()
        .filter_map(|file| {
            let new = file.new_text.as_ref()?;
            Some(ToolCallContent::Diff(
                Diff::new(file.path.clone(), new.clone()).old_text(file.old_text.clone()),
            ))
        })
        .collect();
    let notes = view.notes();
    if features.card() {
        if !notes.is_empty() {
            content.push(ToolCallContent::Content(Content::new(notes.join("\n"))));
        }
    } else {
        content.push(ToolCallContent::Content(Content::new(view.diff_block())));
    }
    let locations: Vec<ToolCallLocation> = view
        .files
        .iter()
        .filter(|file| file.op != FileOp::Delete)
        .map(|file| ToolCallLocation::new(file.path.clone()))
        .collect();
    SessionUpdate::ToolCall(
        ToolCall::new(changes_call_id(id), view.title.clone())
            .kind(ToolKind::Edit)
            .status(ToolCallStatus::Completed)
            .content(content)
            .locations(locations),
    )
}

/// The v2 edit call for `view`: `changes[]` and the Git `patch`.
pub fn changes_call_v2(id: &ToolCallId, view: &ChangeView) -> v2::SessionUpdate {
    let changes: Vec<v2::DiffChange> = view
        .files
        .iter()
        .map(|file| {
            let path = v2::AbsolutePath::new(file.path.clone());
            let change = match (file.op, &file.old_path) {
                (FileOp::Add, _) => v2::DiffChange::add(path),
                (FileOp::Delete, _) => v2::DiffChange::delete(path),
                (FileOp::Move, Some(from)) => {
                    v2::DiffChange::move_file(v2::AbsolutePath::new(from.clone()), path)
                }
                _ => v2::DiffChange::modify(path),
            };
            change.file_type(match file.file_type {
                FileType::Text => Some(v2::DiffFileType::Text),
                FileType::Binary => Some(v2::DiffFileType::Binary),
                FileType::Symlink => Some(v2::DiffFileType::Symlink),
                FileType::Other => None,
            })
        })
        .collect();
    let diff = if view.patch.is_empty() {
        v2::Diff::new(changes)
    } else {
        v2::Diff::patch(view.patch.clone(), changes)
    };
    let mut content = vec![v2::ToolCallContent::Diff(diff)];
    let notes = view.notes();
    if !notes.is_empty() {
        content.push(v2::ToolCallContent::from(notes.join("\n")));
    }
    let locations: Vec<v2::ToolCallLocation> = view
        .files
        .iter()
        .filter(|file| file.op != FileOp::Delete)
        .map(|file| v2::ToolCallLocation::new(v2::AbsolutePath::new(file.path.clone())))
        .collect();
    v2::SessionUpdate::ToolCallUpdate(
        v2::ToolCallUpdate::new(v2::ToolCallId::new(changes_call_id(id).0.to_string()))
            .title(view.title.clone())
            .kind(v2::ToolKind::Edit)
            .status(v2::ToolCallStatus::Completed)
            .content(content)
            .locations(locations),
    )
}
