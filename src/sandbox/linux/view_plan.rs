//! The view plan: what a command's mount namespace shows, prepared in the parent for
//! [`child::view::build`](super::child::view::build): the writable places, the temp dirs
//! (workspace mode: the session's own folder; read-only mode: a fresh tmpfs), the command's own
//! `/dev`, the masked host paths (host daemons' sockets, credential files, the agent's own
//! files), the read-only Git metadata of workspace mode and its copy-on-write layers over the
//! package caches ([`cache_layers`]).
//!
//! Building it costs a few dozen `stat`s, one `readdir` of `/run` and one of `~/.ssh`; it is
//! built once per session and mode and kept while nothing it read changed (`plan_cache.rs`);
//! the session's nested repositories are found once per session by the engine
//! ([`crate::sandbox::find_git_repos`]).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::child::view::{Overlay, View, DEV_NODES};
use crate::sandbox::{masked_paths, package_caches, Mode, Roots};

/// Host daemons' socket folders hidden behind an empty read-only tmpfs (those that exist):
/// every user's runtime dir (session D-Bus, systemd --user, Wayland, PulseAudio, gpg-agent,
/// podman, ssh-agent under systemd), the system bus, container engines, screen and tmux.
/// `/run/WSL`: WSL's interop sockets (`<pid>_interop`), through which a process starts Windows
/// programs, outside every layer of the sandbox.
pub(crate) const SOCKET_DIRS: [&str; 11] = [
    "/run/user",
    "/run/WSL",
    "/run/dbus",
    "/run/docker",
    "/run/containerd",
    "/run/podman",
    "/run/crio",
    "/run/screen",
    "/run/tmux",
    "/run/snapd",
    "/run/libvirt",
];

/// systemd's folder of sockets (`private`, `notify`, `journal`, `userdb`, …) is hidden too,
/// keeping this one: systemd-resolved's `resolv.conf` (DNS where `/etc/resolv.conf` points
/// into it).
pub(crate) const SYSTEMD_DIR: &str = "/run/systemd";
pub(crate) const SYSTEMD_KEEP: &str = "/run/systemd/resolve";

