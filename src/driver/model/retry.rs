//! When to try a failed model request again, and how long to wait first.
//!
//! Owns [`RetryPolicy`]: a bounded number of retries for the errors worth retrying (429, 5xx,
//! a dropped connection), waiting what the provider's `Retry-After` says (up to a ceiling) or
//! else an exponential backoff; and [`parse_retry_after`]. Must not touch: HTTP, the loop.

use std::time::Duration;

use super::api::ApiError;

/// How failed requests are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Retries after the first try (default 4).
    pub max_retries: u32,
    /// The first backoff, doubled on each retry (default 1 s).
    pub base_delay: Duration,
    /// The longest backoff (default 30 s).
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured: asking for more ends the turn (default 60 s).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// How long to wait before retry number `retry` (0 first) after `error`; `None`: give up
    /// (not retryable, out of retries, or the provider asks for a wait longer than we allow).
    pub fn delay(&self, retry: u32, error: &ApiError) -> Option<Duration> {
        if !error.is_retryable() || retry >= self.max_retries {
            return None;
        }
        match error.retry_after() {
            Some(wait) if wait > self.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(
                self.base_delay
                    .saturating_mul(2u32.saturating_pow(retry))
                    .min(self.max_delay),
            ),
        }
    }
}

/// A `Retry-After` value: seconds (`"2"`, `"1.5"`), or an HTTP date (then the time until it,
/// given `now`).
pub fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let when = httpdate(value)?;
    Some(when.duration_since(now).unwrap_or_default())
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn httpdate(value: &str) -> Option<std::time::SystemTime> {
    let parts: Vec<&str> = value.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == month)? as i64
        + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + m * 60 + s;
    let secs = u64::try_from(secs).ok()?;
    Some(std::time::UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate_limited(retry_after: Option<Duration>) -> ApiError {
        ApiError::RateLimited {
            retry_after,
            message: String::new(),
        }
    }

    #[test]
    fn backoff_doubles_is_capped_and_bounded() {
        let policy = RetryPolicy::default();
        let delays: Vec<_> = (0..5)
            .map(|n| policy.delay(n, &rate_limited(None)))
            .collect();
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(delays, [secs(1), secs(2), secs(4), secs(8), None]);
        let long = RetryPolicy {
            max_retries: 10,
            ..policy
        };
        assert_eq!(long.delay(9, &rate_limited(None)), secs(30));
        let auth = ApiError::Auth {
            status: 401,
            message: String::new(),
        };
        assert_eq!(policy.delay(0, &auth), None);
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_ceiling() {
        let policy = RetryPolicy::default();
        let wait = Duration::from_secs(7);
        assert_eq!(policy.delay(0, &rate_limited(Some(wait))), Some(wait));
        assert_eq!(
            policy.delay(0, &rate_limited(Some(Duration::from_secs(3600)))),
            None
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after("0.5", now),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:40 GMT", now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }
}
