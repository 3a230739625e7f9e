//! Why a layer the probe tried does not work here, named from the machine's own facts (the
//! AppArmor label and sysctls, the seccomp mode, capabilities, `/proc`'s mounts, the temp dir's
//! filesystem), and what would enable it, with the cost of each option. Ubuntu's restriction on
//! unprivileged user namespaces gets the AppArmor profile for this binary's real path. See
//! `notes/2026-12-06-doctor-causes.md`.
//!
//! The facts are read once ([`Facts::read`]); every decision is a pure function of them and of
//! the probe's failed step ([`Failure`]), so each case is tested without the machine it names.

use std::path::{Path, PathBuf};

use super::step::Step;

/// A probe that failed: which step (if the child got that far) with which errno, and the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The step between fork and exec that failed (`None`: the probe failed otherwise).
    pub step: Option<Step>,
    /// Its errno (0 when unknown).
    pub errno: i32,
    /// What failed, in words ("creating namespaces (unshare) failed: …").
    pub text: String,
}

/// What this machine says about itself, read once per probe.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// The agent runs as uid 0.
    pub root: bool,
    /// `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu's patch; `None`: absent).
    pub restrict_userns: Option<bool>,
    /// `kernel.apparmor_restrict_unprivileged_unconfined` (`None`: absent).
    pub restrict_unconfined: Option<bool>,
    /// `kernel.unprivileged_userns_clone=0` (Debian's older kernels).
    pub userns_clone_off: bool,
    /// `user.max_user_namespaces=0`.
    pub max_userns_zero: bool,
    /// AppArmor is enabled in this kernel.
    pub apparmor: bool,
    /// This process's AppArmor label (`unconfined`, `containers-default-0.62.2 (enforce)`, …).
    pub label: Option<String>,
    /// This process runs under a seccomp filter (`Seccomp: 2`).
    pub seccomp_filter: bool,
    /// CAP_SYS_ADMIN is in this process's effective set.
    pub cap_sys_admin: bool,
    /// `unshare(0)`, which changes nothing, is refused (EPERM): a seccomp filter refuses
    /// `unshare` whatever its flags (Docker's default profile without CAP_SYS_ADMIN).
    pub unshare_refused: bool,
    /// The container engine this runs in, if it says (`/run/.containerenv`, `/.dockerenv`).
    pub container: Option<&'static str>,
    /// This process's user namespace maps only part of the ids: how many uids it maps.
    pub partial_id_map: Option<u64>,
    /// Mounts over parts of `/proc` (Docker's and Podman's masks: `/proc/kcore`, `/proc/keys`,
    /// …), which make the kernel refuse a fresh procfs in a user namespace.
    pub proc_masked: Vec<String>,
    /// The temp dir (where workspace mode's layers live) is on overlayfs.
    pub temp_on_overlayfs: bool,
    /// This binary's real path (`/proc/self/exe`; the zygote re-executes the same path).
    pub exe: Option<PathBuf>,
}

/// CAP_SYS_ADMIN's bit in the capability sets.
const CAP_SYS_ADMIN: u32 = 21;

fn sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|v| v.trim().to_string())
}