fn c(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// The temp dirs a command sees replaced: the temp dir, and `/tmp` when it is elsewhere.
fn temp_dirs(temp: &Path) -> Vec<PathBuf> {
    let mut temps = vec![temp.to_path_buf()];
    let tmp = Path::new("/tmp");
    if tmp.is_dir() && !temp.starts_with(tmp) && !tmp.starts_with(temp) {
        temps.push(tmp.to_path_buf());
    }
    temps
}

/// What a mask hides: a folder (an empty tmpfs) or a file (`/dev/null`).
pub(crate) enum Hidden {
    Dir(PathBuf, Option<PathBuf>),
    File(PathBuf),
}

/// Host daemons' sockets the view hides on this machine now (see [`SOCKET_DIRS`]): the
/// folders, systemd's, `$XDG_RUNTIME_DIR` and the folder of `$SSH_AUTH_SOCK` (the agent's),
/// WSL's interop socket (`$WSL_INTEROP`), and every socket under `/run` ([`run_sockets`]:
/// `docker.sock`, `podman.sock`, `/run/cups/cups.sock`, …).
pub(crate) fn hidden_sockets() -> Vec<Hidden> {
    hidden_sockets_and_holders().0
}

/// [`hidden_sockets`], and the folders under `/run` that held one (see [`run_sockets`]).
pub(crate) fn hidden_sockets_and_holders() -> (Vec<Hidden>, Vec<PathBuf>) {
    let mut hidden = Vec::new();
    // `/run` resolved once for the folders under it (it is a symlink nowhere we know of, but
    // may be one).
    let run = canonical(Path::new("/run"));
    for dir in SOCKET_DIRS {
        let rel = Path::new(dir)
            .strip_prefix("/run")
            .unwrap_or(Path::new(dir));
        if let Some(dir) = crate::sandbox::canonical_under(&run, rel) {
            if dir.is_dir() {
                hidden.push(Hidden::Dir(dir, None));
            }
        }
    }
    let dirs: Vec<PathBuf> = socket_dirs_from_env();
    for dir in dirs {
        let dir = canonical(&dir);
        if dir.is_dir() {
            hidden.push(Hidden::Dir(dir, None));
        }
    }
    let systemd = Path::new(SYSTEMD_DIR);
    if systemd.is_dir() {
        let keep = Path::new(SYSTEMD_KEEP);
        let keep = keep.is_dir().then(|| keep.to_path_buf());
        hidden.push(Hidden::Dir(systemd.to_path_buf(), keep));
    }
    // WSL names its interop socket in the environment; where that is outside `/run/WSL`.
    if let Some(interop) = std::env::var_os("WSL_INTEROP").map(PathBuf::from) {
        if interop.is_absolute() {
            let interop = canonical(&interop);
            if std::fs::metadata(&interop).is_ok_and(|m| m.file_type().is_socket()) {
                hidden.push(Hidden::File(interop));
            }
        }
    }
    let skip: Vec<PathBuf> = hidden
        .iter()
        .filter_map(|h| match h {
            Hidden::Dir(dir, _) => Some(dir.clone()),
            Hidden::File(_) => None,
        })
        .collect();
    let (sockets, holders) = run_sockets(&skip);
    hidden.extend(sockets.into_iter().map(Hidden::File));
    (hidden, holders)
}

/// How deep below `/run` (and `/var/run` where it is elsewhere) [`run_sockets`] looks.
pub(crate) const RUN_DEPTH: usize = 6;
/// The most entries [`run_sockets`] reads (a desktop's `/run` has a few hundred; `udev`'s
/// database a few thousand more, read last, being the deepest).
pub(crate) const RUN_ENTRIES: usize = 8192;

/// Every socket under `/run` (and `/var/run` where that is not a link to it), recursively,
/// breadth first, at most [`RUN_DEPTH`] levels and [`RUN_ENTRIES`] entries, not entering
/// `skip` (folders masked whole) nor following a symlink; and the folders that held one (the
/// plan's stamp watches them, besides `/run`: a new socket there builds the plan again).
pub(crate) fn run_sockets(skip: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut tops = vec![PathBuf::from("/run")];
    let var_run = canonical(Path::new("/var/run"));
    if !var_run.starts_with("/run") {
        tops.push(var_run);
    }
    let (mut sockets, mut holders) = (Vec::new(), Vec::new());
    let mut level: Vec<PathBuf> = tops;
    let mut budget = RUN_ENTRIES;
    for _ in 0..RUN_DEPTH {
        let mut next = Vec::new();
        for dir in &level {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut held = false;
            for entry in entries.flatten() {
                if budget == 0 {
                    break;
                }
                budget -= 1;
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_socket() {
                    sockets.push(path);
                    held = true;
                } else if kind.is_dir() && !skip.iter().any(|s| path.starts_with(s)) {
                    next.push(path);
                }
            }
            if held {
                holders.push(dir.clone());
            }
        }
        if next.is_empty() || budget == 0 {
            break;
        }
        level = next;
    }
    (sockets, holders)
}

/// The socket folders the environment names: `XDG_RUNTIME_DIR`, and the folder of
/// `SSH_AUTH_SOCK` (absolute, and not `/`). Masked by the view; watched by the plan's stamp.
pub(super) fn socket_dirs_from_env() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"] {
        if let Some(value) = std::env::var_os(var).map(PathBuf::from) {
            let dir = if var == "SSH_AUTH_SOCK" {
                value.parent().map(Path::to_path_buf)
            } else {
                Some(value)
            };
            dirs.extend(dir.filter(|d| d.is_absolute() && d.parent().is_some()));
        }
    }
    dirs
}

