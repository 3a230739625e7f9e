//! What a session costs where the per-session zygote (Z) serves it
//! (`notes/2026-12-02-zygote-cost.md`): its first command (which starts Z), its memory while it
//! sits idle (the agent's growth and Z's own pages), and many sessions' commands at once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::{Agent, ClientError, Result};
use super::raw;
use super::stats::{median, mib, ms, ratio, rss_kib, spread, Row};
use super::wire::{check_completed, prompt, Ready};
use super::Bench;

const MODES: [&str; 4] = ["off", "workspace", "read-only", "full"];

fn agent_in(bench: &Bench, mode: &str) -> Result<Agent> {
    let mut agent = bench.spawn_agent(Some(mode))?;
    agent.initialize()?;
    Ok(agent)
}

/// One `true` prompt in a new session of `agent`: the session, and the prompt's time.
fn session_with_true(bench: &Bench, agent: Agent) -> Result<(Ready, Duration)> {
    let mut ready = Ready {
        session: String::new(),
        agent,
    };
    ready.session = ready.agent.new_session(bench.session_dir())?;
    let turn = prompt(&mut ready, "true", Duration::from_secs(10))?;
    check_completed(&turn, "true")?;
    Ok((ready, turn.elapsed))
}

/// `first-command`: a new session's first `true` (in the sandboxed modes it starts the session's
/// zygote: user, mount, UTS, IPC namespaces and the view), paired with a raw `bash -c true` just
/// before it; one agent per mode, warmed by a first session (the machine's probes, read-only's
/// network namespace pool). The same session's second `true` is the context: first − second is
/// what starting the session's sandbox costs.
pub fn first_command(bench: &Bench) -> Result<Vec<Row>> {
    let runs = if bench.quick { 5 } else { 20 };
    let mut rows = Vec::new();
    for mode in MODES {
        let label = format!("a new session's first `true`, --sandbox {mode}");
        let agent = match agent_in(bench, mode) {
            Ok(agent) => agent,
            Err(error) => {
                rows.push(Row::unavailable(
                    "first-command",
                    &label,
                    &error.to_string(),
                ));
                continue;
            }
        };
        let (mut ready, _) = session_with_true(bench, agent)?;
        let (mut first, mut raw_ms, mut paired, mut second_paired) =
            (vec![], vec![], vec![], vec![]);
        for _ in 0..runs {
            ready.session = ready.agent.new_session(bench.session_dir())?;
            let raw = ms(raw::bash_to_devnull("true"));
            let turn = prompt(&mut ready, "true", Duration::from_secs(10))?;
            check_completed(&turn, "true")?;
            first.push(ms(turn.elapsed));
            raw_ms.push(raw);
            paired.push(ms(turn.elapsed) - raw);
            let raw = ms(raw::bash_to_devnull("true"));
            let turn = prompt(&mut ready, "true", Duration::from_secs(10))?;
            check_completed(&turn, "true")?;
            second_paired.push(ms(turn.elapsed) - raw);
        }
        ready.agent.shutdown(Duration::from_secs(2));
        let delta = median(&paired);
        rows.push(Row {
            case: "first-command".into(),
            metric: format!(
                "{label} (the session's second: paired Δ {:+.2} ms)",
                median(&second_paired)
            ),
            median: spread(&first, "ms", 2),
            baseline: format!("`bash -c true`: {}", spread(&raw_ms, "ms", 2)),
            ratio: format!(
                "{}; paired Δ {delta:+.2} ms",
                ratio(median(&first), median(&raw_ms))
            ),
            target: "≤ raw + 4 ms".into(),
            met: Some(delta <= 4.0),
        });
    }
    Ok(rows)
}

/// The live processes whose `(comm, ppid)` pass `keep`, from `/proc/<pid>/stat`.
fn processes_where(keep: impl Fn(&str, u32) -> bool) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // `pid (comm) state ppid …`
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(") ")) else {
                return false;
            };
            let mut fields = stat[close + 2..].split_whitespace();
            let (state, ppid) = (fields.next(), fields.next().and_then(|p| p.parse().ok()));
            state != Some("Z") && ppid.is_some_and(|ppid| keep(&stat[open + 1..close], ppid))
        })
        .collect()
}