impl Facts {
    /// Reads the facts of this process and machine.
    pub(crate) fn read() -> Facts {
        let flag = |path: &str| sysctl(path).map(|v| v == "1");
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or_default()
                .to_string()
        };
        let cap_eff = u64::from_str_radix(&field("CapEff:"), 16).unwrap_or(0);
        let label = sysctl("/proc/self/attr/apparmor/current")
            .or_else(|| sysctl("/proc/self/attr/current"))
            .filter(|l| !l.is_empty());
        let container = if Path::new("/run/.containerenv").exists() {
            Some("podman")
        } else if Path::new("/.dockerenv").exists() {
            Some("docker")
        } else {
            None
        };
        Facts {
            // SAFETY: plain getter.
            root: unsafe { libc::geteuid() } == 0,
            restrict_userns: flag("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
            restrict_unconfined: flag("/proc/sys/kernel/apparmor_restrict_unprivileged_unconfined"),
            userns_clone_off: sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref()
                == Some("0"),
            max_userns_zero: sysctl("/proc/sys/user/max_user_namespaces").as_deref() == Some("0"),
            apparmor: sysctl("/sys/module/apparmor/parameters/enabled").as_deref() == Some("Y"),
            label,
            seccomp_filter: field("Seccomp:") == "2",
            cap_sys_admin: cap_eff & (1 << CAP_SYS_ADMIN) != 0,
            // SAFETY: unshare with no flags changes nothing; only its refusal is asked.
            unshare_refused: unsafe { libc::unshare(0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM),
            container,
            partial_id_map: std::fs::read_to_string("/proc/self/uid_map")
                .ok()
                .and_then(|map| partial_map(&map)),
            proc_masked: proc_masks(
                &std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
            ),
            temp_on_overlayfs: on_overlayfs(&std::env::temp_dir()),
            exe: std::fs::read_link("/proc/self/exe").ok(),
        }
    }

    /// Confined by an AppArmor profile (not `unconfined`), with its name.
    fn profile(&self) -> Option<&str> {
        let label = self.label.as_deref()?;
        let name = label.split(" (").next().unwrap_or(label);
        (name != "unconfined" && !label.ends_with("(unconfined)")).then_some(name)
    }

    /// Ubuntu's restriction applies to this process (the sysctl is on and it is not root), or
    /// it runs confined by the `unprivileged_userns` profile itself (as the lab reproduces it).
    fn ubuntu_restricted(&self) -> bool {
        (self.restrict_userns == Some(true) && !self.root)
            || self
                .profile()
                .is_some_and(|p| p.starts_with("unprivileged_userns"))
    }
}

/// How many uids `uid_map` maps, where that is not every id (`0 0 4294967295`).
fn partial_map(uid_map: &str) -> Option<u64> {
    let total: u64 = uid_map
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
        .sum();
    (total < u64::from(u32::MAX)).then_some(total)
}

/// The mount points below `/proc` (a container's masks), from mountinfo.
fn proc_masks(mountinfo: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|point| point.starts_with("/proc/"))
        .map(str::to_string)
        .collect()
}

fn on_overlayfs(path: &Path) -> bool {
    const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;
    let Ok(c) = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
    else {
        return false;
    };
    // SAFETY: statfs into a zeroed struct of ours, with a NUL-terminated path.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == OVERLAYFS_SUPER_MAGIC
    }
}

/// Why user namespaces fail here, as the machine's facts and the failed step name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Ubuntu 23.10+: `unshare(CLONE_NEWUSER)` worked, the new namespace was confined by the
    /// `unprivileged_userns` profile, and the id-map write failed (EPERM).
    UbuntuMapRefused,
    /// Ubuntu's restriction refused the `unshare` itself (the `unprivileged_userns` profile is
    /// missing, `…_unconfined=1`, or the process runs confined by it from exec).
    UbuntuUnshareRefused,
    /// An AppArmor profile without `userns,` confines this process (a container's).
    AppArmorProfile(String),
    /// A seccomp filter refused `unshare` (Docker's default allows it only with SYS_ADMIN).
    Seccomp,
    /// Root without CAP_SYS_ADMIN and without a filter (a chroot, a capability-dropping runtime).
    MissingCapability,
    /// Root's PID + mount namespaces without a user namespace: refused for want of
    /// CAP_SYS_ADMIN (a container engine's default capabilities), the filter allowing `unshare`.
    NoCapSysAdmin,
    /// This user namespace maps only part of the ids (rootless podman or docker, LXD).
    PartialIdMap(u64),
    /// A sysctl turns them off.
    Sysctl(&'static str),
    /// None of the above.
    Unknown,
}

