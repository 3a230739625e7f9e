//! Which sessions keep their helpers (Linux: a zygote per mode, and its spare PID 1) between
//! commands (`notes/2026-12-06-economy.md`). At most `cap` sessions keep their zygotes, the
//! ones that ran a command most recently, and only the [`SPARES_KEPT`] most recent of those
//! keep a spare; a session idle for `idle` lets its helpers go as well. A session without helpers loses nothing: its next command starts them
//! again, exactly as its first command did (the same path, the same guarantees; only the
//! namespaces and the view are built again, as the first command's were).
//!
//! Locks: a session's helpers are ended under its own lock, never while this list's lock is
//! held, and a session that is busy (its lock taken: a command being started) is skipped: it
//! puts itself back at the head of the list once its command has started.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use super::SessionSandbox;

/// How many of the warm sessions (the most recently used) also keep their spare helpers
/// (Linux: a zygote's spare PID 1): at most `cap` zygotes and this many spares, so 1,000
/// sessions leave at most `cap + 2` helper processes. The others' next command is cloned
/// fresh by their zygote (`notes/2026-12-06-economy-spares.md`: what that costs).
pub(crate) const SPARES_KEPT: usize = 2;

/// The sessions with helpers, shared by an engine's sessions. Dropped with the engine: its
/// timer thread then ends.
pub(crate) struct WarmSessions {
    shared: Arc<Shared>,
}

struct Shared {
    cap: usize,
    idle: Duration,
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// Least recently used first: (session id, the session, its last use).
    sessions: Vec<(u64, Weak<SessionSandbox>, Instant)>,
    timer: bool,
    closed: bool,
}

impl WarmSessions {
    /// At most `cap` sessions keep helpers; one idle for `idle` lets them go.
    pub(crate) fn new(cap: usize, idle: Duration) -> WarmSessions {
        WarmSessions {
            shared: Arc::new(Shared {
                cap,
                idle,
                state: Mutex::default(),
                wake: Condvar::new(),
            }),
        }
    }

    /// The handle a session keeps.
    pub(crate) fn handle(&self) -> WarmHandle {
        WarmHandle(self.shared.clone())
    }
}

impl Drop for WarmSessions {
    fn drop(&mut self) {
        if let Ok(mut state) = self.shared.state.lock() {
            state.closed = true;
            state.sessions.clear();
        }
        self.shared.wake.notify_all();
    }
}

/// A session's way to the list.
pub(crate) struct WarmHandle(Arc<Shared>);

impl WarmHandle {
    /// `session` has just started a command (or its helpers): it goes to the head of the list,
    /// the helpers of the sessions beyond the cap end, and the spares of those beyond the
    /// [`SPARES_KEPT`] most recent.
    pub(crate) fn used(&self, session: &Arc<SessionSandbox>) {
        let shared = &self.0;
        let id = session.id;
        if !session.has_helpers() {
            self.forget(id);
            return;
        }
        let (victims, cooling) = {
            let Ok(mut state) = shared.state.lock() else {
                return;
            };
            if state.closed {
                return;
            }
            state.sessions.retain(|(other, _, _)| *other != id);
            state
                .sessions
                .push((id, Arc::downgrade(session), Instant::now()));
            let over = state.sessions.len().saturating_sub(shared.cap);
            let victims: Vec<_> = state.sessions.drain(..over).collect();
            // The warm sessions but the most recent [`SPARES_KEPT`]: their spares go.
            let cooling: Vec<_> = {
                let beyond = state.sessions.len().saturating_sub(SPARES_KEPT);
                state.sessions[..beyond]
                    .iter()
                    .map(|(_, session, _)| session.clone())
                    .collect()
            };
            if !state.timer && shared.idle < Duration::MAX {
                state.timer = start_timer(shared.clone());
            }
            (victims, cooling)
        };
        shared.wake.notify_one();
        end_helpers(victims);
        for session in cooling {
            if let Some(session) = session.upgrade() {
                session.let_spares_go();
            }
        }
    }

    /// The session ended, or has no helpers.
    pub(crate) fn forget(&self, id: u64) {
        if let Ok(mut state) = self.0.state.lock() {
            state.sessions.retain(|(other, _, _)| *other != id);
        }
    }
}

/// Ends the helpers of `sessions` that still exist and are not busy.
fn end_helpers(sessions: Vec<(u64, Weak<SessionSandbox>, Instant)>) {
    for (_, session, _) in sessions {
        if let Some(session) = session.upgrade() {
            session.end_helpers();
        }
    }
}

/// The thread that ends the helpers of idle sessions: it sleeps until the oldest use is
/// `idle` old. Whether it started.
fn start_timer(shared: Arc<Shared>) -> bool {
    let started = std::thread::Builder::new()
        .name("acp-bash-idle-helpers".into())
        .spawn(move || {
            let Ok(mut state) = shared.state.lock() else {
                return;
            };
            loop {
                if state.closed {
                    return;
                }
                let now = Instant::now();
                let fresh = state
                    .sessions
                    .iter()
                    .position(|(_, _, at)| now.duration_since(*at) < shared.idle)
                    .unwrap_or(state.sessions.len());
                if fresh > 0 {
                    let idle: Vec<_> = state.sessions.drain(..fresh).collect();
                    drop(state);
                    end_helpers(idle);
                    state = match shared.state.lock() {
                        Ok(state) => state,
                        Err(_) => return,
                    };
                    continue;
                }
                let wait = state
                    .sessions
                    .first()
                    .map(|(_, _, at)| shared.idle.saturating_sub(now.duration_since(*at)));
                state = match wait {
                    Some(wait) => match shared.wake.wait_timeout(state, wait) {
                        Ok((state, _)) => state,
                        Err(_) => return,
                    },
                    None => match shared.wake.wait(state) {
                        Ok(state) => state,
                        Err(_) => return,
                    },
                };
            }
        });
    started.is_ok()
}
