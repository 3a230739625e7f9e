//! Turning a launch and a mode into a [`Confined`] one: which layers this command gets, from the
//! mode and what the machine supports.

use super::{ruleset, Layers, Prepared};
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
    let mut notices = super::report::headline_gaps(mode, support);
    let namespaces = support.namespaces.is_ok();
    let confined_fs = mode != Mode::Full;
    // SAFETY: plain getter.
    let root = unsafe { libc::geteuid() } == 0;
    let user_namespace = support.user_namespace.is_ok() && (confined_fs || !root);
    let net_ns = mode == Mode::ReadOnly && support.network_namespace.is_ok();
    let tcp_rules = mode == Mode::ReadOnly && !net_ns;
    let view = confined_fs && user_namespace && support.filesystem_view.is_ok();
    // The session's own temp folder only where the view can show it as the temp dir; the
    // package caches' layers only where overlayfs works too.
    let layers_work = view && support.cache_layer.is_ok();
    if let (Mode::Workspace, Some(_), Err(why)) = (mode, &roots.cache_layer, &support.cache_layer) {
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
    let ruleset = match (mode, &support.landlock) {
        (Mode::Full, _) | (_, Err(_)) => None,
        (_, Ok(_)) => match ruleset(mode, roots, tcp_rules) {
            Ok(fd) => fd,
            Err(why) => {
                notices.push(format!(
                    "{} mode: writes are not restricted for this command ({why})",
                    mode.name()
                ));
                None
            }
        },
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
    Confined {
        launch,
        plan: Some(Prepared::new(mode, roots, layers, ruleset, limits)),
        notices,
    }
}