/// The agent's zygotes (its children named `acp-bash-zygote`).
fn zygotes_of(agent: u32) -> Vec<u32> {
    processes_where(|comm, ppid| comm == "acp-bash-zygote" && ppid == agent)
}

/// The live children of `parent` (a zygote's: the spare PID 1 it keeps for its next command).
fn children_of(parent: u32) -> Vec<u32> {
    processes_where(|_, ppid| ppid == parent)
}

/// A zygote's memory with its spare's: the sums of their [`pss_rss_uss`].
fn zygote_memory(zygote: u32) -> Option<(u64, u64, u64)> {
    let mut total = pss_rss_uss(zygote)?;
    for child in children_of(zygote) {
        let (pss, rss, uss) = pss_rss_uss(child)?;
        total = (total.0 + pss, total.1 + rss, total.2 + uss);
    }
    Some(total)
}

/// The median of `values`, 0 for none.
fn median_or_zero(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        median(values)
    }
}

/// `Pss:`, `Rss:` and the private pages (USS) of `pid`, in KiB, from `smaps_rollup`.
fn pss_rss_uss(pid: u32) -> Option<(u64, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0)
    };
    Some((
        field("Pss:"),
        field("Rss:"),
        field("Private_Clean:") + field("Private_Dirty:"),
    ))
}

/// `idle-memory`: 20 sessions that each ran one `true` and sit idle: the agent's RSS growth per
/// session plus the PSS of each session's zygote and of the spare PID 1 it keeps (their share
/// of the pages they share with the agent and the other zygotes, and their own), against the
/// 1 MiB of issue 24; their RSS and USS for context. Measured after a first session warmed the agent (its probes, its pool).
pub fn idle_memory(bench: &Bench) -> Result<Vec<Row>> {
    const SESSIONS: usize = 20;
    let runs = if bench.quick { 1 } else { 3 };
    let mut rows = Vec::new();
    for mode in MODES {
        let label = format!(
            "an idle session ({SESSIONS} sessions after one `true` each), --sandbox {mode}"
        );
        let (mut growth, mut per_session, mut z_pss, mut z_rss, mut z_uss, mut zs) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut before_rss = Vec::new();
        for _ in 0..runs {
            let agent = match agent_in(bench, mode) {
                Ok(agent) => agent,
                Err(error) => {
                    rows.push(Row::unavailable("idle-memory", &label, &error.to_string()));
                    return Ok(rows);
                }
            };
            let (mut ready, _) = session_with_true(bench, agent)?;
            let pid = ready.agent.pid;
            let before = rss_kib(pid).map_or(0, |(rss, _)| rss);
            let warm = zygotes_of(pid).len();
            for _ in 0..SESSIONS {
                ready.session = ready.agent.new_session(bench.session_dir())?;
                let turn = prompt(&mut ready, "true", Duration::from_secs(10))?;
                check_completed(&turn, "true")?;
            }
            let after = rss_kib(pid).map_or(0, |(rss, _)| rss);
            let found = zygotes_of(pid);
            let memory: Vec<(u64, u64, u64)> =
                found.iter().filter_map(|&z| zygote_memory(z)).collect();
            ready.agent.shutdown(Duration::from_secs(2));
            let grown = after.saturating_sub(before) as f64 / SESSIONS as f64;
            let count = memory.len().max(1) as f64;
            let pss = memory.iter().map(|m| m.0).sum::<u64>() as f64 / count;
            // The new sessions' zygotes only (the warm one is in `before`).
            let new_zs = found.len().saturating_sub(warm) as f64 / SESSIONS as f64;
            growth.push(grown / 1024.0);
            per_session.push((grown + pss * new_zs) / 1024.0);
            z_pss.push(pss / 1024.0);
            z_rss.push(memory.iter().map(|m| m.1).sum::<u64>() as f64 / count / 1024.0);
            z_uss.push(memory.iter().map(|m| m.2).sum::<u64>() as f64 / count / 1024.0);
            zs.push(found.len() as f64);
            before_rss.push(mib(before));
            if found.len() != memory.len() {
                return Err(ClientError(format!(
                    "could read the memory of {} of the {} zygotes (run as their user or root)",
                    memory.len(),
                    found.len()
                )));
            }
        }
        let total = median(&per_session);
        rows.push(Row {
            case: "idle-memory".into(),
            metric: format!(
                "{label}: agent RSS growth + the PSS of Z and its spare PID 1, per session (zygotes: {}; Z and spare: PSS {} MiB, RSS {} MiB, USS {} MiB)",
                spread(&zs, "", 0),
                format_args!("{:.2}", median(&z_pss)),
                format_args!("{:.2}", median(&z_rss)),
                format_args!("{:.2}", median(&z_uss)),
            ),
            median: spread(&per_session, "MiB", 2),
            baseline: format!(
                "agent RSS after the first session: {}; its growth per session {} MiB",
                spread(&before_rss, "MiB", 1),
                format_args!("{:.2}", median(&growth))
            ),
            ratio: "-".into(),
            target: "≤ 1 MiB".into(),
            met: Some(total <= 1.0),
        });
    }
    Ok(rows)
}