/// The view for `mode` (see the module doc).
pub(crate) fn view_for(mode: Mode, roots: &Roots) -> View {
    let workspace = canonical(&roots.workspace);
    let temp = canonical(&roots.temp);
    let temps = temp_dirs(&temp);
    let mut view = View {
        private_shm: Path::new("/dev/shm").is_dir(),
        without_mount_setattr: roots.view_without_mount_setattr
            || super::probe::mount_setattr_missing(),
        ..View::default()
    };
    if !matches!(mode, Mode::Workspace | Mode::ReadOnly) {
        return view;
    }
    let session_temp = match mode {
        Mode::Workspace => roots.session_temp.as_deref().map(canonical),
        _ => None,
    };
    let replace_temps = mode == Mode::ReadOnly || session_temp.is_some();
    view.writable = match (mode, replace_temps) {
        (Mode::Workspace, true) => vec![workspace.clone()],
        (Mode::Workspace, false) => vec![workspace.clone(), temp.clone()],
        _ => Vec::new(),
    }
    .iter()
    .filter_map(|p| c(p))
    .collect();
    // One command's extra folders ("allow once"): existing folders only, never the root.
    let also: Vec<PathBuf> = roots
        .also_writable
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| p.is_dir() && p != Path::new("/"))
        .collect();
    view.one_command = !roots.also_writable.is_empty();
    view.writable.extend(also.iter().filter_map(|p| c(p)));
    if replace_temps {
        view.temp_source = session_temp.as_deref().and_then(c);
        view.temps = temps.iter().filter_map(|p| c(p)).collect();
        if let Some(outer) = temps.iter().find(|t| workspace.starts_with(t)) {
            view.keep_inside_temp = c(&workspace);
            view.keep_parents = workspace
                .ancestors()
                .skip(1)
                .take_while(|p| p.starts_with(outer) && p != outer)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .filter_map(c)
                .collect();
        }
    }
    let nodes: Vec<CString> = DEV_NODES
        .iter()
        .filter(|node| Path::new(std::ffi::OsStr::from_bytes(node.to_bytes())).exists())
        .map(|node| CString::from(*node))
        .collect();
    if nodes.iter().any(|n| n.as_c_str() == c"/dev/null") {
        view.private_dev = Some(nodes);
    }
    // Masks: never over (or above) the session folder, never inside a replaced temp dir
    // (nothing of the host's is there), except inside the session folder kept there: that is
    // the host's, and a `--mask` in it must hold as anywhere else.
    let kept_inside_temp = view.keep_inside_temp.is_some();
    let covered = |p: &Path| {
        replace_temps
            && temps.iter().any(|t| p.starts_with(t))
            && !(kept_inside_temp && p.starts_with(&workspace))
    };
    let keeps_workspace = |p: &Path| workspace.starts_with(p);
    let mut hidden = hidden_sockets();
    for path in masked_paths(&roots.protection) {
        if path.is_dir() {
            hidden.push(Hidden::Dir(path, None));
        } else {
            hidden.push(Hidden::File(path));
        }
    }
    let mut dirs: Vec<&PathBuf> = Vec::new();
    for item in &hidden {
        let path = match item {
            Hidden::Dir(p, _) | Hidden::File(p) => p,
        };
        if covered(path) || keeps_workspace(path) || dirs.iter().any(|d| path.starts_with(d)) {
            continue;
        }
        match item {
            Hidden::Dir(dir, keep) => {
                dirs.push(dir);
                if let Some(dir) = c(dir) {
                    view.masked_dirs.push((dir, keep.as_deref().and_then(c)));
                }
            }
            Hidden::File(file) => view.masked_files.extend(c(file)),
        }
    }
    if mode == Mode::Workspace && !roots.protection.git_metadata_writable {
        git_metadata(&workspace, &roots.protection.git_repos, &mut view);
    }
    if let (Mode::Workspace, Some(layer), Some(home)) =
        (mode, &roots.cache_layer, &roots.protection.home)
    {
        let masked: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
        let mut skip = temps.clone();
        skip.push(workspace.clone());
        skip.extend(session_temp.clone());
        (view.overlays, view.refused_caches) =
            cache_layers(home, &canonical(layer), &skip, &masked);
        // A layer the kernel refuses (probed once per home) is left out: its cache stays
        // read-only, said once by the session's first workspace command, not by each setup.
        let refused = super::probe::refused_cache_layers(home);
        view.overlays.retain(|overlay| {
            let target = Path::new(std::ffi::OsStr::from_bytes(overlay.target.to_bytes()));
            match refused.iter().find(|(cache, _)| cache == target) {
                Some((cache, why)) => {
                    view.refused_caches
                        .push(format!("{}: {why}", cache.display()));
                    false
                }
                None => true,
            }
        });
    }
    view.mounted_inodes = mounted_inodes(&view);
    view
}

