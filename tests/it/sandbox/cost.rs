//! What the sandbox costs per command: `confine` alone, and `confine` + spawn + wait of
//! `bash -c true` per mode against no sandbox. A manual measurement, not a pass/fail test:
//! `cargo test --release --test sandbox_cost -- --ignored --nocapture`.
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use acp_bash::sandbox::{self, Launch, Mode, Support};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[test]
#[ignore]
fn sandbox_cost_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let roots = crate::support::sandbox::roots(dir.path());
    let _ = Support::current(); // the one-time probe, not counted
    let probe = Instant::now();
    let _ = Support::probe();
    println!("one-time probe of every layer: {:?}", probe.elapsed());
    let none = Support::none("baseline");
    const N: usize = 60;
    for mode in Mode::ALL {
        let confine: Vec<Duration> = (0..N)
            .map(|_| {
                let launch = Launch::new(crate::support::sandbox::bash(), ["-c", "true"]);
                let start = Instant::now();
                let confined = sandbox::confine(launch, mode, &roots, sandbox::Limits::default());
                let took = start.elapsed();
                drop(confined);
                took
            })
            .collect();
        println!("{mode:>10}: confine alone {:?}", median(confine));
    }
    let baseline: Vec<Duration> = (0..N)
        .map(|_| {
            let start = Instant::now();
            let _ =
                crate::support::sandbox::spawn_with("true", Mode::Full, dir.path(), &none).finish();
            start.elapsed()
        })
        .collect();
    let base = median(baseline);
    println!("  no sandbox: spawn + run `bash -c true` {base:?}");
    for mode in Mode::ALL {
        let samples: Vec<Duration> = (0..N)
            .map(|_| {
                let start = Instant::now();
                let _ = crate::support::sandbox::spawn_with(
                    "true",
                    mode,
                    dir.path(),
                    Support::current(),
                )
                .finish();
                start.elapsed()
            })
            .collect();
        let m = median(samples);
        println!(
            "{mode:>10}: confine + spawn + run {m:?} (+{:?})",
            m.saturating_sub(base)
        );
    }
}
