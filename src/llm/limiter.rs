//! One limiter per provider and key, shared by every agent of a run, so a hundred agents
//! slow down together instead of each meeting its own 429: at most `concurrency` requests
//! in flight, and within any trailing minute at most `rpm` requests, `input_tpm` input
//! tokens and `output_tpm` output tokens. It reads the limit headers the server sends
//! (`anthropic-ratelimit-*`, `x-ratelimit-*`) and pauses the provider until the reset when
//! the server says little is left; a 429's `retry-after` pauses every agent of the
//! provider, not just the one that met it. A key the server rejects poisons the limiter:
//! every other request with that key fails at once with the same reason.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::llm::provider::{Limits, ProviderSettings};

/// The client counts a request from before it is sent, the server from when it arrives:
/// a second of margin keeps the two minutes from overlapping at their edge.
const WINDOW: Duration = Duration::from_secs(61);

#[derive(Debug, Clone, Copy)]
struct Sent {
    at: Instant,
    input: u64,
    output: u64,
}

#[derive(Debug, Default)]
struct Window {
    sent: VecDeque<Sent>,
    paused_until: Option<Instant>,
    poisoned: Option<String>,
    in_flight: usize,
}

impl Window {
    fn prune(&mut self, now: Instant) {
        while self
            .sent
            .front()
            .is_some_and(|s| now.duration_since(s.at) >= WINDOW)
        {
            self.sent.pop_front();
        }
    }

    /// How long to wait before a request with `input` tokens may go, if at all.
    fn wait(&self, now: Instant, limits: &Limits, input: u64) -> Option<Duration> {
        if let Some(until) = self.paused_until.filter(|u| *u > now) {
            return Some(until - now);
        }
        let oldest = self
            .sent
            .front()
            .map(|s| (s.at + WINDOW).saturating_duration_since(now));
        let full = |used: u64, limit: Option<u64>, adding: u64| {
            limit.is_some_and(|l| used > 0 && used + adding > l)
        };
        let requests = self.sent.len() as u64;
        let input_used: u64 = self.sent.iter().map(|s| s.input).sum();
        let output_used: u64 = self.sent.iter().map(|s| s.output).sum();
        if full(requests, limits.rpm.map(u64::from), 1)
            || full(input_used, limits.input_tpm, input)
            || full(output_used, limits.output_tpm, 0)
        {
            return oldest.map(|d| d.max(Duration::from_millis(5)));
        }
        None
    }
}

/// What a limiter has done, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimiterStats {
    pub waits: u64,
    pub pauses: u64,
}

/// The shared limiter of one provider and key.
#[derive(Debug)]
pub struct Limiter {
    limits: Limits,
    slots: Semaphore,
    window: Mutex<Window>,
    stats: Mutex<LimiterStats>,
}

/// A request's place: hold it while the request is in flight.
pub struct Permit<'a> {
    _slot: SemaphorePermit<'a>,
    at: Instant,
}

impl Limiter {
    pub fn new(limits: Limits) -> Limiter {
        Limiter {
            slots: Semaphore::new(limits.concurrency.max(1)),
            limits,
            window: Mutex::new(Window::default()),
            stats: Mutex::new(LimiterStats::default()),
        }
    }

    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until a request of about `input` tokens may be sent.
    pub async fn acquire(&self, input: u64) -> Result<Permit<'_>, String> {
        let slot = self.slots.acquire().await.map_err(|e| e.to_string())?;
        let mut waited = false;
        loop {
            let now = Instant::now();
            let wait = {
                let mut window = self.window();
                if let Some(reason) = &window.poisoned {
                    return Err(reason.clone());
                }
                window.prune(now);
                match window.wait(now, &self.limits, input) {
                    Some(d) => d,
                    None => {
                        window.sent.push_back(Sent {
                            at: now,
                            input,
                            output: 0,
                        });
                        window.in_flight += 1;
                        if waited {
                            self.stats.lock().unwrap_or_else(|e| e.into_inner()).waits += 1;
                        }
                        return Ok(Permit {
                            _slot: slot,
                            at: now,
                        });
                    }
                }
            };
            waited = true;
            tokio::time::sleep(wait).await;
        }
    }

    /// Records what a request used and what the server said about its limits.
    pub fn finish(
        &self,
        permit: Permit<'_>,
        input: Option<u64>,
        output: u64,
        headers: Option<&HeaderMap>,
    ) {
        let mut window = self.window();
        window.in_flight = window.in_flight.saturating_sub(1);
        if let Some(sent) = window.sent.iter_mut().find(|s| s.at == permit.at) {
            if let Some(input) = input {
                sent.input = input;
            }
            sent.output = output;
        }
        if let Some(headers) = headers {
            if let Some(until) = pause_from_headers(headers, window.in_flight) {
                let now = Instant::now();
                if until > now && window.paused_until.is_none_or(|p| p < until) {
                    window.paused_until = Some(until);
                    self.stats.lock().unwrap_or_else(|e| e.into_inner()).pauses += 1;
                }
            }
        }
    }

    /// Makes every agent of the provider wait `wait` (after a 429).
    pub fn pause(&self, wait: Duration) {
        let until = Instant::now() + wait;
        let mut window = self.window();
        if window.paused_until.is_none_or(|p| p < until) {
            window.paused_until = Some(until);
            self.stats.lock().unwrap_or_else(|e| e.into_inner()).pauses += 1;
        }
    }

    /// Fails every later request with `reason` (a rejected key).
    pub fn poison(&self, reason: &str) {
        self.window().poisoned = Some(reason.to_string());
    }

    pub fn stats(&self) -> LimiterStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// When the server says (almost) nothing is left before a reset: that reset.
