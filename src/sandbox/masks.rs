//! What the view hides from workspace and read-only commands (credential files, the agent's own
//! files, extra paths the user names) and which Git repositories under a session folder have
//! their metadata protected. Platform-neutral: the lists and the bounded lookups; the backend
//! turns them into mounts. The list and the reason for each entry are in
//! `notes/2026-12-01-credential-masks.md`.

use std::path::{Path, PathBuf};

/// What the view protects beyond the write rules. Start from [`Protection::default`] (nothing
/// masked: no home) and set the fields; the engine fills it from its config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Protection {
    /// The home whose credential files ([`HOME_CREDENTIALS`], `~/.ssh` private keys) are
    /// masked (`None`: none).
    pub home: Option<PathBuf>,
    /// The agent's own folders (its state directory with the session store, the log
    /// directory, where "allow always" is kept): masked too. One that does not exist yet is
    /// made (0700) before a command that could make it runs (Linux: its nearest existing
    /// folder is writable in that command's view), so that it can be masked.
    pub agent_dirs: Vec<PathBuf>,
    /// More paths to mask (`--mask`).
    pub mask: Vec<PathBuf>,
    /// Paths not to mask, with everything under them (`--allow-read`).
    pub allow_read: Vec<PathBuf>,
    /// Workspace mode: let commands write `.git/hooks` and `.git/config`
    /// (`--allow-git-hooks-and-config-writes`).
    pub git_metadata_writable: bool,
    /// Repositories (folders holding a `.git`) under the session folder whose metadata is
    /// protected, besides the session folder itself (see [`find_git_repos`]).
    pub git_repos: Vec<PathBuf>,
}

/// Credential files and folders under the home that commands never see (relative to it).
pub const HOME_CREDENTIALS: [&str; 27] = [
    ".aws",
    ".azure",
    ".boto",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/doctl",
    ".config/gcloud",
    ".config/gh",
    ".config/git/credentials",
    ".config/hub",
    ".config/op",
    ".config/rclone/rclone.conf",
    ".docker/config.json",
    ".gem/credentials",
    ".git-credentials",
    ".gnupg",
    ".kube",
    ".local/share/keyrings",
    ".my.cnf",
    ".netrc",
    ".npmrc",
    ".oci",
    ".password-store",
    ".pgpass",
    ".pypirc",
    ".s3cfg",
    ".vault-token",
];

/// Credential folders of a Windows home reachable from WSL (`/mnt/<drive>/Users/<name>`, see
/// [`windows_homes`]), masked like their Linux twins in [`HOME_CREDENTIALS`]; the private keys in
/// its `.ssh` too ([`is_ssh_private_key`]).
pub const WINDOWS_HOME_CREDENTIALS: [&str; 3] = [".aws", ".azure", ".config/gh"];

/// The most drives under `/mnt`, and users per drive, [`windows_homes`] looks at.
const WINDOWS_DRIVES: usize = 32;
const WINDOWS_USERS: usize = 128;

/// Whether this is WSL: its interop socket folder, its binfmt entry or its environment.
pub fn is_wsl() -> bool {
    Path::new("/run/WSL").is_dir()
        || Path::new("/proc/sys/fs/binfmt_misc/WSLInterop").exists()
        || std::env::var_os("WSL_DISTRO_NAME").is_some()
}

/// The Windows homes under WSL (`/mnt/*/Users/*`, folders only, not the links Windows keeps
/// there such as `All Users`), at most [`WINDOWS_DRIVES`] drives and [`WINDOWS_USERS`] users
/// each. Nothing elsewhere than WSL: `/mnt` may hold network mounts another machine does not
/// answer for, and a lookup there could hang.
pub fn windows_homes() -> Vec<PathBuf> {
    if !is_wsl() {
        return Vec::new();
    }
    let mut homes = Vec::new();
    let Ok(drives) = std::fs::read_dir("/mnt") else {
        return homes;
    };
    for drive in drives.flatten().take(WINDOWS_DRIVES) {
        let Ok(users) = std::fs::read_dir(drive.path().join("Users")) else {
            continue;
        };
        for user in users.flatten().take(WINDOWS_USERS) {
            if user.file_type().is_ok_and(|t| t.is_dir()) {
                homes.push(user.path());
            }
        }
    }
    homes
}

/// The credential paths of `home` that exist (canonical): `rels` and `.ssh`'s private keys.
fn home_credentials(home: &Path, rels: &[&str]) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = rels
        .iter()
        .filter_map(|rel| canonical_under(home, Path::new(rel)))
        .collect();
    if let Ok(entries) = std::fs::read_dir(home.join(".ssh")) {
        found.extend(
            entries
                .flatten()
                .filter(|e| is_ssh_private_key(&e.file_name().to_string_lossy()))
                .filter_map(|e| canonical_under(home, &Path::new(".ssh").join(e.file_name()))),
        );
    }
    found
}

