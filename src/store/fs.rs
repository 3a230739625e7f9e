//! Where records live: one JSON file per session in a private directory, written atomically.
//!
//! Owns the directory (made 0700), the file names (only ids made of `A-Z a-z 0-9 - _ .` name a
//! file, so no id can reach outside the directory), atomic replacement (a new file, mode 0600,
//! written whole and then renamed over the old one: a reader, or a second agent process,
//! sees the old record or the new one, never a torn one), listing and deleting. Must not touch:
//! what a record holds ([`super::record`]).

use std::fs::{DirBuilder, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;

use super::record::{Change, SessionRecord, FORMAT, READS_FORMATS};

/// The session records of one state directory.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Store {
    dir: PathBuf,
}

/// Why the store could not do something.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// No record has this id (never made, deleted, or an id that cannot name a record).
    NotFound(String),
    /// The record exists but cannot be read back.
    Unreadable {
        /// The record's file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The directory or a file could not be read or written.
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The error the system gave.
        error: std::io::Error,
    },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::NotFound(id) => write!(f, "no session {id:?} in the session store"),
            StoreError::Unreadable { path, problem } => write!(
                f,
                "the session record {} cannot be read ({problem}); delete the file to drop it",
                path.display()
            ),
            StoreError::Io { path, error } => write!(
                f,
                "the session store at {} cannot be used: {error} (choose another with \
                 --state-dir, or run with --no-history)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for StoreError {}

/// Which sessions [`Store::list`] returns.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ListQuery {
    /// Only sessions created in this directory.
    pub cwd: Option<PathBuf>,
    /// Where the previous page ended ([`ListPage::next_cursor`]).
    pub cursor: Option<String>,
    /// At most this many sessions per page.
    pub page_size: usize,
}

impl ListQuery {
    /// The first page of every session, at most `page_size` of them.
    pub fn new(page_size: usize) -> Self {
        ListQuery {
            page_size,
            ..ListQuery::default()
        }
    }

    /// Sets [`ListQuery::cwd`].
    pub fn cwd(mut self, cwd: Option<PathBuf>) -> Self {
        self.cwd = cwd;
        self
    }

    /// Sets [`ListQuery::cursor`].
    pub fn cursor(mut self, cursor: Option<String>) -> Self {
        self.cursor = cursor;
        self
    }
}

/// The part of a record a listing shows (a line of [`ListPage`]; callers only read it).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// The directory the session was created in.
    pub root: PathBuf,
    /// The session's title, if it has one.
    pub title: Option<String>,
    /// When the session last changed, in milliseconds since the Unix epoch.
    pub updated_ms: u64,
}

/// One page of sessions, newest first. Made by [`Store::list`]; callers only read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListPage {
    /// The sessions of this page, newest first.
    pub sessions: Vec<SessionSummary>,
    /// Pass it as [`ListQuery::cursor`] for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// Numbers temporary files, so that writers in one process never share one.
