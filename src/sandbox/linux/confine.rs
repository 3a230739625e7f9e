//! Turning a launch and a mode into a [`Confined`] one: which layers this command gets, from the
//! mode and what the machine supports.

use super::{plan_cache, ruleset, view_for, Layers, Prepared};
use crate::sandbox::{Confined, Launch, Limits, Mode, Roots, Support};

/// Applies `mode` to `launch`, using only the layers `support` says work.
pub(crate) fn confine_with(
    launch: Launch,
    mode: Mode,
    roots: &Roots,
    limits: Limits,
    support: &Support,
) -> Confined {
    if mode == Mode::Off {
        return Confined {
            launch,
            plan: None,
            notices: Vec::new(),
        };
    }
    // cgroup v2's subtree is set up (once, at the first command with a limit) before the
    // mode's gaps are read: a set-up that fails then shows there ("--max-processes (…)"),
    // instead of the command running without its limits unsaid.
    if limits.max_processes.is_some() || limits.max_memory.is_some() {
        super::cgroup_v2_now();
    }
    let mut notices = super::report::headline_gaps(mode, support);
    let namespaces = support.namespaces.is_ok();
    let confined_fs = mode != Mode::Full;
    // SAFETY: plain getter.
    let root = unsafe { libc::geteuid() } == 0;
    let user_namespace = support.user_namespace.is_ok()
        && (confined_fs || !root || support.root_needs_user_namespace);
    let proxied = mode == Mode::Workspace && roots.proxied_network;
    let proxied_here = proxied && super::super::network_proxied_here(support).is_ok();
    // Where it does not hold (an ordinary user's agent), `doctor` says so; no per-command
    // notice (it would change every such agent's first output).
    let net_ns = (mode == Mode::ReadOnly || proxied_here) && support.network_namespace.is_ok();
    let tcp_rules = mode == Mode::ReadOnly && !net_ns;
    let view = confined_fs && user_namespace && support.filesystem_view.is_ok();
    // The session's own temp folder only where the view can show it as the temp dir; the
    // package caches' layers only where overlayfs works too.
    // Never where a command could reach the layers' folder for writing (the session folder,
    // or the host temp dir where the view does not replace it, holds it): it could make an
    // upper folder a symlink to a host folder, which the next command's overlay would write.
    let exposed = match (mode, &roots.cache_layer) {
        (Mode::Workspace, Some(layer)) => layers_exposed(layer, roots, view),
        _ => None,
    };
    let layers_work = view && support.cache_layer.is_ok() && exposed.is_none();
    let read_only_caches = match (&support.cache_layer, exposed) {
        (Err(why), _) => Some(why.clone()),
        (Ok(()), Some(why)) => Some(why),
        (Ok(()), None) => None,
    };
    if let (Mode::Workspace, Some(_), Some(why)) = (mode, &roots.cache_layer, read_only_caches) {
        notices.push(format!(
            "Workspace mode: package caches (~/.cargo/registry, ~/.npm, ~/.cache, …) are \
             read-only here, so installs that fill them fail ({why}); use full mode for them"
        ));
    }
    let adjusted;
    let roots =
        if (view || roots.session_temp.is_none()) && (layers_work || roots.cache_layer.is_none()) {
            roots
        } else {
            adjusted = Roots {
                session_temp: roots.session_temp.clone().filter(|_| view),
                cache_layer: roots.cache_layer.clone().filter(|_| layers_work),
                ..roots.clone()
            };
            &adjusted
        };
    // Without the view, Landlock keeps the masked paths (credential files, the agent's own
    // folders) unreadable: everything else is granted (`landlock::read_grants`).
    let rules = super::landlock::Rules {
        tcp: tcp_rules,
        reads: confined_fs && !view,
    };
    let layers = Layers {
        namespaces,
        user_namespace,
        private_ipc_uts: user_namespace && confined_fs,
        private_proc: support.private_proc.is_ok(),
        network_namespace: net_ns,
        view,
        seccomp: confined_fs && support.seccomp.is_ok(),
        fresh_keyring: support.session_keyring.is_ok(),
    };
    // The view, the ruleset and their notices: built once per (mode, roots) and kept while
    // nothing they depend on changed (`plan_cache.rs`).
    let with_view = layers.namespaces && layers.view;
    if confined_fs {
        super::view_plan::make_missing_agent_dirs(mode, roots);
    }
    let (built, reused) =
        plan_cache::get_or_build(plan_cache::Key::new(mode, roots, support), || {
            let mut notices = Vec::new();
            let ruleset = match (mode, &support.landlock) {
                (Mode::Full, _) | (_, Err(_)) => Ok(None),
                (_, Ok(_)) => ruleset(mode, roots, rules).map(|fd| fd.map(std::sync::Arc::new)),
            };
            let view = with_view.then(|| view_for(mode, roots));
            if let Some(view) = &view {
                for refused in &view.refused_caches {
                    notices.push(format!(
                    "Workspace mode: a package cache stays read-only, so installs that fill it \
                     fail (no copy-on-write layer for {refused}); use full mode for them"
                ));
                }
            }
            plan_cache::Built {
                view,
                ruleset,
                notices,
            }
        });
    let ruleset = match &built.ruleset {
        // The plan's ruleset says Landlock works for this mode; the command gets one of its
        // own, which its child may add rules to (`landlock::ruleset_for_one_command`).
        Ok(Some(_)) => match super::landlock::ruleset_for_one_command(mode, roots, rules) {
            Ok(fd) => fd.map(std::sync::Arc::new),
            Err(why) => {
                notices.push(format!(
                    "{} mode: writes are not restricted for this command ({why})",
                    mode.name()
                ));
                None
            }
        },
        Ok(None) => None,
        Err(why) => {
            notices.push(format!(
                "{} mode: writes are not restricted for this command ({why})",
                mode.name()
            ));
            None
        }
    };
    notices.extend(built.notices.iter().cloned());
    let mut plan = Prepared::new(mode, layers, built.view.clone(), ruleset, limits, reused);
    plan.also_hosts = roots.also_hosts.clone();
    // After the cgroup set-up above, so this says what the limits are, not what they may be.
    notices.extend(super::report::limit_notices(mode, limits));
    Confined {
        launch,
        plan: Some(plan),
        notices,
    }
}

/// Why commands could write into the caches' layers' folder `layer` (it lies in or over a
/// place they may write: the session folder, or the host's temp dir where the view does not
/// replace it), or `None`.
fn layers_exposed(layer: &std::path::Path, roots: &Roots, view: bool) -> Option<String> {
    let canonical = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let layer = canonical(layer);
    let workspace = canonical(&roots.workspace);
    let mut writable = vec![("the session folder", workspace)];
    if !view || roots.session_temp.is_none() {
        writable.push(("the temp dir", canonical(&roots.temp)));
    }
    writable
        .into_iter()
        .find(|(_, place)| layer.starts_with(place) || place.starts_with(&layer))
        .map(|(name, place)| {
            format!(
                "the session's layers' folder {} lies in {name} {}, where commands could change \
                 them; set TMPDIR outside it",
                layer.display(),
                place.display()
            )
        })
}