/// Sends `script` to every session at once; the time until the last one is answered.
fn all_at_once(agent: &mut Agent, sessions: &[String], script: &str) -> Result<Duration> {
    let mut pending = HashMap::new();
    let mut first_sent = None;
    for session in sessions {
        let (id, sent) = agent.send_prompt(session, script)?;
        first_sent.get_or_insert(sent);
        pending.insert(id, ());
    }
    let first_sent = first_sent.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = first_sent;
    while !pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError(format!(
                "{} prompts unanswered after 30 s",
                pending.len()
            )));
        }
        let Some(line) = agent.next_line(left)? else {
            continue;
        };
        if line.method().is_none() {
            if let Some(id) = line.value.get("id").and_then(Value::as_u64) {
                if let Some(()) = pending.remove(&id) {
                    if let Some(error) = line.value.get("error") {
                        return Err(ClientError(format!("prompt {id} failed: {error}")));
                    }
                    last = line.at;
                }
            }
        }
    }
    Ok(last - first_sent)
}

/// `concurrency-modes`: 20 sessions (each with its sandbox built by a first `true`) running
/// `sleep 0.5; echo done` at once → all answered, against one session running it alone just
/// before, in every mode; issue 24: ≤ 1.2× one.
pub fn concurrency_modes(bench: &Bench) -> Result<Vec<Row>> {
    const SESSIONS: usize = 20;
    let runs = if bench.quick { 2 } else { 5 };
    let script = "sleep 0.5; echo done";
    let mut rows = Vec::new();
    for mode in MODES {
        let label =
            format!("{SESSIONS} sessions × `{script}` at once → all answered, --sandbox {mode}");
        let mut agent = match agent_in(bench, mode) {
            Ok(agent) => agent,
            Err(error) => {
                rows.push(Row::unavailable(
                    "concurrency-modes",
                    &label,
                    &error.to_string(),
                ));
                continue;
            }
        };
        let mut sessions = Vec::new();
        for _ in 0..SESSIONS {
            let session = agent.new_session(bench.session_dir())?;
            sessions.push(session);
        }
        all_at_once(&mut agent, &sessions, "true")?;
        let (mut one, mut all, mut ratios) = (vec![], vec![], vec![]);
        for _ in 0..runs {
            let alone = all_at_once(&mut agent, &sessions[..1], script)?;
            let together = all_at_once(&mut agent, &sessions, script)?;
            one.push(alone.as_secs_f64());
            all.push(together.as_secs_f64());
            ratios.push(together.as_secs_f64() / alone.as_secs_f64());
        }
        agent.shutdown(Duration::from_secs(2));
        let paired = median(&ratios);
        rows.push(Row {
            case: "concurrency-modes".into(),
            metric: label,
            median: spread(&all, "s", 3),
            baseline: format!("one session alone: {}", spread(&one, "s", 3)),
            ratio: format!("paired {paired:.2}×"),
            target: "≤ 1.2× one".into(),
            met: Some(paired <= 1.2),
        });
    }
    Ok(rows)
}

