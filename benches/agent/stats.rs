//! Medians, ratios and the result table.

use std::time::Duration;

/// The median of `values` (the mean of the two middle ones for an even count).
pub fn median(values: &[f64]) -> f64 {
    assert!(!values.is_empty(), "median of nothing");
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

pub fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

pub fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

pub fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// One row of the result table: what was measured, against what, and whether the target holds.
pub struct Row {
    pub case: String,
    pub metric: String,
    pub median: String,
    pub baseline: String,
    pub ratio: String,
    pub target: String,
    /// None: informational, no target.
    pub met: Option<bool>,
}

impl Row {
    pub fn print(&self) {
        let met = match self.met {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            self.case, self.metric, self.median, self.baseline, self.ratio, self.target, met
        );
    }
}

pub fn header() {
    println!("| case | metric | median | baseline (same run) | ratio | target | met |");
    println!("|---|---|---|---|---|---|---|");
}

/// `median (min–max, n=N)` with a unit.
pub fn spread(values: &[f64], unit: &str, decimals: usize) -> String {
    format!(
        "{:.d$} {unit} ({:.d$}–{:.d$}, n={})",
        median(values),
        min(values),
        max(values),
        values.len(),
        d = decimals
    )
}

pub fn ratio(value: f64, baseline: f64) -> String {
    if baseline > 0.0 {
        format!("{:.2}×", value / baseline)
    } else {
        "-".into()
    }
}

/// Resident and peak resident memory of a process, in KiB, from /proc (Linux).
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find(|line| line.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

impl Row {
    /// A case that could not be measured, and why.
    pub fn unavailable(case: &str, metric: &str, why: &str) -> Row {
        Row {
            case: case.into(),
            metric: metric.into(),
            median: format!("not measured: {why}"),
            baseline: "-".into(),
            ratio: "-".into(),
            target: "-".into(),
            met: None,
        }
    }
}
