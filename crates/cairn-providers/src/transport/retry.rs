//! Retry policy: exponential backoff with jitter, honouring the server's `Retry-After`.

use std::time::Duration;

use reqwest::header::HeaderMap;

/// When and how long to wait before retrying a failed request.
///
/// Retries happen only before the first byte of a successful response: connection failures
/// (connect timeouts included), HTTP 408/429/5xx, and first-byte timeouts when
/// [`retry_first_byte_timeouts`](Self::retry_first_byte_timeouts) is set. The delay before retry `n` (0-based) is
/// `initial_backoff * 2^n`, capped at `max_backoff`, minus up to 25 % random jitter; a
/// `Retry-After` (or `retry-after-ms`) header up to `max_retry_after` replaces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// How many times a request is retried (0 = never).
    pub max_retries: u32,
    /// The first backoff delay.
    pub initial_backoff: Duration,
    /// The largest backoff delay.
    pub max_backoff: Duration,
    /// The longest server-requested delay that is honoured; longer ones fall back to backoff.
    pub max_retry_after: Duration,
    /// Whether a request whose response head did not arrive within the first-byte timeout is
    /// sent again (default false: the server has the request and may still be working on it,
    /// and each retry would wait the whole timeout again).
    pub retry_first_byte_timeouts: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            retry_first_byte_timeouts: false,
        }
    }
}

impl RetryPolicy {
    /// The delay before retry number `attempt` (0-based).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(ra) = retry_after
            && ra <= self.max_retry_after
        {
            return ra;
        }
        let factor = 2u32.saturating_pow(attempt.min(30));
        let base = self
            .initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff);
        let jitter = 1.0 - 0.25 * fastrand::f64();
        base.mul_f64(jitter)
    }
}

/// The delay a response asks for: `retry-after-ms` (OpenAI) or `Retry-After` in seconds.
/// (HTTP-date values are ignored; backoff applies then.)
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let parse = |name: &str| -> Option<f64> {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    if let Some(ms) = parse("retry-after-ms") {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    parse("retry-after").map(Duration::from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_honours_retry_after() {
        let p = RetryPolicy::default();
        for attempt in 0..6 {
            let d = p.delay(attempt, None);
            let base = (0.5 * 2f64.powi(attempt as i32)).min(8.0);
            assert!(d.as_secs_f64() <= base + 1e-9 && d.as_secs_f64() >= base * 0.75 - 1e-9);
        }
        assert_eq!(
            p.delay(3, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert!(p.delay(0, Some(Duration::from_secs(600))) <= Duration::from_millis(500));
    }

    #[test]
    fn parses_retry_after_headers() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None);
    }
}