static TEMP_FILES: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// The store of the state directory `state_dir` (records go in its `sessions/`). Nothing is
    /// created until the first record is written.
    pub fn new(state_dir: &Path) -> Store {
        Store {
            dir: state_dir.join("sessions"),
        }
    }

    /// The directory that holds the records.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of the record `id`, or `None` for an id that cannot name one.
    fn path_of(&self, id: &str) -> Option<PathBuf> {
        let safe = !id.is_empty()
            && id.len() <= 200
            && !id.starts_with('.')
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        safe.then(|| self.dir.join(format!("{id}.json")))
    }

    /// The journal of the record `id` (its changes since it was written whole), for an `id`
    /// [`Self::path_of`] accepts.
    fn journal_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.journal"))
    }

    /// Appends `line` (one whole [`super::record::Change`] line, ending in a newline) to the
    /// journal of the record `id` in one `write`, opening it (0600) into `file` if need be.
    pub fn append(
        &self,
        id: &str,
        file: &mut Option<std::fs::File>,
        line: &[u8],
    ) -> Result<(), StoreError> {
        let path = self
            .path_of(id)
            .map(|_| self.journal_of(id))
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        if file.is_none() {
            let opened = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(&path)
                .map_err(self.io(&path))?;
            *file = Some(opened);
        }
        let journal = file.as_mut().expect("opened");
        journal.write_all(line).map_err(self.io(&path))
    }

    fn io(&self, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.to_path_buf();
        move |error| StoreError::Io { path, error }
    }

    /// Makes the directory (0700) if needed, and makes it 0700 if it is not.
    fn prepare_dir(&self) -> Result<(), StoreError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(self.io(&self.dir))?;
        let meta = std::fs::metadata(&self.dir).map_err(self.io(&self.dir))?;
        if meta.permissions().mode() & 0o777 != 0o700 {
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
                .map_err(self.io(&self.dir))?;
        }
        Ok(())
    }

    /// Writes `record`, replacing the previous one atomically, then removes its journal (whose
    /// lines carry an older token, or another writer's: none applies to `record`).
    pub fn save(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let path = self
            .path_of(&record.id)
            .ok_or_else(|| StoreError::NotFound(record.id.clone()))?;
        let json = serde_json::to_vec(record).expect("a record serializes");
        let temp = self.dir.join(format!(
            ".{}.{}.{}.tmp",
            record.id,
            std::process::id(),
            TEMP_FILES.fetch_add(1, Ordering::Relaxed)
        ));
        let write = |temp: &Path| -> std::io::Result<()> {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(temp)?;
            file.write_all(&json)?;
            std::fs::rename(temp, &path)?;
            match std::fs::remove_file(self.journal_of(&record.id)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            }
        };
        let mut result = write(&temp);
        if matches!(&result, Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
            self.prepare_dir()?;
            result = write(&temp);
        }
        result.map_err(|error| {
            let _ = std::fs::remove_file(&temp);
            StoreError::Io { path, error }
        })
    }

    /// Reads the record `id`.
    pub fn load(&self, id: &str) -> Result<SessionRecord, StoreError> {
        let path = self
            .path_of(id)
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound(id.to_string()))
            }
            Err(error) => return Err(StoreError::Io { path, error }),
        };
        let record: SessionRecord =
            serde_json::from_slice(&bytes).map_err(|error| StoreError::Unreadable {
                path: path.clone(),
                problem: error.to_string(),
            })?;
        if !READS_FORMATS.contains(&record.format) || record.id != id {
            return Err(StoreError::Unreadable {
                path,
                problem: format!(
                    "format {} for session {:?}, expected format {READS_FORMATS:?} for {id:?}",
                    record.format, record.id
                ),
            });
        }
        // A format-1 record is a format-2 record without turns: written back as format 2.
        let mut record = record;
        record.format = FORMAT;
        self.apply_journal(&mut record);
        Ok(record)
    }

    /// Applies the lines of `record`'s journal that continue it (those with its token), in
    /// order, up to the first that is not whole (a crash while it was written) or not a change.
    fn apply_journal(&self, record: &mut SessionRecord) {
        let Some(token) = record.journal.clone() else {
            return;
        };
        let Ok(bytes) = std::fs::read(self.journal_of(&record.id)) else {
            return;
        };
        let mut rest = &bytes[..];
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            let (line, after) = rest.split_at(end);
            rest = &after[1..];
            match serde_json::from_slice::<(String, Change)>(line) {
                Ok((of, change)) if of == token => {
                    record.apply(change);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }

    /// Removes the record `id`; false when there was none.
    pub fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let Some(path) = self.path_of(id) else {
            return Ok(false);
        };
        let _ = std::fs::remove_file(self.journal_of(id));
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(StoreError::Io { path, error }),
        }
    }

    /// A page of the sessions `query` selects, most recently updated first (ties by id).
    /// Records that cannot be read are skipped (and logged).
    pub fn list(&self, query: &ListQuery) -> Result<ListPage, StoreError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(ListPage {
                    sessions: Vec::new(),
                    next_cursor: None,
                })
            }
            Err(error) => return Err(self.io(&self.dir)(error)),
        };
        let mut sessions = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if self.path_of(id).is_none() {
                continue;
            }
            // A record with a journal is read whole (its title and time may be in the journal).
            let summary = if self.journal_of(id).exists() {
                self.load(id)
                    .map(|r| SessionSummary {
                        id: r.id,
                        root: r.root,
                        title: r.title,
                        updated_ms: r.updated_ms,
                    })
                    .map_err(|e| e.to_string())
            } else {
                std::fs::read(entry.path())
                    .map_err(|e| e.to_string())
                    .and_then(|bytes| {
                        serde_json::from_slice::<SessionSummary>(&bytes).map_err(|e| e.to_string())
                    })
            };
            match summary {
                Ok(summary) if summary.id == id => {
                    if query.cwd.as_ref().is_none_or(|cwd| *cwd == summary.root) {
                        sessions.push(summary);
                    }
                }
                Ok(_) => {
                    tracing::warn!(path = %entry.path().display(), "a record names another session: skipped")
                }
                // Deleted between the listing and the read: not an error.
                Err(_) if !entry.path().exists() => {}
                Err(problem) => {
                    tracing::warn!(path = %entry.path().display(), %problem, "an unreadable session record: skipped")
                }
            }
        }
        sessions.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then(a.id.cmp(&b.id)));
        if let Some(cursor) = query.cursor.as_deref() {
            let (updated_ms, id) = parse_cursor(cursor).ok_or_else(|| StoreError::Unreadable {
                path: self.dir.clone(),
                problem: format!("{cursor:?} is not a cursor from a previous listing"),
            })?;
            sessions.retain(|s| {
                (std::cmp::Reverse(s.updated_ms), &s.id) > (std::cmp::Reverse(updated_ms), &id)
            });
        }
        let page_size = query.page_size.max(1);
        let next_cursor = (sessions.len() > page_size).then(|| {
            let last = &sessions[page_size - 1];
            format!("{}/{}", last.updated_ms, last.id)
        });
        sessions.truncate(page_size);
        Ok(ListPage {
            sessions,
            next_cursor,
        })
    }
}

