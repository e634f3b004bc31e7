//! The limiter's token buckets: one per limit (requests, input, output, tokens), refilled
//! continuously, and corrected from the limit headers a provider's answers carry.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use tokio::time::Instant;

use super::Cost;

/// The window a limit is stated over: a bucket refills its capacity in this time.
const MINUTE: Duration = Duration::from_secs(60);

/// The limits a provider may have, each a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Requests,
    Input,
    Output,
    /// Input and output together (OpenAI's tokens limit; Anthropic's older one).
    Tokens,
}

impl Kind {
    pub(super) const ALL: [Kind; 4] = [Kind::Requests, Kind::Input, Kind::Output, Kind::Tokens];

    /// What a request of `cost` takes from this bucket.
    pub(super) fn of(self, cost: Cost) -> f64 {
        match self {
            Kind::Requests => 1.0,
            Kind::Input => cost.input as f64,
            Kind::Output => cost.output as f64,
            Kind::Tokens => (cost.input + cost.output) as f64,
        }
    }

    /// The (limit, remaining, reset) headers that state this limit.
    pub(super) fn headers(self) -> [(&'static str, &'static str, &'static str); 2] {
        match self {
            Kind::Requests => [
                (
                    "anthropic-ratelimit-requests-limit",
                    "anthropic-ratelimit-requests-remaining",
                    "anthropic-ratelimit-requests-reset",
                ),
                (
                    "x-ratelimit-limit-requests",
                    "x-ratelimit-remaining-requests",
                    "x-ratelimit-reset-requests",
                ),
            ],
            Kind::Input => [
                (
                    "anthropic-ratelimit-input-tokens-limit",
                    "anthropic-ratelimit-input-tokens-remaining",
                    "anthropic-ratelimit-input-tokens-reset",
                ),
                ("", "", ""),
            ],
            Kind::Output => [
                (
                    "anthropic-ratelimit-output-tokens-limit",
                    "anthropic-ratelimit-output-tokens-remaining",
                    "anthropic-ratelimit-output-tokens-reset",
                ),
                ("", "", ""),
            ],
            Kind::Tokens => [
                (
                    "anthropic-ratelimit-tokens-limit",
                    "anthropic-ratelimit-tokens-remaining",
                    "anthropic-ratelimit-tokens-reset",
                ),
                (
                    "x-ratelimit-limit-tokens",
                    "x-ratelimit-remaining-tokens",
                    "x-ratelimit-reset-tokens",
                ),
            ],
        }
    }
}

impl Kind {
    /// The limit's name in the shared store.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Requests => "requests",
            Kind::Input => "input",
            Kind::Output => "output",
            Kind::Tokens => "tokens",
        }
    }
}

/// A token bucket: `capacity`, refilled at `rate` per second, `level` now.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bucket {
    pub(super) capacity: f64,
    pub(super) rate: f64,
    pub(super) level: f64,
    pub(super) updated: Instant,
}

impl Bucket {
    /// A full bucket for a limit of `limit` per minute.
    pub(super) fn full(limit: f64, now: Instant) -> Bucket {
        Bucket {
            capacity: limit,
            rate: limit / MINUTE.as_secs_f64(),
            level: limit,
            updated: now,
        }
    }

    pub(super) fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.level = (self.level + elapsed * self.rate).min(self.capacity);
        self.updated = now;
    }

    /// How long until it can pay `amount` (at once when it can now). A request larger than
    /// the whole bucket goes when the bucket is full, leaving it in debt.
    pub(super) fn wait_for(&self, amount: f64) -> Duration {
        let need = amount.min(self.capacity);
        if self.level >= need {
            return Duration::ZERO;
        }
        if self.rate <= 0.0 {
            return MINUTE;
        }
        Duration::from_secs_f64((need - self.level) / self.rate)
    }
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) buckets: HashMap<Kind, Bucket>,
    /// What every request so far took, per limit, in `Kind::ALL`'s order, net of what their
    /// answers gave back: a response's headers tell the level before what was taken and
    /// given back after it was sent.
    pub(super) admitted: [f64; 4],
    pub(super) paused_until: Option<Instant>,
    pub(super) poisoned: Option<String>,
}