/// What stopped the user namespace (or, for root, the namespaces) here.
pub(crate) fn userns_cause(failure: &Failure, facts: &Facts) -> Cause {
    let at_map = matches!(
        failure.step,
        Some(Step::Setgroups | Step::UidMap | Step::GidMap)
    );
    let at_unshare = failure.step == Some(Step::Unshare);
    let refused = matches!(failure.errno, libc::EPERM | libc::EACCES);
    if facts.ubuntu_restricted() && refused {
        if at_map {
            return Cause::UbuntuMapRefused;
        }
        if at_unshare {
            return Cause::UbuntuUnshareRefused;
        }
    }
    if at_map {
        if let Some(n) = facts.partial_id_map {
            return Cause::PartialIdMap(n);
        }
    }
    if at_unshare && failure.errno == libc::ENOSPC && facts.max_userns_zero {
        return Cause::Sysctl("user.max_user_namespaces=0");
    }
    if at_unshare && facts.userns_clone_off && !facts.root {
        return Cause::Sysctl("kernel.unprivileged_userns_clone=0");
    }
    if at_unshare && failure.errno == libc::EACCES && facts.apparmor {
        if let Some(profile) = facts.profile() {
            return Cause::AppArmorProfile(profile.to_string());
        }
    }
    if at_unshare && failure.errno == libc::EPERM {
        if facts.seccomp_filter {
            return Cause::Seccomp;
        }
        if facts.root && !facts.cap_sys_admin {
            return Cause::MissingCapability;
        }
    }
    if at_unshare && failure.errno == libc::ENOSPC {
        return Cause::Sysctl("user.max_user_namespaces (the limit is reached or 0)");
    }
    Cause::Unknown
}

/// What stopped root's PID + mount namespaces without a user namespace (the probe tried after
/// the user namespace failed): with EPERM from `unshare`, the filter where it refuses `unshare`
/// itself, else the missing CAP_SYS_ADMIN those namespaces need.
pub(crate) fn root_namespaces_cause(failure: &Failure, facts: &Facts) -> Cause {
    if failure.step == Some(Step::Unshare) && failure.errno == libc::EPERM && facts.root {
        if facts.seccomp_filter && facts.unshare_refused {
            return Cause::Seccomp;
        }
        if !facts.cap_sys_admin {
            return Cause::NoCapSysAdmin;
        }
    }
    userns_cause(failure, facts)
}

/// The one-line reason a layer's `[missing]` line gives for `cause`.
pub(crate) fn cause_text(failure: &Failure, cause: &Cause, facts: &Facts) -> String {
    let why = match cause {
        Cause::UbuntuMapRefused => "Ubuntu's restriction on unprivileged user namespaces \
            (kernel.apparmor_restrict_unprivileged_userns=1): unshare(CLONE_NEWUSER) worked, \
            then AppArmor's `unprivileged_userns` profile took every capability in the new \
            namespace, so writing its id map failed; an AppArmor profile for acp-bash lifts it \
            (printed below)"
            .to_string(),
        Cause::UbuntuUnshareRefused => "Ubuntu's restriction on unprivileged user namespaces \
            (AppArmor refused unshare(CLONE_NEWUSER) for this unconfined program); an AppArmor \
            profile for acp-bash lifts it (printed below)"
            .to_string(),
        Cause::AppArmorProfile(profile) => format!(
            "the AppArmor profile `{profile}` confines this process and has no `userns,` rule, \
             so the kernel refuses user namespaces (EACCES){}; see below",
            match facts.container {
                Some(engine) => format!(" — {engine}'s default profile for containers"),
                None => String::new(),
            }
        ),
        Cause::Seccomp => format!(
            "{}; see below",
            match (facts.container, facts.unshare_refused) {
                (Some("docker"), true) =>
                    "Docker's seccomp filter refuses unshare itself (its \
                    default profile allows it only with CAP_SYS_ADMIN)",
                (Some(_), true) => "the container's seccomp filter refuses unshare itself",
                (None, true) => "a seccomp filter refuses unshare itself",
                (Some(_), false) =>
                    "the container's seccomp filter probably refuses unshare \
                    with these flags (it allows unshare itself)",
                (None, false) =>
                    "a seccomp filter probably refuses unshare with these flags \
                    (it allows unshare itself)",
            }
        ),
        Cause::MissingCapability => "root here lacks CAP_SYS_ADMIN and may not create user \
            namespaces (a chroot, or a runtime that drops capabilities); see below"
            .to_string(),
        Cause::NoCapSysAdmin => format!(
            "PID and mount namespaces without a user namespace need CAP_SYS_ADMIN, which root \
             lacks here{}; see below",
            match facts.container {
                Some(engine) => format!(" ({engine}'s default capabilities)"),
                None => String::new(),
            }
        ),
        Cause::PartialIdMap(n) => format!(
            "this process's user namespace maps only {n} user ids (a rootless container), and \
             mapping every id failed"
        ),
        Cause::Sysctl(name) => format!("user namespaces are off here ({name})"),
        Cause::Unknown => {
            if facts.root {
                "a seccomp profile or a container runtime that forbids unshare (run it with \
                 --cap-add SYS_ADMIN, or where user namespaces are allowed)"
                    .to_string()
            } else {
                "this process may not create user namespaces (a container's seccomp profile, or \
                 it runs inside a chroot)"
                    .to_string()
            }
        }
    };
    format!("{} — {why}", failure.text)
}

