//! Checks, before anything is compiled, that a static glibc link can succeed: `.cargo/config.toml`
//! links the agent as a static PIE where the C library is glibc (`notes/2026-12-03-static-pie.md`),
//! which needs glibc's static library. Without it the link would fail at the very end with only
//! "unable to find library -lc"; this says what to install instead, or how to build without it.

use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=CC");
    let static_glibc = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "gnu")
        && std::env::var("CARGO_CFG_TARGET_FEATURE")
            .is_ok_and(|features| features.split(',').any(|f| f == "crt-static"));
    // Only a native build can ask the host's C compiler where the target's libc.a is.
    if !static_glibc || std::env::var("TARGET").ok() != std::env::var("HOST").ok() {
        return;
    }
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    // `cc -print-file-name=libc.a` prints the library's path, or only its name when the
    // compiler's search path has no such file.
    let found = Command::new(&compiler)
        .arg("-print-file-name=libc.a")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string());
    // No compiler to ask (`None`): the link will say what it says.
    if found.as_deref() == Some("libc.a") {
        eprintln!(
            "acp-bash links glibc statically (a static PIE: it answers an editor 0.4 ms sooner), \
             and `{compiler}` finds no libc.a.\nInstall glibc's static library: Fedora, RHEL: \
             `dnf install glibc-static`; Debian, Ubuntu: `apt install libc6-dev`.\nOr build a \
             dynamically linked agent: `RUSTFLAGS='-C target-feature=-crt-static' cargo …`."
        );
        std::process::exit(1);
    }
}
