//! The value parsers of the command line: durations (`90s`, `10m`), sizes (`1MiB`, `4G`),
//! counts and limits (`none`), `NAME=VALUE` and sandbox modes. Each error says what to write.

use std::time::Duration;

use acp_bash::sandbox;

/// A resource limit from the command line: `None` is `none` (no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit(pub Option<u64>);

/// Parses a count, or `none` for no limit.
pub(super) fn parse_limit_count(text: &str) -> Result<Limit, String> {
    parse_count(text).map(Limit)
}

fn parse_count(text: &str) -> Result<Option<u64>, String> {
    match text.trim() {
        "none" | "unlimited" => Ok(None),
        n => n
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| format!("expected a positive number or `none`, got `{text}`")),
    }
}

/// Parses `512M`, `4G`, `1T`, `65536` (bytes, or K/M/G/T binary units), or `none`.
pub(super) fn parse_memory_limit(text: &str) -> Result<Limit, String> {
    parse_bytes(text).map(Limit)
}

fn parse_bytes(text: &str) -> Result<Option<u64>, String> {
    let t = text.trim();
    if t == "none" || t == "unlimited" {
        return Ok(None);
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let shift = match unit
        .trim_end_matches(['i', 'B', 'b'])
        .to_ascii_uppercase()
        .as_str()
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => {
            return Err(format!(
                "unknown size unit in `{text}`: use K, M, G or T (e.g. 4G)"
            ))
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .filter(|n| *n > 0)
        .map(Some)
        .ok_or_else(|| format!("expected a size such as 512M or 4G, or `none`, got `{text}`"))
}

/// Parses `90s`, `10m`, `1h`, `500ms` or a bare number of seconds.
pub(super) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: write e.g. 90s, 10m or 1h"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" | "secs" => number,
        "ms" => number / 1000.0,
        "m" | "min" | "mins" => number * 60.0,
        "h" => number * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use ms, s, m or h"
            ))
        }
    };
    if seconds <= 0.0 || !seconds.is_finite() {
        return Err(format!("{text:?}: the timeout must be more than zero"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses a size: a number of bytes, optionally with a unit (`K`/`KiB`, `M`/`MiB`, `G`/`GiB`,
/// all powers of 1024; `B` or none for bytes).
pub(super) fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size: write e.g. 1MiB, 512KiB or 2GiB"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use KiB, MiB or GiB"
            ))
        }
    };
    let bytes = number
        .checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too large"))?;
    if bytes == 0 {
        return Err(format!("{text:?}: the size must be more than zero"));
    }
    Ok(bytes)
}

pub(super) fn parse_assignment(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

pub(super) fn parse_mode(text: &str) -> Result<sandbox::Mode, String> {
    sandbox::Mode::from_id(text).ok_or_else(|| {
        format!("unknown sandbox mode {text:?}: use workspace, read-only, full or off")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_people_write_them() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5y").is_err());
        assert!(parse_duration("0s").is_err());
    }

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("2gib"), Ok(2 << 30));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5TB").is_err());
    }
}