/// Whether `name` (a file in `~/.ssh`) is a private key: `id_*` but not `*.pub`, `*.pem`,
/// `*.key`. `known_hosts`, `config` and public keys stay readable.
pub fn is_ssh_private_key(name: &str) -> bool {
    (name.starts_with("id_") && !name.ends_with(".pub"))
        || name.ends_with(".pem")
        || name.ends_with(".key")
}

/// The canonical form of `base.join(rel)` where `base` is canonical already, or `None` when it
/// does not exist: one `lstat` per component of `rel`, where `canonicalize` reads every
/// component of `base` again for each path (the view plan looks up about 40 paths under the
/// home per command). A symlink (or a `.`/`..`) on the way falls back to `canonicalize`.
pub(crate) fn canonical_under(base: &Path, rel: &Path) -> Option<PathBuf> {
    let mut path = base.to_path_buf();
    for component in rel.components() {
        let std::path::Component::Normal(name) = component else {
            return base.join(rel).canonicalize().ok();
        };
        path.push(name);
        if std::fs::symlink_metadata(&path)
            .ok()?
            .file_type()
            .is_symlink()
        {
            return base.join(rel).canonicalize().ok();
        }
    }
    Some(path)
}

/// The paths `protection` masks that exist on this machine now (canonical, sorted, nothing
/// under another one), minus the allowed ones. A few `stat`s and one `readdir` of `~/.ssh`.
pub fn masked_paths(protection: &Protection) -> Vec<PathBuf> {
    // Canonical already: the home's files resolved under its canonical form.
    let mut found: Vec<PathBuf> = Vec::new();
    if let Some(home) = protection.home.as_ref().and_then(|h| h.canonicalize().ok()) {
        found.extend(home_credentials(&home, &HOME_CREDENTIALS));
    }
    if protection.home.is_some() {
        for home in windows_homes() {
            if let Ok(home) = home.canonicalize() {
                found.extend(home_credentials(&home, &WINDOWS_HOME_CREDENTIALS));
            }
        }
    }
    found.extend(
        protection
            .agent_dirs
            .iter()
            .chain(&protection.mask)
            .filter_map(|p| p.canonicalize().ok()),
    );
    let allowed: Vec<PathBuf> = protection
        .allow_read
        .iter()
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
        .collect();
    found.retain(|p| p != Path::new("/") && !allowed.iter().any(|a| p.starts_with(a)));
    found.sort();
    found.dedup();
    let mut outer: Vec<PathBuf> = Vec::new();
    for path in found {
        if !outer.iter().any(|o| path.starts_with(o)) {
            outer.push(path);
        }
    }
    outer
}

/// How deep under a session folder [`find_git_repos`] looks: the folder's children and
/// grandchildren.
pub const GIT_SCAN_DEPTH: usize = 2;
/// The most directory entries [`find_git_repos`] reads before it stops.
pub const GIT_SCAN_ENTRIES: usize = 4096;
/// The most repositories it returns.
pub const GIT_SCAN_REPOS: usize = 32;

/// Repositories (folders holding a `.git` folder or file) below `root`, at most
/// [`GIT_SCAN_DEPTH`] levels down, reading at most [`GIT_SCAN_ENTRIES`] entries; hidden
/// folders, `node_modules` and `target` are not entered. `root` itself is not included (the
/// view always checks it). The engine calls this once per session.
pub fn find_git_repos(root: &Path) -> Vec<PathBuf> {
    let mut repos = Vec::new();
    let mut budget = GIT_SCAN_ENTRIES;
    let mut level = vec![root.to_path_buf()];
    for _ in 0..GIT_SCAN_DEPTH {
        let mut next = Vec::new();
        for dir in &level {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if budget == 0 || repos.len() >= GIT_SCAN_REPOS {
                    return repos;
                }
                budget -= 1;
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') || name == "node_modules" || name == "target" {
                    continue;
                }
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let path = entry.path();
                if path.join(".git").symlink_metadata().is_ok() {
                    repos.push(path.clone());
                }
                next.push(path);
            }
        }
        level = next;
    }
    repos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_private_keys_are_told_from_the_rest() {
        for key in [
            "id_rsa",
            "id_ed25519",
            "id_ecdsa_sk",
            "deploy.pem",
            "server.key",
        ] {
            assert!(is_ssh_private_key(key), "{key}");
        }
        for other in ["id_rsa.pub", "known_hosts", "config", "authorized_keys"] {
            assert!(!is_ssh_private_key(other), "{other}");
        }
    }
}
