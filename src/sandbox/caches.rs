//! Package caches that workspace commands get a copy-on-write layer of their session's own
//! over: writes land in the session's folder, later commands of the session see them, the
//! host's cache is never changed. Platform-neutral: the list and the lookup; the backend mounts
//! the layers (Linux: overlayfs in the command's user namespace). The list and the reason for
//! each entry are in `notes/2026-12-01-package-caches.md`.

use std::path::{Path, PathBuf};

/// Package-cache folders under the home (relative to it) that workspace commands may write
/// into through a layer of the session's own, where they exist. Not `~/.cargo` or `~/.m2` as a
/// whole (`credentials.toml`, `settings.xml`), not `~/.gradle` (`gradle.properties`), not
/// `~/.cargo/bin` or `~/.local/lib` (installed programs, not caches).
pub const PACKAGE_CACHES: [&str; 11] = [
    ".cargo/registry",
    ".cargo/git",
    ".rustup",
    ".npm",
    ".cache",
    ".local/share/pnpm",
    ".yarn/berry",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    "go/pkg/mod",
];

/// The [`PACKAGE_CACHES`] of `home` that exist now as folders: `(name, canonical path)`, the
/// name being the entry with `/` as `-` (the layer's folder name). None lies under another
/// one; paths an overlay option cannot carry (`,` `:` `\`) are left out.
pub fn package_caches(home: &Path) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    let Ok(home) = home.canonicalize() else {
        return found;
    };
    for rel in PACKAGE_CACHES {
        let Some(path) = super::masks::canonical_under(&home, Path::new(rel)) else {
            continue;
        };
        let text = path.to_string_lossy();
        if !path.is_dir() || text.contains([',', ':', '\\']) || path == Path::new("/") {
            continue;
        }
        if found
            .iter()
            .any(|(_, p)| path.starts_with(p) || p.starts_with(&path))
        {
            continue;
        }
        found.push((rel.replace('/', "-"), path));
    }
    found
}

/// Removes a session's own folder (`dir`, with its temp dir and cache layers). overlayfs leaves
/// a `work/work` folder of mode 0 behind, which an ordinary user cannot list: when the first
/// try fails, every folder under `dir` is made this user's to list and change, and it tries
/// again.
pub fn remove_session_folder(dir: &Path) -> std::io::Result<()> {
    if std::fs::remove_dir_all(dir).is_ok() {
        return Ok(());
    }
    open_up(dir);
    std::fs::remove_dir_all(dir)
}

/// `u+rwx` on `dir` and every folder under it (symlinks not followed).
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let mode = meta.permissions().mode();
    if mode & 0o700 != 0o700 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            open_up(&entry.path());
        }
    }
}