/// `warm-sessions` (issue 48): 1,000 workspace sessions that each ran one `true`, in one agent
/// with `--max-warm-sessions 8`: how many helper processes are left (zygotes, and the spares of
/// the two sessions used last), what a warm session's command costs without a spare, whether the oldest session's next command runs (its helpers started again:
/// its time against a warm session's `true`), what an idle session costs the agent once its
/// helpers are gone (RSS growth from the 100th to the 1,000th session, per session), and what
/// a warm one costs besides (the PSS of its Z and spare).
pub fn warm_sessions(bench: &Bench) -> Result<Vec<Row>> {
    const CAP: usize = 8;
    let sessions = if bench.quick { 200 } else { 1000 };
    let label =
        format!("{sessions} workspace sessions after one `true` each, --max-warm-sessions {CAP}");
    let mut agent = bench.spawn_agent_with(&[
        "--sandbox",
        "workspace",
        "--max-warm-sessions",
        &CAP.to_string(),
    ])?;
    agent.initialize()?;
    let mut ready = Ready {
        session: String::new(),
        agent,
    };
    let pid = ready.agent.pid;
    let mut ids = Vec::new();
    let (mut rss_at_100, mut pss_at_100) = (0, 0);
    for n in 0..sessions {
        ready.session = ready.agent.new_session(bench.session_dir())?;
        let turn = prompt(&mut ready, "true", Duration::from_secs(30))?;
        check_completed(&turn, "true")?;
        ids.push(ready.session.clone());
        if n + 1 == 100 {
            rss_at_100 = rss_kib(pid).map_or(0, |(rss, _)| rss);
            pss_at_100 = pss_rss_uss(pid).map_or(0, |m| m.0);
        }
    }
    let rss_after = rss_kib(pid).map_or(0, |(rss, _)| rss);
    let pss_after = pss_rss_uss(pid).map_or(0, |m| m.0);
    // Helpers let go end on their own once their socket closes: give them a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut zygotes, mut helpers);
    loop {
        zygotes = zygotes_of(pid);
        helpers = zygotes.len() + zygotes.iter().map(|&z| children_of(z).len()).sum::<usize>();
        if zygotes.len() <= CAP || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let memory: Vec<(u64, u64, u64)> = zygotes.iter().filter_map(|&z| zygote_memory(z)).collect();
    let warm_pss = memory.iter().map(|m| m.0).sum::<u64>() as f64 / memory.len().max(1) as f64;
    // Z alone, and each spare PID 1 alone (PSS, KiB).
    let z_pss: Vec<f64> = zygotes
        .iter()
        .filter_map(|&z| Some(pss_rss_uss(z)?.0 as f64))
        .collect();
    let spare_pss: Vec<f64> = zygotes
        .iter()
        .flat_map(|&z| children_of(z))
        .filter_map(|p| Some(pss_rss_uss(p)?.0 as f64))
        .collect();
    // Warm sessions beyond the two used last have a zygote but no spare PID 1: one of them
    // runs `true` (its zygote clones the command's PID 1 fresh), then again right away (from
    // the spare its zygote made after the first), in turn over the last three sessions, so
    // that each round starts with the least recent one.
    let (mut no_spare, mut with_spare, mut spare_delta) = (vec![], vec![], vec![]);
    let rounds = if bench.quick { 6 } else { 30 };
    for round in 0..rounds {
        ready.session = ids[ids.len() - 3 + round % 3].clone();
        let turn = prompt(&mut ready, "true", Duration::from_secs(30))?;
        check_completed(&turn, "true")?;
        let again = prompt(&mut ready, "true", Duration::from_secs(30))?;
        check_completed(&again, "true")?;
        no_spare.push(ms(turn.elapsed));
        with_spare.push(ms(again.elapsed));
        spare_delta.push(ms(turn.elapsed) - ms(again.elapsed));
    }
    // A warm session's `true`, then the oldest session's (its helpers started again).
    let mut warm = Vec::new();
    let mut cold = Vec::new();
    let runs = if bench.quick { 3 } else { 10 };
    for i in 0..runs {
        ready.session = ids[ids.len() - 1].clone();
        warm.push(ms(
            prompt(&mut ready, "true", Duration::from_secs(30))?.elapsed
        ));
        ready.session = ids[i].clone();
        let turn = prompt(&mut ready, "true", Duration::from_secs(30))?;
        check_completed(&turn, "true")?;
        cold.push(ms(turn.elapsed));
    }
    let zygotes_after = zygotes_of(pid).len();
    ready.agent.shutdown(Duration::from_secs(2));
    let idle_kib = rss_after.saturating_sub(rss_at_100) as f64 / (sessions - 100) as f64;
    let idle_pss_kib = pss_after.saturating_sub(pss_at_100) as f64 / (sessions - 100) as f64;
    Ok(vec![
        Row {
            case: "warm-sessions".into(),
            metric: format!("{label}: helper processes left (zygotes {}, spare PID 1s {})", zygotes.len(), helpers - zygotes.len()),
            median: format!("{helpers}"),
            baseline: format!("cap {CAP} warm sessions"),
            ratio: "-".into(),
            target: format!("zygotes ≤ cap; processes ≤ cap + 2 = {}", CAP + 2),
            met: Some(zygotes.len() <= CAP && helpers <= CAP + 2),
        },
        Row {
            case: "warm-sessions".into(),
            metric: format!("{label}: a warm session's `true` without a spare PID 1 (its zygote clones one), interleaved with the same session's next `true` (from the spare)"),
            median: spread(&no_spare, "ms", 2),
            baseline: format!("from the spare: {}", spread(&with_spare, "ms", 2)),
            ratio: format!(
                "{}; paired Δ {:+.2} ms",
                ratio(median(&no_spare), median(&with_spare)),
                median(&spare_delta)
            ),
            target: "(context: the price of keeping spares for 2 sessions only)".into(),
            met: None,
        },
        Row {
            case: "warm-sessions".into(),
            metric: format!("{label}: an old session's next `true` (its helpers started again; zygotes after: {zygotes_after})"),
            median: spread(&cold, "ms", 2),
            baseline: format!("a warm session's `true`: {}", spread(&warm, "ms", 2)),
            ratio: ratio(median(&cold), median(&warm)),
            target: "runs (≤ raw + 4 ms as a first command)".into(),
            met: Some(cold.len() == runs && zygotes_after <= CAP),
        },
        Row {
            case: "warm-sessions".into(),
            metric: format!("{label}: an idle session without helpers, agent RSS growth per session (sessions 100 → {sessions})"),
            median: format!("{idle_kib:.1} KiB"),
            baseline: format!(
                "agent RSS {:.1} MiB after 100, {:.1} MiB after {sessions}; PSS growth per session {idle_pss_kib:.1} KiB",
                mib(rss_at_100),
                mib(rss_after)
            ),
            ratio: "-".into(),
            target: "≤ 64 KiB".into(),
            met: Some(idle_kib <= 64.0),
        },
        Row {
            case: "warm-sessions".into(),
            metric: format!("{label}: a warm session's helpers (Z, and its spare where it keeps one), PSS"),
            median: format!("{:.2} MiB", warm_pss / 1024.0),
            baseline: format!(
                "{} warm sessions measured; Z alone: PSS {:.2} MiB; a spare PID 1 ({} kept): PSS {:.2} MiB",
                memory.len(),
                median_or_zero(&z_pss) / 1024.0,
                spare_pss.len(),
                median_or_zero(&spare_pss) / 1024.0
            ),
            ratio: "-".into(),
            target: "(context)".into(),
            met: None,
        },
    ])
}
