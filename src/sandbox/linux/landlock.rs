//! Landlock: the kernel's ABI version and the per-mode ruleset, built in the parent (the child
//! applies it right before exec, adding rules for the view's new mounts).

use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

use crate::sandbox::{Mode, Roots};

/// The Landlock ABI whose rights we ask for (the crate drops what an older kernel lacks).
const TARGET_ABI: ABI = ABI::V6;

/// Devices every confined command may write (files), and device folders (beneath).
pub(crate) const WRITABLE_DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];
pub(crate) const WRITABLE_DEVICE_DIRS: [&str; 2] = ["/dev/pts", "/dev/shm"];

/// The kernel's Landlock ABI version, or why there is none.
pub(crate) fn landlock_abi() -> Result<u32, String> {
    // SAFETY: the documented version query: no attr, size 0, LANDLOCK_CREATE_RULESET_VERSION.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    if v > 0 {
        return Ok(v as u32);
    }
    let err = std::io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) => "the kernel has Landlock but it is not enabled at boot: add \
            `landlock` to the `lsm=` kernel parameter"
            .to_string(),
        Some(libc::ENOSYS) => "this kernel has no Landlock (it needs Linux 5.13 or newer built \
            with CONFIG_SECURITY_LANDLOCK)"
            .to_string(),
        _ => format!("the Landlock version query failed: {err}"),
    })
}

/// What a ruleset handles beyond writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Rules {
    /// TCP (read-only mode without a network namespace).
    pub tcp: bool,
    /// Reads: everything but the masked paths (where there is no view to mask them).
    pub reads: bool,
}

/// The paths to grant reading beneath so that everything but `masked` (canonical paths) is
/// readable: Landlock allows, never denies, so each folder on the way to a masked path (its
/// ancestors, which get only READ_DIR) has its other entries granted one by one. An entry
/// that resolves to a masked path, beneath one, or to an ancestor is left out. Entries made
/// later directly in an ancestor are not readable (said in the README).
pub(crate) fn read_grants(
    masked: &[std::path::PathBuf],
) -> (Vec<std::path::PathBuf>, Vec<std::path::PathBuf>) {
    use std::collections::BTreeSet;
    let ancestors: BTreeSet<std::path::PathBuf> = masked
        .iter()
        .flat_map(|m| m.ancestors().skip(1).map(Path::to_path_buf))
        .collect();
    let hidden = |p: &Path| ancestors.contains(p) || masked.iter().any(|m| p.starts_with(m));
    let mut grants = Vec::new();
    for dir in &ancestors {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if hidden(&path) {
                continue;
            }
            match path.canonicalize() {
                Ok(real) if hidden(&real) => continue,
                _ => grants.push(path),
            }
        }
    }
    (ancestors.into_iter().collect(), grants)
}