/// The AppArmor profile that lets the binary at `exe` create user namespaces under Ubuntu's
/// restriction (the shape of Ubuntu's own profiles for Chrome, Flatpak and runc).
pub(crate) fn apparmor_profile(exe: &Path) -> String {
    let path = exe.display().to_string();
    let attach = if path.chars().any(|c| c.is_whitespace() || c == '"') {
        format!("\"{}\"", path.replace('"', "\\\""))
    } else {
        path
    };
    format!(
        "abi <abi/4.0>,\ninclude <tunables/global>\n\nprofile acp-bash {attach} \
         flags=(unconfined) {{\n  userns,\n\n  include if exists <local/acp-bash>\n}}\n"
    )
}

/// One shell line that writes `profile` to `/etc/apparmor.d/acp-bash` (a `printf` of each line,
/// single-quoted: no here-document, whose end marker breaks when the text is copied indented).
pub(crate) fn install_command(profile: &str) -> String {
    let quoted: Vec<String> = profile
        .lines()
        .map(|l| format!("'{}'", l.replace('\'', "'\\''")))
        .collect();
    format!(
        "printf '%s\\n' {} | sudo tee /etc/apparmor.d/acp-bash >/dev/null",
        quoted.join(" ")
    )
}

/// What would enable more here, each option with its cost: blocks of text for `doctor`.
pub(crate) fn advice(
    causes: &[Cause],
    proc_refused: bool,
    overlay_refused: bool,
    facts: &Facts,
) -> Vec<String> {
    let mut out = Vec::new();
    for cause in causes {
        cause_advice(Some(cause), facts, &mut out);
    }
    proc_and_overlay_advice(proc_refused, overlay_refused, facts, &mut out);
    out
}