/// The agent's own folders ([`crate::sandbox::Protection::agent_dirs`], e.g. where "allow
/// always" is kept) that do not exist yet are made now (0700) when a command in `mode` on
/// `roots` could make them (their nearest existing folder is writable for it: the session
/// folder, the host temp dir where it is not replaced, an [`Roots::also_writable`] folder):
/// a mask applies only to what exists, and a command must not make such a folder first.
/// Elsewhere the view is read-only there and they stay unmade. A few `stat`s.
pub(crate) fn make_missing_agent_dirs(mode: Mode, roots: &Roots) {
    use std::os::unix::fs::DirBuilderExt as _;
    if !matches!(mode, Mode::Workspace | Mode::ReadOnly) {
        return;
    }
    // The usual case, every command: they exist (one `lstat` each), nothing to canonicalize.
    let missing: Vec<&PathBuf> = roots
        .protection
        .agent_dirs
        .iter()
        .filter(|dir| std::fs::symlink_metadata(dir).is_err())
        .collect();
    if missing.is_empty() {
        return;
    }
    let mut writable: Vec<PathBuf> = roots.also_writable.iter().map(|p| canonical(p)).collect();
    if mode == Mode::Workspace {
        writable.push(canonical(&roots.workspace));
        if roots.session_temp.is_none() {
            writable.push(canonical(&roots.temp));
        }
    }
    for dir in missing {
        let Some(existing) = dir
            .ancestors()
            .skip(1)
            .find(|p| std::fs::symlink_metadata(p).is_ok())
            .map(canonical)
        else {
            continue;
        };
        if writable.iter().any(|w| existing.starts_with(w)) {
            let made = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
            if let Err(error) = made {
                tracing::warn!(%error, dir = %dir.display(), "could not make an agent folder to mask it");
            }
        }
    }
}

/// See [`View::mounted_inodes`]: one `lstat` per path the view mounts on (they are
/// canonical, so no symlink is followed).
fn mounted_inodes(view: &View) -> Vec<(u64, u64)> {
    let dirs = view.masked_dirs.iter().map(|(dir, _)| dir);
    dirs.chain(&view.masked_files)
        .chain(&view.pinned)
        .chain(&view.read_only)
        .map(|path| {
            std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(path.to_bytes()))
                .map_or((0, 0), |meta| (meta.dev(), meta.ino()))
        })
        .collect()
}

/// Workspace mode: an overlay of each package cache of `home` that exists, its upper and work
/// folders made here (the agent's, in the session's own `layer` folder; the upper one with the
/// cache's mode, which the overlay's root shows). Not over or under a place in `skip` (the
/// session folder, the temp dirs: their binds would be hidden, or a write the user allowed
/// would not reach the host), nor under a masked folder (`masked`: it stays hidden). Masks
/// under a cache still apply: the child mounts them on top of the overlay.
/// The kernel's verdict on each layer is the caller's ([`super::probe::refused_cache_layers`]).
pub(crate) fn cache_layers(
    home: &Path,
    layer: &Path,
    skip: &[PathBuf],
    masked: &[PathBuf],
) -> (Vec<Overlay>, Vec<String>) {
    use std::os::unix::fs::PermissionsExt;
    // A work folder per command: overlayfs empties its work folder when it mounts, which
    // would pull it from under a layer another command of the session still has mounted.
    let command = next_command();
    let mut overlays = Vec::new();
    let mut refused = Vec::new();
    for (name, cache) in package_caches(home)
        .into_iter()
        .take(super::child::view::MAX_OVERLAYS)
    {
        if skip
            .iter()
            .any(|s| s.starts_with(&cache) || cache.starts_with(s))
            || masked.iter().any(|m| cache.starts_with(m))
            || layer.starts_with(&cache)
        {
            continue;
        }
        let own = layer.join(&name);
        let upper = own.join("upper");
        let works = own.join("work");
        let work = works.join(command.to_string());
        // Each folder this user's own real folder (never a symlink: overlayfs would follow
        // it to wherever it points and write there).
        let made = private_dir(&own)
            .and_then(|_| private_dir(&works))
            .and_then(|_| private_dir(&work))
            .and_then(|_| {
                if private_dir(&upper)? {
                    let mode = std::fs::metadata(&cache)?.permissions().mode() & 0o7777;
                    std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(mode))?;
                }
                Ok(())
            });
        if let Err(error) = made {
            tracing::warn!(%error, cache = %cache.display(), "no copy-on-write layer for this package cache: it stays read-only");
            refused.push(format!("{}: {error}", cache.display()));
            continue;
        }
        if let (Some(target), Some(upper), Some(work)) = (c(&cache), c(&upper), c(&work)) {
            overlays.push(Overlay {
                target,
                upper,
                work,
            });
        }
    }
    (overlays, refused)
}