/// A Landlock ruleset for `mode`, as an fd the child applies; `Ok(None)` when `mode` handles
/// nothing. Errors say which path or step failed.
pub(crate) fn ruleset(mode: Mode, roots: &Roots, extra: Rules) -> Result<Option<OwnedFd>, String> {
    let tcp_rules = extra.tcp;
    // Workspace mode's temp dir is the session's own folder where the view shows it (the
    // caller leaves `session_temp` unset where it does not).
    let temp = roots
        .session_temp
        .as_deref()
        .unwrap_or(roots.temp.as_path());
    let mut writable: Vec<&Path> = match mode {
        Mode::Full | Mode::Off => return Ok(None),
        Mode::Workspace => vec![roots.workspace.as_path(), temp],
        Mode::ReadOnly => vec![roots.temp.as_path()],
    };
    writable.extend(
        roots
            .also_writable
            .iter()
            .map(|p| p.as_path())
            .filter(|p| p.is_dir() && *p != Path::new("/")),
    );
    // Connecting to Unix sockets on disk only beneath the writable places (ABI 9+).
    let unix_sockets = true;
    let write = AccessFs::from_write(TARGET_ABI);
    let file_rights = write & AccessFs::from_file(TARGET_ABI);
    let err = |what: &str, e: &dyn std::fmt::Display| format!("Landlock: {what}: {e}");

    let mut handled = write;
    if unix_sockets {
        handled |= AccessFs::ResolveUnix;
    }
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let masked = if extra.reads {
        crate::sandbox::masked_paths(&roots.protection)
    } else {
        Vec::new()
    };
    let reads = extra.reads && !masked.is_empty();
    if reads {
        handled |= read;
    }
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled)
        .map_err(|e| err("handling write access", &e))?;
    if tcp_rules {
        rs = rs
            .handle_access(AccessNet::from_all(TARGET_ABI))
            .map_err(|e| err("handling TCP", &e))?;
    }
    // Abstract Unix sockets of the host (X11's, D-Bus's) are out of reach in both modes.
    let scopes: landlock::BitFlags<Scope> = Scope::Signal | Scope::AbstractUnixSocket;
    rs = rs.scope(scopes).map_err(|e| err("scoping signals", &e))?;
    let mut created = rs.create().map_err(|e| err("creating the ruleset", &e))?;

    for dir in writable {
        let fd = PathFd::new(dir).map_err(|e| err(&format!("opening {}", dir.display()), &e))?;
        let mut rights = write;
        if unix_sockets {
            rights |= AccessFs::ResolveUnix;
        }
        // Readable beneath, unless a masked path is: then its entries are granted below.
        let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        if reads && !masked.iter().any(|m| m.starts_with(&real)) {
            rights |= read;
        }
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| err(&format!("allowing {}", dir.display()), &e))?;
    }
    for dir in WRITABLE_DEVICE_DIRS {
        if let Ok(fd) = PathFd::new(dir) {
            created = created
                .add_rule(PathBeneath::new(fd, write))
                .map_err(|e| err(&format!("allowing {dir}"), &e))?;
        }
    }
    for file in WRITABLE_DEVICES {
        if let Ok(fd) = PathFd::new(file) {
            created = created
                .add_rule(PathBeneath::new(fd, file_rights))
                .map_err(|e| err(&format!("allowing {file}"), &e))?;
        }
    }
    if reads {
        let (ancestors, grants) = read_grants(&masked);
        for dir in &ancestors {
            if let Ok(fd) = PathFd::new(dir) {
                created = created
                    .add_rule(PathBeneath::new(fd, AccessFs::ReadDir))
                    .map_err(|e| err(&format!("allowing to list {}", dir.display()), &e))?;
            }
        }
        for path in &grants {
            let rights = if path.is_dir() {
                read
            } else {
                AccessFs::ReadFile.into()
            };
            // An entry that vanished, changed kind or cannot be opened (other processes' temp
            // files come and go) stays unreadable, and the rest of the ruleset still holds.
            if let Ok(fd) = PathFd::new(path) {
                let _ = (&mut created).add_rule(PathBeneath::new(fd, rights));
            }
        }
    }
    Ok(Option::<OwnedFd>::from(created))
}

/// The write rights a ruleset built by [`ruleset`] handles on this kernel (what a rule the child
/// adds may allow).
/// The kernel's ABI is asked once per process (it was asked on every command).
pub(crate) fn handled_write_rights() -> u64 {
    static RIGHTS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *RIGHTS.get_or_init(|| {
        let abi = landlock_abi().map_or(1, |v| v.min(TARGET_ABI as u32));
        AccessFs::from_write(ABI::from(abi as i32)).bits()
    })
}

/// What [`ruleset`] is built from.
type Recipe = (Mode, Roots, Rules);

/// Spare rulesets, one per recipe the last commands used (`None`: wanted, not built yet).
type Spares = std::sync::Mutex<Vec<(Recipe, Option<OwnedFd>)>>;

/// At most this many recipes keep a spare (sessions × modes in use).
const SPARE_RECIPES: usize = 16;

fn spares() -> &'static Spares {
    static SPARES: std::sync::OnceLock<Spares> = std::sync::OnceLock::new();
    SPARES.get_or_init(Default::default)
}

/// A ruleset of one command's own for `mode` (as [`ruleset`] builds it), never handed to
/// another: the child adds rules to it for its view's new mounts (a fresh `/dev/shm` per
/// command), and a ruleset shared by a session's commands gained those rules from every
/// command, so that each `landlock_restrict_self` took longer (22 µs at the first command,
/// 268 µs at the 1 500th, `notes/2026-12-03-ruleset-per-command.md`). Taken from the spare the
/// spawner built while idle ([`make_spares`]) where there is one, else built now.
pub(crate) fn ruleset_for_one_command(
    mode: Mode,
    roots: &Roots,
    extra: Rules,
) -> Result<Option<OwnedFd>, String> {
    let recipe = (mode, roots.clone(), extra);
    let spare = spares().lock().ok().and_then(|mut spares| {
        match spares.iter().position(|(r, _)| *r == recipe) {
            Some(at) => {
                // The most recent recipe last: the oldest goes first when there are too many.
                let mut entry = spares.remove(at);
                let taken = entry.1.take();
                spares.push(entry);
                taken
            }
            None => {
                if spares.len() >= SPARE_RECIPES {
                    spares.remove(0);
                }
                spares.push((recipe.clone(), None));
                None
            }
        }
    });
    match spare {
        Some(fd) => Ok(Some(fd)),
        None => ruleset(mode, roots, extra),
    }
}