fn cause_advice(cause: Option<&Cause>, facts: &Facts, out: &mut Vec<String>) {
    match cause {
        Some(Cause::UbuntuMapRefused | Cause::UbuntuUnshareRefused) => {
            let exe = facts
                .exe
                .clone()
                .unwrap_or_else(|| PathBuf::from("/usr/local/bin/acp-bash"));
            let profile = apparmor_profile(&exe);
            let indented: String = profile
                .lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>();
            out.push(format!(
                "Ubuntu's AppArmor restriction on user namespaces: let this binary ({}) create \
                 them with a profile of its own, as Ubuntu does for Chrome, Flatpak and runc:\n\
                 {indented}Install and load it once, as root (each command is one line, so \
                 copying it indented does no harm):\n  {}\n  \
                 sudo apparmor_parser -r /etc/apparmor.d/acp-bash\n\
                 It names this binary's real path (the per-session zygote re-executes the same \
                 file): after moving or reinstalling acp-bash elsewhere, run `acp-bash doctor` \
                 again and write the new path. It lifts the restriction for acp-bash alone; \
                 widening /usr/bin/bwrap's profile or turning the sysctl off would lift it for \
                 every program, so neither is suggested.",
                exe.display(),
                install_command(&profile),
            ));
        }
        Some(Cause::AppArmorProfile(profile)) => out.push(format!(
            "The AppArmor profile `{profile}` denies user namespaces. Options for the container \
             (`podman run` / `docker run`):\n  \
             --security-opt apparmor=unconfined  — cost: AppArmor stops confining everything in \
             the container (its mount, ptrace and /proc write rules go too)\n  \
             --security-opt apparmor=NAME, NAME a copy of `{profile}` with a `userns,` rule, \
             loaded on the host with apparmor_parser -r  — cost: processes in the container may \
             create user namespaces (more of the kernel reachable), nothing else changes"
        )),
        Some(Cause::Seccomp) => out.push(
            "The seccomp filter refuses unshare. Options for the container:\n  \
             --security-opt seccomp=PROFILE.json, the engine's default profile with unshare, \
             clone and setns allowed  — cost: processes in the container may create \
             namespaces (more of the kernel reachable)\n  \
             --security-opt seccomp=unconfined  — cost: no system-call filter at all for \
             anything in the container\n  \
             --cap-add SYS_ADMIN  — cost: root in the container may mount, and much more (close \
             to --privileged); on an AppArmor host its profile still denies mounts"
                .to_string(),
        ),
        Some(Cause::MissingCapability) => out.push(
            "Root here lacks CAP_SYS_ADMIN. Options: --cap-add SYS_ADMIN for the container \
             (cost: root in it may mount, and much more), or run acp-bash as an ordinary user \
             where unprivileged user namespaces are allowed (no cost)."
                .to_string(),
        ),
        Some(Cause::NoCapSysAdmin) => out.push(
            "Root here lacks CAP_SYS_ADMIN, which PID and mount namespaces without a user \
             namespace need. Where the user namespace works, acp-bash uses it in every mode \
             and needs nothing more; to give root its namespaces without one: --cap-add \
             SYS_ADMIN  — cost: root in the container may mount, and much more (close to \
             --privileged); on an AppArmor host its profile still denies mounts"
                .to_string(),
        ),
        _ => {}
    }
}

fn proc_and_overlay_advice(
    proc_refused: bool,
    overlay_refused: bool,
    facts: &Facts,
    out: &mut Vec<String>,
) {
    if proc_refused && !facts.proc_masked.is_empty() {
        let shown: Vec<&str> = facts
            .proc_masked
            .iter()
            .take(4)
            .map(String::as_str)
            .collect();
        out.push(format!(
            "/proc is partly covered here ({}{}), and the kernel mounts no fresh procfs where \
             one is partly hidden. Options for the container:\n  \
             podman: --security-opt unmask=ALL; docker: --security-opt systempaths=unconfined  \
             — cost: the container sees /proc/kcore, /proc/keys, /sys/firmware and may write \
             /proc/sys; acp-bash's commands then get a private /proc of their own",
            shown.join(", "),
            if facts.proc_masked.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        ));
    }
    if overlay_refused && facts.temp_on_overlayfs {
        out.push(format!(
            "The temp dir {} is on overlayfs (the container's own root), and overlayfs takes \
             no upper folder there, so workspace mode's package caches stay read-only. Mount a \
             volume there (`--tmpfs /tmp`, or `-v NAME:/tmp`) or set TMPDIR to a folder on one \
             — cost: none to the sandbox (a tmpfs counts against the container's memory)",
            std::env::temp_dir().display()
        ));
    }
}

