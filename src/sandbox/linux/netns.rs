//! The pool of network namespaces for read-only commands (one spare, made ahead of need),
//! taken only by a process that joins it: a session's new zygote, or a command on the
//! per-command path (a command from a zygote is already in the zygote's namespace).

use std::os::fd::OwnedFd;

use super::child;

/// The network namespace made ahead of need (see [`prepared_network_namespace`]).
static SPARE: std::sync::Mutex<Option<OwnedFd>> = std::sync::Mutex::new(None);

/// A fresh network namespace (loopback up) for one read-only command, made ahead of need:
/// creating one takes about a millisecond, which a command should not wait for. Each call takes
/// the spare and starts making the next one on a short-lived thread, so every command still gets
/// a namespace of its own. `None` when not root (the command then makes its own, inside its user
/// namespace) or when the kernel refuses.
pub(crate) fn prepared_network_namespace() -> Option<OwnedFd> {
    // SAFETY: plain getter.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let spare = SPARE.lock().unwrap().take();
    let netns = spare.or_else(|| new_network_namespace().ok());
    if netns.is_some() {
        let refill = std::thread::Builder::new()
            .name("acp-bash-netns".into())
            .spawn(|| {
                // Making a namespace costs about a millisecond of CPU: let the commands (and
                // the agent's other threads) have the cores first.
                // SAFETY: setpriority on this thread (Linux: a thread id is a process id).
                unsafe {
                    libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
                }
                if let Ok(next) = move_this_thread_to_a_new_network_namespace() {
                    SPARE.lock().unwrap().get_or_insert(next);
                }
            });
        if let Err(error) = refill {
            tracing::debug!(%error, "no thread to prepare the next network namespace");
        }
    }
    netns
}

/// Whether this agent (root) can make network namespaces of its own (the proxy's bridge needs
/// one per workspace command): tried once per process, the namespace made kept as the spare.
/// Root without CAP_SYS_ADMIN (rootless podman, a container's default capabilities) cannot.
pub(crate) fn agent_network_namespace() -> Result<(), String> {
    static MADE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    MADE.get_or_init(|| match new_network_namespace() {
        Ok(netns) => {
            SPARE.lock().unwrap().get_or_insert(netns);
            Ok(())
        }
        Err(error) => Err(format!(
            "the bridge to the proxy is made in a network namespace of the agent's own, and \
             making one failed: {error} (root lacks CAP_SYS_ADMIN here, as in a rootless \
             container)"
        )),
    })
    .clone()
}

/// A new network namespace with its loopback up, made on a thread of its own (see
/// [`move_this_thread_to_a_new_network_namespace`]).
fn new_network_namespace() -> std::io::Result<OwnedFd> {
    let made = std::thread::Builder::new()
        .name("acp-bash-netns".into())
        .spawn(move_this_thread_to_a_new_network_namespace)?
        .join();
    made.unwrap_or_else(|_| Err(std::io::Error::other("the namespace thread panicked")))
}

/// `unshare(CLONE_NEWNET)` moves the calling thread into a new network namespace; brings its `lo`
/// up and returns an fd that keeps the namespace alive. Only for a thread that ends right after.
fn move_this_thread_to_a_new_network_namespace() -> std::io::Result<OwnedFd> {
    // SAFETY: unshare has no memory-safety preconditions; it changes this thread only.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    child::sys::loopback_up();
    std::fs::File::open("/proc/thread-self/ns/net").map(OwnedFd::from)
}

/// A listening TCP socket bound to `addr` inside the network namespace `netns`: the proxy's
/// end of the bridge (`notes/2026-12-06-network-allowlist.md`). A socket keeps the namespace it
/// was made in, so the agent accepts on it from the host's side while commands in `netns`
/// connect to it on their own loopback. Made on a short-lived thread that joins `netns`
/// (needs CAP_SYS_ADMIN over the namespace's owner: root for the namespaces this module makes)
/// and brings its loopback up first.
pub(crate) fn listen_in(
    netns: std::os::fd::BorrowedFd<'_>,
    addr: std::net::SocketAddr,
) -> std::io::Result<std::net::TcpListener> {
    use std::os::fd::AsRawFd;
    let fd = netns.as_raw_fd();
    let made = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("acp-bash-bridge".into())
            .spawn_scoped(scope, move || {
                // SAFETY: setns on this thread only, with an fd the caller keeps open.
                if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                child::sys::loopback_up();
                std::net::TcpListener::bind(addr)
            })?
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the bridge thread panicked")))
    });
    made
}
