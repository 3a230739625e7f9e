//! `cargo bench`: acp-bash measured over its real stdio against same-run baselines
//! (see `notes/benchmarks.md`). The measurements read `/proc` and use Linux process APIs.

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!(
        "acp-bash's benchmarks measure through /proc and Linux process APIs: run them on Linux"
    );
}