/// The overlayfs probe's reason: the real one where the temp dir is on overlayfs.
pub(crate) fn overlay_text(failure: &str, facts: &Facts) -> String {
    if facts.temp_on_overlayfs {
        format!(
            "{failure} — the upper folder would be in {}, on overlayfs (a container's own \
             root), which overlayfs refuses as an upper folder; see below",
            std::env::temp_dir().display()
        )
    } else {
        format!(
            "{failure} — overlayfs in a user namespace needs Linux 5.11 or newer, and an upper \
             folder on a filesystem overlayfs accepts"
        )
    }
}

/// The private-/proc probe's reason.
pub(crate) fn proc_text(failure: &str, facts: &Facts) -> String {
    if facts.proc_masked.is_empty() {
        format!(
            "{failure} — /proc is partly hidden here (as in many containers), so the kernel \
             refuses a fresh one"
        )
    } else {
        format!(
            "{failure} — {} mounts cover parts of /proc here ({}, …: a container's masks), so \
             the kernel refuses a fresh one; see below",
            facts.proc_masked.len(),
            facts.proc_masked[0]
        )
    }
}

/// The keyring probe's reason: where `keyctl` itself is refused (a container's seccomp filter),
/// commands cannot use any keyring, so there is nothing of the agent's to share.
pub(crate) fn keyring_refused_everywhere(failure: &Failure) -> bool {
    failure.step == Some(Step::SessionKeyring)
        && matches!(failure.errno, libc::EPERM | libc::ENOSYS | libc::EACCES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(step: Step, errno: i32) -> Failure {
        Failure {
            step: Some(step),
            errno,
            text: format!("{} failed", step.describe()),
        }
    }

    fn ubuntu() -> Facts {
        Facts {
            restrict_userns: Some(true),
            apparmor: true,
            label: Some("unconfined".into()),
            exe: Some("/home/me/.cargo/bin/acp-bash".into()),
            ..Facts::default()
        }
    }

    /// Ubuntu's two failure points, as an ordinary user: the id-map write refused after a
    /// working unshare (Ubuntu 23.10+ with the stock profile), and the unshare refused.
    #[test]
    fn ubuntus_restriction_is_recognised_at_both_failure_points() {
        for step in [Step::Setgroups, Step::UidMap, Step::GidMap] {
            assert_eq!(
                userns_cause(&failed(step, libc::EPERM), &ubuntu()),
                Cause::UbuntuMapRefused
            );
        }
        for errno in [libc::EPERM, libc::EACCES] {
            assert_eq!(
                userns_cause(&failed(Step::Unshare, errno), &ubuntu()),
                Cause::UbuntuUnshareRefused
            );
        }
        // The lab's reproduction: the binary runs confined by `unprivileged_userns` from exec,
        // on a kernel without the sysctl.
        let lab = Facts {
            restrict_userns: None,
            label: Some("unprivileged_userns (enforce)".into()),
            ..ubuntu()
        };
        assert_eq!(
            userns_cause(&failed(Step::Unshare, libc::EPERM), &lab),
            Cause::UbuntuUnshareRefused
        );
        // Root is exempt on Ubuntu: the sysctl alone does not explain root's failure.
        let root = Facts {
            root: true,
            ..ubuntu()
        };
        assert_ne!(
            userns_cause(&failed(Step::UidMap, libc::EPERM), &root),
            Cause::UbuntuMapRefused
        );
        // Without the sysctl, an unconfined user's map failure is not blamed on Ubuntu.
        let debian = Facts {
            restrict_userns: None,
            ..ubuntu()
        };
        assert_eq!(
            userns_cause(&failed(Step::UidMap, libc::EPERM), &debian),
            Cause::Unknown
        );
    }

    #[test]
    fn the_ubuntu_advice_is_the_profile_for_this_binarys_path_and_never_bwraps_or_the_sysctl() {
        let facts = ubuntu();
        let text = advice(&[Cause::UbuntuMapRefused], false, false, &facts).join("\n");
        assert!(
            text.contains("profile acp-bash /home/me/.cargo/bin/acp-bash flags=(unconfined) {"),
            "{text}"
        );
        assert!(text.contains("    abi <abi/4.0>,"), "{text}");
        assert!(text.contains("  userns,"), "{text}");
        assert!(
            text.contains("sudo apparmor_parser -r /etc/apparmor.d/acp-bash"),
            "{text}"
        );
        // Neither door for every program is proposed as a step.
        assert!(!text.contains("sysctl -w"), "{text}");
        assert!(!text.contains("=0"), "{text}");
        assert!(!text.contains("/etc/apparmor.d/bwrap"), "{text}");
        // The install line, run by a real shell (without sudo), writes the profile exactly,
        // also for a path with a quote and a space.
        for exe in ["/home/me/.cargo/bin/acp-bash", "/opt/it's mine/acp-bash"] {
            let profile = apparmor_profile(Path::new(exe));
            let line = install_command(&profile);
            let printf = line
                .strip_suffix(" | sudo tee /etc/apparmor.d/acp-bash >/dev/null")
                .expect("the line ends with the tee");
            let out = std::process::Command::new("sh")
                .args(["-c", printf])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), profile, "{line}");
        }
        // A path with a space is quoted in the profile.
        assert!(apparmor_profile(Path::new("/opt/my tools/acp-bash"))
            .contains("profile acp-bash \"/opt/my tools/acp-bash\" flags=(unconfined)"));
        let line = cause_text(
            &failed(Step::UidMap, libc::EPERM),
            &Cause::UbuntuMapRefused,
            &facts,
        );
        assert!(
            line.contains("kernel.apparmor_restrict_unprivileged_userns=1"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
    }

    /// Rootful podman on an AppArmor host: `containers-default-*` (EACCES) is named, not
    /// seccomp or a capability; Docker's seccomp (EPERM, filter on, no SYS_ADMIN) is named.
    #[test]
    fn a_containers_real_cause_is_named() {
        let podman = Facts {
            root: true,
            apparmor: true,
            label: Some("containers-default-0.62.2 (enforce)".into()),
            seccomp_filter: true,
            cap_sys_admin: false,
            container: Some("podman"),
            ..Facts::default()
        };
        let cause = userns_cause(&failed(Step::Unshare, libc::EACCES), &podman);
        assert_eq!(
            cause,
            Cause::AppArmorProfile("containers-default-0.62.2".into())
        );
        let text = advice(std::slice::from_ref(&cause), false, false, &podman).join("\n");
        assert!(text.contains("--security-opt apparmor=unconfined  — cost:"));
        let line = cause_text(&failed(Step::Unshare, libc::EACCES), &cause, &podman);
        assert!(
            !line.contains("SYS_ADMIN") && !line.contains("seccomp"),
            "{line}"
        );

        let docker = Facts {
            root: true,
            seccomp_filter: true,
            container: Some("docker"),
            ..Facts::default()
        };
        let cause = userns_cause(&failed(Step::Unshare, libc::EPERM), &docker);
        assert_eq!(cause, Cause::Seccomp);
        let text = advice(std::slice::from_ref(&cause), false, false, &docker).join("\n");
        for option in [
            "seccomp=unconfined  — cost",
            "--cap-add SYS_ADMIN  — cost",
            "seccomp=PROFILE.json",
        ] {
            assert!(text.contains(option), "{option}: {text}");
        }
        let chroot = Facts {
            root: true,
            ..Facts::default()
        };
        assert_eq!(
            userns_cause(&failed(Step::Unshare, libc::EPERM), &chroot),
            Cause::MissingCapability
        );
        let rootless = Facts {
            root: true,
            partial_id_map: Some(65537),
            ..Facts::default()
        };
        assert_eq!(
            userns_cause(&failed(Step::UidMap, libc::EPERM), &rootless),
            Cause::PartialIdMap(65537)
        );
    }

    /// Rootful podman in the lab's VM: the user namespace refused by AppArmor (EACCES), then
    /// root's PID + mount namespaces alone refused (EPERM) for want of CAP_SYS_ADMIN, podman's
    /// filter allowing `unshare`: the capability is named, not Docker's profile; Docker's
    /// filter, which refuses `unshare` itself, is named where it does.
    #[test]
    fn roots_namespaces_name_the_missing_capability_or_the_filter_that_refuses_unshare() {
        let podman = Facts {
            root: true,
            apparmor: true,
            label: Some("containers-default-0.62.2 (enforce)".into()),
            seccomp_filter: true,
            container: Some("podman"),
            ..Facts::default()
        };
        let userns = failed(Step::Unshare, libc::EACCES);
        let plain = failed(Step::Unshare, libc::EPERM);
        let first = userns_cause(&userns, &podman);
        let second = root_namespaces_cause(&plain, &podman);
        assert_eq!(second, Cause::NoCapSysAdmin);
        let line = cause_text(&plain, &second, &podman);
        assert!(
            line.contains("need CAP_SYS_ADMIN") && line.contains("podman's default capabilities"),
            "{line}"
        );
        assert!(
            !line.contains("Docker") && !line.contains("seccomp"),
            "{line}"
        );
        let text = advice(&[first, second], false, false, &podman).join("\n");
        assert!(
            text.contains("--security-opt apparmor=unconfined  — cost:"),
            "{text}"
        );
        assert!(text.contains("--cap-add SYS_ADMIN  — cost:"), "{text}");

        // Docker's default profile: `unshare` itself refused without CAP_SYS_ADMIN.
        let docker = Facts {
            root: true,
            seccomp_filter: true,
            unshare_refused: true,
            container: Some("docker"),
            ..Facts::default()
        };
        for cause in [
            userns_cause(&plain, &docker),
            root_namespaces_cause(&plain, &docker),
        ] {
            assert_eq!(cause, Cause::Seccomp);
            let line = cause_text(&plain, &cause, &docker);
            assert!(
                line.contains("Docker's seccomp filter refuses unshare itself"),
                "{line}"
            );
        }
        // A filter that allows unshare itself is not said to refuse it for sure, nor Docker's
        // in a podman container.
        let line = cause_text(&plain, &Cause::Seccomp, &podman);
        assert!(
            line.contains("probably") && !line.contains("Docker"),
            "{line}"
        );
        // Root with CAP_SYS_ADMIN and no filter: neither is blamed.
        let host = Facts {
            root: true,
            cap_sys_admin: true,
            ..Facts::default()
        };
        assert_eq!(root_namespaces_cause(&plain, &host), Cause::Unknown);
    }

    #[test]
    fn masked_proc_and_an_overlayfs_temp_dir_are_named_with_their_options() {
        let facts = Facts {
            proc_masked: vec!["/proc/kcore".into(), "/proc/keys".into()],
            temp_on_overlayfs: true,
            ..Facts::default()
        };
        let text = advice(&[], true, true, &facts).join("\n");
        assert!(text.contains("/proc/kcore, /proc/keys"), "{text}");
        assert!(text.contains("unmask=ALL") && text.contains("systempaths=unconfined"));
        assert!(text.contains("--tmpfs /tmp"), "{text}");
        let line = overlay_text("mounting failed", &facts);
        assert!(
            line.contains("on overlayfs") && !line.contains("5.11"),
            "{line}"
        );
        let bare = Facts::default();
        assert!(overlay_text("mounting failed", &bare).contains("5.11"));
        assert!(advice(&[], true, true, &bare).is_empty());
    }

    #[test]
    fn mountinfo_and_uid_map_are_read_right() {
        let info = "22 1 0:21 / /proc rw - proc proc rw\n\
                    30 22 0:5 /null /proc/kcore ro - devtmpfs udev rw\n\
                    31 1 0:22 / /sys rw - sysfs sysfs rw\n";
        assert_eq!(proc_masks(info), vec!["/proc/kcore".to_string()]);
        assert_eq!(partial_map("         0          0 4294967295\n"), None);
        assert_eq!(
            partial_map("0 1000 1\n1 100000 65536\n"),
            Some(65537),
            "rootless podman's map"
        );
    }
}
