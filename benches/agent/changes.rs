//! `changes`: what tracking a command's file changes costs (`notes/2026-12-06-change-tracking.md`)
//! on a generated repository of 10,000 files (100 MiB) with nothing changed: the same `true` in
//! a workspace session of an agent that tracks changes (the default) and of one started with
//! `--no-changes`, interleaved in one run; plus the alternative that was not chosen, a stat
//! snapshot of the whole folder (readdir + lstat of every file), timed alone.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::client::Result;
use super::stats::{median, ms, spread, Row};
use super::wire::{check_completed, prompt, Ready};
use super::Bench;

const FILES: usize = 10_000;
const FILE_BYTES: usize = 10 * 1024 + 496; // 10,000 × 10.5 KiB ≈ 100 MiB

/// The repository: 100 folders of 100 text files each.
fn generate(root: &Path) {
    let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
    let text: String = line.repeat(FILE_BYTES / line.len() + 1)[..FILE_BYTES].to_string();
    for i in 0..FILES {
        let dir = root.join(format!("d{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(dir.join(format!("f{i:05}.txt")), &text).unwrap();
    }
}

/// A stat snapshot of `root`: every entry's `lstat`, as the alternative mechanism would take
/// before and after each command.
fn stat_walk(root: &Path) -> usize {
    let mut seen = 0;
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            }
            seen += 1;
        }
    }
    seen
}

fn session(bench: &Bench, repo: &Path, extra: &[&str]) -> Result<Ready> {
    let mut args = vec!["--sandbox", "workspace"];
    args.extend_from_slice(extra);
    let mut agent = bench.spawn_agent_with(&args)?;
    agent.initialize()?;
    let session = agent.new_session(repo)?;
    let mut ready = Ready { agent, session };
    // The first command waits for the tracker's watches and baseline.
    let turn = prompt(&mut ready, "true", Duration::from_secs(60))?;
    check_completed(&turn, "true")?;
    Ok(ready)
}

pub fn changes(bench: &Bench) -> Result<Vec<Row>> {
    let runs = if bench.quick { 10 } else { 40 };
    let repo = bench.session_dir().join("changes-repo");
    if !repo.exists() {
        generate(&repo);
    }
    let mut walks = Vec::new();
    for _ in 0..runs.min(20) {
        let started = Instant::now();
        let seen = stat_walk(&repo);
        walks.push(ms(started.elapsed()));
        assert!(seen >= FILES);
    }
    let mut tracked = session(bench, &repo, &[])?;
    let mut untracked = session(bench, &repo, &["--no-changes"])?;
    let (mut on, mut off, mut paired) = (vec![], vec![], vec![]);
    for _ in 0..runs {
        let a = prompt(&mut untracked, "true", Duration::from_secs(10))?;
        check_completed(&a, "true")?;
        let b = prompt(&mut tracked, "true", Duration::from_secs(10))?;
        check_completed(&b, "true")?;
        off.push(ms(a.elapsed));
        on.push(ms(b.elapsed));
        paired.push(ms(b.elapsed) - ms(a.elapsed));
    }
    tracked.agent.shutdown(Duration::from_secs(2));
    untracked.agent.shutdown(Duration::from_secs(2));
    let delta = median(&paired);
    Ok(vec![
        Row {
            case: "changes".into(),
            metric: "`true` in a workspace session on 10,000 files (100 MiB), nothing changed, \
                     changes tracked (inotify)"
                .into(),
            median: spread(&on, "ms", 2),
            baseline: format!("`--no-changes`: {}", spread(&off, "ms", 2)),
            ratio: format!("paired Δ {delta:+.2} ms"),
            target: "≤ +5 ms".into(),
            met: Some(delta <= 5.0),
        },
        Row {
            case: "changes".into(),
            metric: "the alternative: one stat snapshot of the same folder (readdir + lstat, \
                     two per command)"
                .into(),
            median: spread(&walks, "ms", 2),
            baseline: "-".into(),
            ratio: format!("×2 per command: {:.2} ms", 2.0 * median(&walks)),
            target: "-".into(),
            met: None,
        },
    ])
}