fn pause_from_headers(headers: &HeaderMap, in_flight: usize) -> Option<Instant> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let pairs = [
        (
            "anthropic-ratelimit-requests-remaining",
            "anthropic-ratelimit-requests-reset",
            true,
        ),
        (
            "anthropic-ratelimit-input-tokens-remaining",
            "anthropic-ratelimit-input-tokens-reset",
            false,
        ),
        (
            "anthropic-ratelimit-output-tokens-remaining",
            "anthropic-ratelimit-output-tokens-reset",
            false,
        ),
        (
            "anthropic-ratelimit-tokens-remaining",
            "anthropic-ratelimit-tokens-reset",
            false,
        ),
        (
            "x-ratelimit-remaining-requests",
            "x-ratelimit-reset-requests",
            true,
        ),
        (
            "x-ratelimit-remaining-tokens",
            "x-ratelimit-reset-tokens",
            false,
        ),
    ];
    let mut latest: Option<Instant> = None;
    for (remaining, reset, requests) in pairs {
        let Some(left) = get(remaining).and_then(|v| v.parse::<u64>().ok()) else {
            continue;
        };
        // Requests: keep what is in flight from overshooting; tokens: only when spent.
        let low = if requests {
            left <= in_flight as u64
        } else {
            left == 0
        };
        if !low {
            continue;
        }
        let Some(wait) = get(reset).and_then(reset_in) else {
            continue;
        };
        let until = Instant::now() + wait;
        latest = Some(latest.map_or(until, |l| l.max(until)));
    }
    latest
}

/// A reset header: an RFC 3339 time (Anthropic) or a duration like `6m0s`, `1s`, `12ms`
/// (OpenAI).
fn reset_in(value: &str) -> Option<Duration> {
    if let Ok(at) = humantime::parse_rfc3339_weak(value) {
        return Some(at.duration_since(SystemTime::now()).unwrap_or_default());
    }
    parse_go_duration(value)
}

fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" | "µs" => 0.000_001,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    Some(Duration::from_secs_f64(total))
}

/// The limiters of a run, one per provider endpoint and key.
#[derive(Debug, Default)]
pub struct Limiters {
    map: Mutex<HashMap<(String, String), Arc<Limiter>>>,
}

impl Limiters {
    /// The limiter for `provider`, made on first use from its limits.
    pub fn get(&self, provider: &ProviderSettings) -> Arc<Limiter> {
        let key = (
            provider.base_url.clone(),
            provider
                .api_key
                .as_ref()
                .map(|k| k.expose().to_string())
                .unwrap_or_default(),
        );
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_insert_with(|| Arc::new(Limiter::new(provider.limits)))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(parse_go_duration("12ms"), Some(Duration::from_millis(12)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("1h2m"), Some(Duration::from_secs(3720)));
        assert_eq!(parse_go_duration("soon"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_minute_makes_the_next_request_wait() {
        let limiter = Limiter::new(Limits {
            concurrency: 10,
            rpm: Some(2),
            input_tpm: None,
            output_tpm: None,
        });
        let start = Instant::now();
        for _ in 0..2 {
            let p = limiter.acquire(10).await.unwrap();
            limiter.finish(p, Some(10), 5, None);
        }
        assert!(start.elapsed() < Duration::from_secs(1));
        let p = limiter.acquire(10).await.unwrap();
        assert!(start.elapsed() >= WINDOW, "{:?}", start.elapsed());
        limiter.finish(p, None, 0, None);
        assert_eq!(limiter.stats().waits, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_holds_every_request_and_headers_pause_before_a_429() {
        let limiter = Limiter::new(Limits::default());
        let start = Instant::now();
        limiter.pause(Duration::from_secs(5));
        let p = limiter.acquire(1).await.unwrap();
        assert!(start.elapsed() >= Duration::from_secs(5));
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-remaining-requests", "0".parse().unwrap());
        headers.insert("x-ratelimit-reset-requests", "2s".parse().unwrap());
        limiter.finish(p, Some(1), 1, Some(&headers));
        let before = Instant::now();
        let p = limiter.acquire(1).await.unwrap();
        assert!(
            before.elapsed() >= Duration::from_secs(2),
            "{:?}",
            before.elapsed()
        );
        limiter.finish(p, Some(1), 1, None);
        assert_eq!(limiter.stats().pauses, 2);
    }

    #[tokio::test]
    async fn a_rejected_key_fails_every_later_request_at_once() {
        let limiter = Limiter::new(Limits::default());
        limiter.poison("mock rejected the API key (401): check KEY");
        let err = limiter.acquire(1).await.err().unwrap();
        assert!(err.contains("401"));
    }

    #[tokio::test(start_paused = true)]
    async fn concurrency_is_bounded() {
        let limiter = Arc::new(Limiter::new(Limits {
            concurrency: 2,
            ..Limits::default()
        }));
        let first = limiter.acquire(1).await.unwrap();
        let _second = limiter.acquire(1).await.unwrap();
        let third = tokio::time::timeout(Duration::from_millis(100), limiter.acquire(1)).await;
        assert!(
            third.is_err(),
            "a third request went out with two in flight"
        );
        limiter.finish(first, None, 0, None);
        assert!(
            tokio::time::timeout(Duration::from_millis(100), limiter.acquire(1))
                .await
                .is_ok()
        );
    }
}