/// `(updated_ms, id)` of the last session of a page.
fn parse_cursor(cursor: &str) -> Option<(u64, String)> {
    let (updated_ms, id) = cursor.split_once('/')?;
    Some((updated_ms.parse().ok()?, id.to_string()))
}

/// Whether `cursor` could have come from [`Store::list`].
pub fn is_cursor(cursor: &str) -> bool {
    parse_cursor(cursor).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        (dir, store)
    }

    fn record(id: &str, root: &str, updated_ms: u64) -> SessionRecord {
        let mut record = SessionRecord::new(id, root.into(), "workspace", 1);
        record.updated_ms = updated_ms;
        record
    }

    #[test]
    fn records_round_trip_in_a_private_directory() {
        let (_dir, store) = store();
        let saved = record("s1", "/w", 5);
        store.save(&saved).unwrap();
        assert_eq!(store.load("s1").unwrap(), saved);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(store.dir()), 0o700);
        assert_eq!(mode(&store.dir().join("s1.json")), 0o600);
        assert!(store.delete("s1").unwrap());
        assert!(matches!(store.load("s1"), Err(StoreError::NotFound(_))));
        assert!(!store.delete("s1").unwrap());
    }

    #[test]
    fn ids_that_could_leave_the_directory_name_no_record() {
        let (_dir, store) = store();
        for id in ["../x", "a/b", "", ".hidden", "a\0b", &"x".repeat(201)] {
            assert!(
                matches!(store.load(id), Err(StoreError::NotFound(_))),
                "{id:?}"
            );
            assert!(store.save(&record(id, "/w", 1)).is_err(), "{id:?}");
        }
    }

    #[test]
    fn listing_is_newest_first_filtered_and_paged() {
        let (_dir, store) = store();
        for (id, root, updated) in [
            ("a", "/w", 1),
            ("b", "/w", 3),
            ("c", "/v", 2),
            ("d", "/w", 3),
        ] {
            store.save(&record(id, root, updated)).unwrap();
        }
        let ids = |page: &ListPage| {
            page.sessions
                .iter()
                .map(|s| s.id.clone())
                .collect::<Vec<_>>()
        };
        let all = store
            .list(&ListQuery {
                page_size: 10,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(ids(&all), ["b", "d", "c", "a"]);
        assert_eq!(all.next_cursor, None);
        let first = store
            .list(&ListQuery {
                cwd: Some("/w".into()),
                cursor: None,
                page_size: 2,
            })
            .unwrap();
        assert_eq!(ids(&first), ["b", "d"]);
        let second = store
            .list(&ListQuery {
                cwd: Some("/w".into()),
                cursor: first.next_cursor,
                page_size: 2,
            })
            .unwrap();
        assert_eq!(ids(&second), ["a"]);
        assert_eq!(second.next_cursor, None);
    }

    #[test]
    fn concurrent_writers_never_tear_a_record() {
        let (_dir, store) = store();
        let big = |n: u64| {
            let mut record = record("shared", "/w", n);
            record.title = Some(format!("{n}").repeat(50_000));
            record
        };
        store.save(&big(0)).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let reader = scope.spawn(|| {
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) {
                    let record = store.load("shared").expect("always a whole record");
                    let title = record.title.unwrap();
                    assert_eq!(title.len() % 50_000, 0, "one writer's whole title");
                    reads += 1;
                }
                reads
            });
            let writers: Vec<_> = (1..=4)
                .map(|n| {
                    let store = store.clone();
                    scope.spawn(move || {
                        for _ in 0..100 {
                            store.save(&big(n)).unwrap();
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.join().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
            assert!(reader.join().unwrap() > 0);
        });
        let left: Vec<_> = std::fs::read_dir(store.dir()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
    }

    #[test]
    fn an_unreadable_record_is_skipped_by_list_and_reported_by_load() {
        let (_dir, store) = store();
        store.save(&record("good", "/w", 1)).unwrap();
        std::fs::write(store.dir().join("bad.json"), "{not json").unwrap();
        let page = store
            .list(&ListQuery {
                page_size: 10,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(page.sessions.len(), 1);
        let error = store.load("bad").unwrap_err().to_string();
        assert!(
            error.contains("cannot be read") && error.contains("bad.json"),
            "{error}"
        );
    }
}