/// New work folders for `view`'s overlays (a reused plan's are those of the command that
/// built it, which may still have them mounted: overlayfs empties its work folder when it
/// mounts). An overlay whose folder cannot be made is left out (its cache stays read-only).
pub(crate) fn renew_work(view: &mut View) {
    use std::os::unix::ffi::OsStringExt;
    let command = next_command();
    view.overlays.retain_mut(|overlay| {
        let work = Path::new(std::ffi::OsStr::from_bytes(overlay.work.to_bytes()));
        let Some(works) = work.parent() else {
            return false;
        };
        let fresh = works.join(command.to_string());
        match private_dir(&fresh) {
            Ok(_) => match CString::new(fresh.into_os_string().into_vec()) {
                Ok(fresh) => {
                    overlay.work = fresh;
                    true
                }
                Err(_) => false,
            },
            Err(error) => {
                tracing::warn!(%error, cache = ?overlay.target, "no copy-on-write layer for this package cache: it stays read-only");
                false
            }
        }
    });
}

/// A number no other command of this process has, for its caches' work folders.
fn next_command() -> u64 {
    static COMMAND: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    COMMAND.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Makes `dir` (0700), or checks that the one there is a real folder (not a symlink) of this
/// user's; `true` when it was made now.
fn private_dir(dir: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let made = match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(e),
    };
    let meta = std::fs::symlink_metadata(dir)?;
    // SAFETY: plain getter.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != uid {
        return Err(std::io::Error::other(format!(
            "{} is not a folder of this user's (a symlink, a file or another user's)",
            dir.display()
        )));
    }
    Ok(made)
}

/// Workspace mode: the session folder's and its repositories' `.git` pinned (a mount point:
/// not renamed, removed or replaced), their hooks and config read-only.
fn git_metadata(workspace: &Path, repos: &[PathBuf], view: &mut View) {
    let mut pinned: Vec<PathBuf> = Vec::new();
    let mut read_only: Vec<PathBuf> = Vec::new();
    let mut make_dirs: Vec<PathBuf> = Vec::new();
    let repos = std::iter::once(workspace.to_path_buf()).chain(
        repos
            .iter()
            .map(|r| canonical(r))
            .filter(|r| r.starts_with(workspace) && r != workspace),
    );
    for repo in repos {
        let git = repo.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&git) else {
            continue;
        };
        // The folders from the session folder down to the repository: renaming any of them
        // would move the repository away and let a new one take its place.
        if repo != workspace {
            pinned.extend(
                repo.ancestors()
                    .take_while(|p| p.starts_with(workspace) && *p != workspace)
                    .map(Path::to_path_buf),
            );
        }
        if meta.is_file() {
            // A worktree's or submodule's `gitdir:` pointer.
            read_only.push(git);
            continue;
        }
        if !meta.is_dir() {
            continue;
        }
        pinned.push(git.clone());
        let hooks = git.join("hooks");
        if std::fs::symlink_metadata(&hooks).is_err() {
            // A mount point for the read-only bind (git's own layout), made in the child.
            make_dirs.push(hooks);
        }
        let mut metadata_of = |dir: &Path| {
            for name in ["hooks", "config", "config.worktree"] {
                let path = dir.join(name);
                if std::fs::symlink_metadata(&path).is_ok() || make_dirs.contains(&path) {
                    read_only.push(path);
                }
            }
        };
        metadata_of(&git);
        if let Ok(modules) = std::fs::read_dir(git.join("modules")) {
            for module in modules.flatten().filter(|m| m.path().is_dir()) {
                metadata_of(&module.path());
            }
        }
    }
    pinned.sort();
    pinned.dedup();
    view.pinned.extend(pinned.iter().filter_map(|p| c(p)));
    view.make_dirs.extend(make_dirs.iter().filter_map(|p| c(p)));
    view.read_only.extend(read_only.iter().filter_map(|p| c(p)));
}