impl State {
    /// How long the next request of `cost` must wait (a pause, or the slowest bucket),
    /// and for what (`pause` or the bucket's name); nothing when it may go now.
    pub(super) fn wait(&mut self, now: Instant, cost: Cost) -> (Duration, Option<&'static str>) {
        let paused = self
            .paused_until
            .map_or(Duration::ZERO, |u| u.saturating_duration_since(now));
        let (wait, why) = self
            .buckets
            .iter_mut()
            .map(|(kind, bucket)| {
                bucket.refill(now);
                (bucket.wait_for(kind.of(cost)), kind.name())
            })
            .fold((paused, "pause"), |a, b| if b.0 > a.0 { b } else { a });
        (wait, (!wait.is_zero()).then_some(why))
    }

    /// Records an admitted request of `cost` in the ledger.
    pub(super) fn admit(&mut self, cost: Cost) {
        for (k, kind) in Kind::ALL.iter().enumerate() {
            self.admitted[k] += kind.of(cost);
        }
    }

    /// Takes `cost` from every bucket.
    pub(super) fn take(&mut self, cost: Cost, now: Instant) {
        for (kind, bucket) in self.buckets.iter_mut() {
            bucket.refill(now);
            bucket.level -= kind.of(cost);
        }
    }

    /// Corrects the buckets from the limit headers of the answer to a request admitted at
    /// `sent`, when the ledger stood at `ledger`: a limit the plan did not name gets its
    /// bucket; a level the server says is lower than ours (other clients of the key, a
    /// wrong estimate) is taken. The server's `remaining` is its level when the request
    /// arrived, so it is brought forward: refilled since, less what was sent since. A level
    /// above ours is not taken.
    pub(super) fn correct(
        &mut self,
        headers: &HeaderMap,
        now: Instant,
        sent: Instant,
        ledger: [f64; 4],
    ) {
        let number = |name: &str| {
            (!name.is_empty())
                .then(|| headers.get(name))
                .flatten()
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
        };
        for (k, kind) in Kind::ALL.into_iter().enumerate() {
            let sent_since = self.admitted[k] - ledger[k];
            for (limit, remaining, reset) in kind.headers() {
                let (limit, remaining) = (number(limit), number(remaining));
                let Some(remaining) = remaining else {
                    continue;
                };
                let bucket = match (self.buckets.get_mut(&kind), limit) {
                    (Some(bucket), Some(limit)) if (bucket.capacity - limit).abs() > 0.5 => {
                        bucket.refill(now);
                        bucket.capacity = limit;
                        bucket.rate = limit / MINUTE.as_secs_f64();
                        bucket.level = bucket.level.min(limit);
                        bucket
                    }
                    (Some(bucket), _) => {
                        bucket.refill(now);
                        bucket
                    }
                    (None, Some(limit)) if limit > 0.0 => {
                        self.buckets.entry(kind).or_insert(Bucket::full(limit, now))
                    }
                    (None, _) => continue,
                };
                let since = now.saturating_duration_since(sent).as_secs_f64();
                let now_level = (remaining + since * bucket.rate).min(bucket.capacity) - sent_since;
                bucket.level = bucket.level.min(now_level);
                // A bucket that says when it will be full again tells its rate too, read
                // afresh from each answer: a reading with little missing says more about
                // the reset's rounding (or a server's fixed window) than the rate, and one
                // slow reading kept for good would crawl for the rest of the run.
                let until_full = headers
                    .get(reset)
                    .and_then(|v| v.to_str().ok())
                    .and_then(reset_in);
                if let Some(until_full) = until_full.filter(|d| *d >= Duration::from_secs(1)) {
                    let missing = bucket.capacity - remaining;
                    if missing > bucket.capacity / 10.0 {
                        let nominal = bucket.capacity / MINUTE.as_secs_f64();
                        let rate = missing / until_full.as_secs_f64();
                        // Never faster than the nominal rate: a fast reading is rounding.
                        bucket.rate = rate.clamp(nominal / 10.0, nominal);
                    }
                }
            }
        }
    }
}

/// A reset header: an RFC 3339 time (Anthropic) or a duration like `6m0s`, `1s`, `12ms`
/// (OpenAI).
pub(super) fn reset_in(value: &str) -> Option<Duration> {
    if let Ok(at) = humantime::parse_rfc3339_weak(value) {
        return Some(at.duration_since(SystemTime::now()).unwrap_or_default());
    }
    parse_go_duration(value)
}

pub(super) fn parse_go_duration(text: &str) -> Option<Duration> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn go_durations_parse() {
        assert_eq!(parse_go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(parse_go_duration("12ms"), Some(Duration::from_millis(12)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("1h2m"), Some(Duration::from_secs(3720)));
        assert_eq!(parse_go_duration("soon"), None);
    }
}