/// Builds the spare rulesets the last commands' recipes want (`ruleset_for_one_command`): on
/// the spawner thread, once it has nothing to start.
pub(crate) fn make_spares() {
    let wanted: Vec<Recipe> = match spares().lock() {
        Ok(spares) => spares
            .iter()
            .filter(|(_, fd)| fd.is_none())
            .map(|(recipe, _)| recipe.clone())
            .collect(),
        Err(_) => return,
    };
    for recipe in wanted {
        let Ok(Some(fd)) = ruleset(recipe.0, &recipe.1, recipe.2) else {
            continue;
        };
        if let Ok(mut spares) = spares().lock() {
            if let Some((_, slot)) = spares
                .iter_mut()
                .find(|(r, fd)| *r == recipe && fd.is_none())
            {
                *slot = Some(fd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Whether `a` and `b` are the same open file (`kcmp(KCMP_FILE)`), or `None` where the
    /// kernel does not say.
    fn same_file(a: &OwnedFd, b: &OwnedFd) -> Option<bool> {
        const KCMP_FILE: libc::c_int = 0;
        // SAFETY: kcmp on two fds of this process.
        let r = unsafe {
            let pid = libc::getpid();
            libc::syscall(
                libc::SYS_kcmp,
                pid,
                pid,
                KCMP_FILE,
                a.as_raw_fd() as libc::c_ulong,
                b.as_raw_fd() as libc::c_ulong,
            )
        };
        (r >= 0).then_some(r == 0)
    }

    #[test]
    fn every_command_gets_a_ruleset_no_other_command_gets() {
        if landlock_abi().is_err() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let roots = Roots::new(dir.path().to_path_buf(), std::env::temp_dir());
        let mut seen: Vec<OwnedFd> = Vec::new();
        for round in 0..4 {
            if round % 2 == 1 {
                make_spares(); // the next one comes from the spare
                let spared = spares().lock().unwrap().iter().any(|(recipe, fd)| {
                    recipe.0 == Mode::Workspace && recipe.1 == roots && fd.is_some()
                });
                assert!(spared, "round {round}: the spawner made no spare");
            }
            let fd = ruleset_for_one_command(Mode::Workspace, &roots, Rules::default())
                .unwrap()
                .expect("workspace handles writes");
            for other in &seen {
                if let Some(same) = same_file(&fd, other) {
                    assert!(!same, "round {round}: a ruleset handed out twice");
                }
            }
            seen.push(fd);
        }
    }

    /// A command takes the spare of its own recipe only: another session's (other roots) would
    /// let it write there.
    #[test]
    fn a_command_never_gets_the_spare_of_another_sessions_roots() {
        if landlock_abi().is_err() {
            return;
        }
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let roots_a = Roots::new(a.path().to_path_buf(), std::env::temp_dir());
        let roots_b = Roots::new(b.path().to_path_buf(), std::env::temp_dir());
        for roots in [&roots_a, &roots_b] {
            let _ = ruleset_for_one_command(Mode::Workspace, roots, Rules::default()).unwrap();
        }
        make_spares();
        let spare_of = |roots: &Roots| -> OwnedFd {
            spares()
                .lock()
                .unwrap()
                .iter()
                .find(|(recipe, fd)| recipe.1 == *roots && fd.is_some())
                .and_then(|(_, fd)| fd.as_ref()?.try_clone().ok())
                .expect("a spare for these roots")
        };
        let (spare_a, spare_b) = (spare_of(&roots_a), spare_of(&roots_b));
        let taken = ruleset_for_one_command(Mode::Workspace, &roots_b, Rules::default())
            .unwrap()
            .unwrap();
        if let (Some(is_b), Some(is_a)) = (same_file(&taken, &spare_b), same_file(&taken, &spare_a))
        {
            assert!(is_b && !is_a, "B's command got another recipe's ruleset");
        }
    }
}
