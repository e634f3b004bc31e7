//! One limiter per provider and key, shared by every agent of a run, so a hundred agents
//! run at the provider's rate limit together instead of each meeting its own 429.
//!
//! The providers' limits are token buckets (Anthropic's documentation says so; OpenAI's
//! `x-ratelimit-reset-*` likewise give the time until a limit is fully restored): each
//! limit starts full and refills continuously at `limit / 60 s`. The limiter keeps one
//! bucket per limit — requests, input tokens, output tokens, and a combined tokens limit —
//! from the plan's `limits` and from the limit headers the server sends
//! (`anthropic-ratelimit-*`, `x-ratelimit-*`), whose `remaining` corrects the bucket's
//! level. A request is admitted when every bucket can pay for it: one request, its input
//! tokens as estimated before it is sent, and its `max_tokens` of output, reserved; the
//! answer's usage gives back what was not used. Otherwise it sleeps exactly until the
//! buckets will have refilled enough (or something was given back). Requests are admitted
//! first come, first served, so no agent starves. At most `concurrency` are in flight. A
//! 429's `retry-after` pauses every agent of the provider; a key the server rejects poisons
//! the limiter: every other request with that key fails at once with the same reason.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use tokio::sync::{Notify, Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::provider::{Limits, ProviderSettings};

/// The window a limit is stated over: a bucket refills its capacity in this time.
const MINUTE: Duration = Duration::from_secs(60);

/// The limits a provider may have, each a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Requests,
    Input,
    Output,
    /// Input and output together (OpenAI's tokens limit; Anthropic's older one).
    Tokens,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Requests, Kind::Input, Kind::Output, Kind::Tokens];

    /// What a request of `cost` takes from this bucket.
    fn of(self, cost: Cost) -> f64 {
        match self {
            Kind::Requests => 1.0,
            Kind::Input => cost.input as f64,
            Kind::Output => cost.output as f64,
            Kind::Tokens => (cost.input + cost.output) as f64,
        }
    }

    /// The (limit, remaining, reset) headers that state this limit.
    fn headers(self) -> [(&'static str, &'static str, &'static str); 2] {
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

/// What one request may cost, reserved before it is sent: its input tokens as estimated
/// (without what the provider reads from its cache, where that does not count against the
/// limit) and its output tokens at most (`max_tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    pub input: u64,
    pub output: u64,
}

/// Buckets and request slots kept outside this process and shared by every machine that
/// uses one key (the store of a run over many machines): a request pays the shared buckets
/// as well as its own, and holds one of the key's `concurrency` shared slots while in
/// flight. When the exchange fails, the limiter goes on with its own buckets alone.
pub trait Exchange: Send + Sync {
    /// Takes every `(limit, capacity per minute, cost)` from the shared buckets of `key`
    /// (base URL, API key) at once, or none; how long until they can pay when not.
    fn take<'a>(
        &'a self,
        key: &'a (String, String),
        costs: Vec<(&'static str, f64, f64)>,
    ) -> BoxFuture<'a, Result<Option<Duration>, String>>;
    /// Gives `(limit, capacity per minute, amount)` back to the shared buckets (a negative
    /// amount takes more).
    fn give<'a>(
        &'a self,
        key: &'a (String, String),
        amounts: Vec<(&'static str, f64, f64)>,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// One of the `count` shared slots of `key`, or `None` when every one is held.
    fn slot<'a>(
        &'a self,
        key: &'a (String, String),
        count: usize,
    ) -> BoxFuture<'a, Result<Option<i32>, String>>;
    /// Lets a slot go.
    fn free<'a>(&'a self, key: &'a (String, String), slot: i32) -> BoxFuture<'a, ()>;
}

pub use futures_util::future::BoxFuture;

/// The exchange a limiter shares its limits through, and its key (base URL, API key).
type Shared = (Arc<dyn Exchange>, Arc<(String, String)>);

/// A shared slot a request holds; let go when dropped.
struct SharedSlot {
    exchange: Arc<dyn Exchange>,
    key: Arc<(String, String)>,
    slot: i32,
}

impl Drop for SharedSlot {
    fn drop(&mut self) {
        let (exchange, key, slot) = (self.exchange.clone(), self.key.clone(), self.slot);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { exchange.free(&key, slot).await });
        }
    }
}

impl Kind {
    /// The limit's name in the shared store.
    fn name(self) -> &'static str {
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
struct Bucket {
    capacity: f64,
    rate: f64,
    level: f64,
    updated: Instant,
}

impl Bucket {
    /// A full bucket for a limit of `limit` per minute.
    fn full(limit: f64, now: Instant) -> Bucket {
        Bucket {
            capacity: limit,
            rate: limit / MINUTE.as_secs_f64(),
            level: limit,
            updated: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.level = (self.level + elapsed * self.rate).min(self.capacity);
        self.updated = now;
    }

    /// How long until it can pay `amount` (at once when it can now). A request larger than
    /// the whole bucket goes when the bucket is full, leaving it in debt.
    fn wait_for(&self, amount: f64) -> Duration {
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
struct State {
    buckets: HashMap<Kind, Bucket>,
    /// What every request so far took, per limit, in `Kind::ALL`'s order, net of what their
    /// answers gave back: a response's headers tell the level before what was taken and
    /// given back after it was sent.
    admitted: [f64; 4],
    paused_until: Option<Instant>,
    poisoned: Option<String>,
}

impl State {
    /// How long the next request of `cost` must wait: a pause, or the slowest bucket.
    fn wait(&mut self, now: Instant, cost: Cost) -> Duration {
        let paused = self
            .paused_until
            .map_or(Duration::ZERO, |u| u.saturating_duration_since(now));
        self.buckets
            .iter_mut()
            .map(|(kind, bucket)| {
                bucket.refill(now);
                bucket.wait_for(kind.of(cost))
            })
            .fold(paused, Duration::max)
    }

    /// Records an admitted request of `cost` in the ledger.
    fn admit(&mut self, cost: Cost) {
        for (k, kind) in Kind::ALL.iter().enumerate() {
            self.admitted[k] += kind.of(cost);
        }
    }

    /// Takes `cost` from every bucket.
    fn take(&mut self, cost: Cost, now: Instant) {
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
    fn correct(&mut self, headers: &HeaderMap, now: Instant, sent: Instant, ledger: [f64; 4]) {
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
                // A bucket that says when it will be full again tells its rate too.
                let until_full = headers
                    .get(reset)
                    .and_then(|v| v.to_str().ok())
                    .and_then(reset_in);
                if let Some(until_full) = until_full.filter(|d| *d >= Duration::from_secs(1)) {
                    let missing = bucket.capacity - remaining;
                    if missing > 0.0 {
                        let rate = missing / until_full.as_secs_f64();
                        // Only ever slower than the nominal rate: a fast reading is rounding.
                        bucket.rate = bucket.rate.min(rate.max(bucket.capacity / 600.0));
                    }
                }
            }
        }
    }
}

/// What a limiter has done, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimiterStats {
    /// Requests that waited for a bucket or a pause.
    pub waits: u64,
    /// Pauses of the whole provider after a 429.
    pub pauses: u64,
}

/// The shared limiter of one provider and key.
pub struct Limiter {
    slots: Semaphore,
    /// First come, first served: the request holding it is the next to be admitted.
    queue: tokio::sync::Mutex<()>,
    state: Mutex<State>,
    /// Rung when something is given back, so the head of the queue looks again.
    given_back: Notify,
    stats: Mutex<LimiterStats>,
    /// The buckets and slots shared with other machines, and this limit's key there.
    shared: Option<Shared>,
    concurrency: usize,
    /// Whether the exchange failed once (it is then left alone).
    exchange_failed: std::sync::atomic::AtomicBool,
    /// Whether the server was found to send no usage (said once).
    unreported: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("shared", &self.shared.is_some())
            .field("stats", &self.stats())
            .finish()
    }
}

/// A request's place: hold it while the request is in flight.
pub struct Permit<'a> {
    _slot: SemaphorePermit<'a>,
    _shared: Option<SharedSlot>,
    reserved: Cost,
    /// When it was admitted, and the ledger then (itself included).
    sent: Instant,
    ledger: [f64; 4],
}

impl Limiter {
    pub fn new(limits: Limits) -> Limiter {
        let now = Instant::now();
        let mut buckets = HashMap::new();
        let configured = [
            (Kind::Requests, limits.rpm.map(u64::from)),
            (Kind::Input, limits.input_tpm),
            (Kind::Output, limits.output_tpm),
        ];
        for (kind, limit) in configured {
            if let Some(limit) = limit.filter(|l| *l > 0) {
                buckets.insert(kind, Bucket::full(limit as f64, now));
            }
        }
        Limiter {
            shared: None,
            concurrency: limits.concurrency.max(1),
            exchange_failed: Default::default(),
            unreported: Default::default(),
            slots: Semaphore::new(limits.concurrency.max(1)),
            queue: tokio::sync::Mutex::new(()),
            state: Mutex::new(State {
                buckets,
                ..State::default()
            }),
            given_back: Notify::new(),
            stats: Mutex::new(LimiterStats::default()),
        }
    }

    /// A limiter that also pays `exchange`'s buckets and holds its slots, for `key`.
    pub fn with_exchange(
        limits: Limits,
        exchange: Arc<dyn Exchange>,
        key: (String, String),
    ) -> Limiter {
        Limiter {
            shared: Some((exchange, Arc::new(key))),
            ..Limiter::new(limits)
        }
    }

    /// Notes that the exchange failed: warned once, then the limiter keeps to its own.
    fn exchange_failed(&self, e: &str) {
        use std::sync::atomic::Ordering;
        if !self.exchange_failed.swap(true, Ordering::Relaxed) {
            tracing::warn!("the rate limit shared through the store failed ({e}); this machine keeps to its own");
        }
    }

    /// Waits for a shared slot and for the shared buckets to pay `cost`; the slot.
    async fn share(&self, cost: Cost) -> Option<SharedSlot> {
        use std::sync::atomic::Ordering;
        let (exchange, key) = self.shared.as_ref()?;
        if self.exchange_failed.load(Ordering::Relaxed) {
            return None;
        }
        let mut pause = Duration::from_millis(5);
        let slot = loop {
            match exchange.slot(key, self.concurrency).await {
                Ok(Some(slot)) => {
                    break SharedSlot {
                        exchange: exchange.clone(),
                        key: key.clone(),
                        slot,
                    }
                }
                Ok(None) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err(e) => {
                    self.exchange_failed(&e);
                    return None;
                }
            }
        };
        loop {
            let costs: Vec<(&'static str, f64, f64)> = {
                let state = self.state();
                state
                    .buckets
                    .iter()
                    .map(|(kind, b)| (kind.name(), b.capacity, kind.of(cost)))
                    .collect()
            };
            if costs.is_empty() {
                return Some(slot);
            }
            match exchange.take(key, costs).await {
                Ok(None) => return Some(slot),
                Ok(Some(wait)) => tokio::time::sleep(wait + Duration::from_millis(1)).await,
                Err(e) => {
                    self.exchange_failed(&e);
                    return Some(slot);
                }
            }
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until a request of `cost` may be sent, in turn, and takes it from the buckets.
    pub async fn acquire(&self, cost: Cost) -> Result<Permit<'_>, String> {
        let slot = self.slots.acquire().await.map_err(|e| e.to_string())?;
        let _turn = self.queue.lock().await;
        let shared = self.share(cost).await;
        let mut waited = false;
        loop {
            let wait = {
                let mut state = self.state();
                if let Some(reason) = &state.poisoned {
                    return Err(reason.clone());
                }
                let now = Instant::now();
                let wait = state.wait(now, cost);
                if wait.is_zero() {
                    state.take(cost, now);
                    state.admit(cost);
                    let ledger = state.admitted;
                    if waited {
                        self.stats.lock().unwrap_or_else(|e| e.into_inner()).waits += 1;
                    }
                    return Ok(Permit {
                        _slot: slot,
                        _shared: shared,
                        reserved: cost,
                        sent: now,
                        ledger,
                    });
                }
                wait
            };
            waited = true;
            // A millisecond past the moment, so the bucket has surely refilled.
            tokio::select! {
                _ = tokio::time::sleep(wait + Duration::from_millis(1)) => {}
                _ = self.given_back.notified() => {}
            }
        }
    }

    /// Records what a request used (`None`: unknown, the reservation stands) and what the
    /// server said about its limits; gives back what was reserved and not used.
    pub fn finish(&self, permit: Permit<'_>, used: Option<Cost>, headers: Option<&HeaderMap>) {
        let now = Instant::now();
        {
            let mut state = self.state();
            // Unknown use (a failed request): the input is spent, no output was made.
            let used = used.unwrap_or(Cost {
                input: permit.reserved.input,
                output: 0,
            });
            let back = Cost {
                input: permit.reserved.input.saturating_sub(used.input),
                output: permit.reserved.output.saturating_sub(used.output),
            };
            let more = Cost {
                input: used.input.saturating_sub(permit.reserved.input),
                output: used.output.saturating_sub(permit.reserved.output),
            };
            // The ledger is net of what was given back, so the headers of a request sent
            // before this one do not undo the settlement.
            for (k, kind) in Kind::ALL.iter().enumerate() {
                state.admitted[k] += kind.of(more) - kind.of(back);
            }
            // The request itself stays paid for; only its tokens are settled.
            for kind in [Kind::Input, Kind::Output, Kind::Tokens] {
                if let Some(bucket) = state.buckets.get_mut(&kind) {
                    bucket.refill(now);
                    // Given back up to full; a request that used more than it reserved
                    // leaves the bucket that much lower.
                    bucket.level =
                        (bucket.level + kind.of(back) - kind.of(more)).min(bucket.capacity);
                }
            }
            if let Some(headers) = headers {
                state.correct(headers, now, permit.sent, permit.ledger);
            }
            if let (Some((exchange, key)), false) = (
                &self.shared,
                self.exchange_failed
                    .load(std::sync::atomic::Ordering::Relaxed),
            ) {
                let amounts: Vec<(&'static str, f64, f64)> =
                    [Kind::Input, Kind::Output, Kind::Tokens]
                        .into_iter()
                        .filter_map(|kind| {
                            let bucket = state.buckets.get(&kind)?;
                            let amount = kind.of(back) - kind.of(more);
                            (amount != 0.0).then_some((kind.name(), bucket.capacity, amount))
                        })
                        .collect();
                if !amounts.is_empty() {
                    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                        let (exchange, key) = (exchange.clone(), key.clone());
                        runtime.spawn(async move {
                            if let Err(e) = exchange.give(&key, amounts).await {
                                tracing::warn!(
                                    "could not give tokens back to the shared limit: {e}"
                                );
                            }
                        });
                    }
                }
            }
        }
        drop(permit);
        self.given_back.notify_waiters();
    }

    /// Makes every agent of the provider wait `wait` (after a 429).
    pub fn pause(&self, wait: Duration) {
        let until = Instant::now() + wait;
        let mut state = self.state();
        if state.paused_until.is_none_or(|p| p < until) {
            state.paused_until = Some(until);
            self.stats.lock().unwrap_or_else(|e| e.into_inner()).pauses += 1;
        }
    }

    /// Notes that an answer of this provider came without its usage, which plait then
    /// estimates: warned once per provider and key, naming the setting that makes the
    /// server count (a stream's usage is what such servers leave out).
    pub fn usage_unreported(&self, provider: &str, streamed: bool) {
        use std::sync::atomic::Ordering;
        if self.unreported.swap(true, Ordering::Relaxed) {
            return;
        }
        if streamed {
            tracing::warn!(
                "provider {provider}'s server sends no usage in its stream; plait estimates \
                 the tokens (marked ≈). `stream = false` in [providers.{provider}] makes the \
                 server count them"
            );
        } else {
            tracing::warn!(
                "provider {provider}'s server sends no usage with its answers; plait \
                 estimates the tokens (marked ≈)"
            );
        }
    }

    /// Fails every later request with `reason` (a rejected key).
    pub fn poison(&self, reason: &str) {
        self.state().poisoned = Some(reason.to_string());
    }

    pub fn stats(&self) -> LimiterStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }
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
#[derive(Default)]
pub struct Limiters {
    map: Mutex<HashMap<(String, String), Arc<Limiter>>>,
    /// Where the limits are shared with other machines, if they are.
    exchange: Option<Arc<dyn Exchange>>,
}

impl std::fmt::Debug for Limiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiters")
            .field("shared", &self.exchange.is_some())
            .finish()
    }
}

impl Limiters {
    /// Limiters whose limits are shared with other machines through `exchange`.
    pub fn shared(exchange: Arc<dyn Exchange>) -> Limiters {
        Limiters {
            map: Default::default(),
            exchange: Some(exchange),
        }
    }

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
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(match &self.exchange {
                    Some(exchange) => {
                        Limiter::with_exchange(provider.limits, exchange.clone(), key)
                    }
                    None => Limiter::new(provider.limits),
                })
            })
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

    fn limits(rpm: Option<u32>, input_tpm: Option<u64>) -> Limits {
        Limits {
            concurrency: 100,
            rpm,
            input_tpm,
            output_tpm: None,
        }
    }

    const SMALL: Cost = Cost {
        input: 10,
        output: 0,
    };

    #[tokio::test(start_paused = true)]
    async fn a_full_bucket_bursts_then_paces_at_its_refill_rate() {
        // 60 a minute: 60 at once, then one a second, not a minute's pause and a burst.
        let limiter = Limiter::new(limits(Some(60), None));
        let start = Instant::now();
        for _ in 0..60 {
            let p = limiter.acquire(SMALL).await.unwrap();
            limiter.finish(p, Some(SMALL), None);
        }
        assert!(start.elapsed() < Duration::from_millis(10));
        for k in 1..=5u64 {
            let p = limiter.acquire(SMALL).await.unwrap();
            let at = start.elapsed();
            assert!(
                at >= Duration::from_secs(k) && at < Duration::from_millis(1000 * k + 50),
                "request {} of the second minute went at {at:?}",
                k
            );
            limiter.finish(p, Some(SMALL), None);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn output_is_reserved_from_max_tokens_and_given_back() {
        let limiter = Arc::new(Limiter::new(Limits {
            output_tpm: Some(1000),
            ..limits(None, None)
        }));
        let big = Cost {
            input: 0,
            output: 600,
        };
        let first = limiter.acquire(big).await.unwrap();
        // 400 left: a second reservation of 600 must wait for 200 to refill (12 s)...
        let start = Instant::now();
        let waiting = {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let p = limiter.acquire(big).await.unwrap();
                let at = Instant::now();
                limiter.finish(p, Some(big), None);
                at
            })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        // ...unless the first answer used only 100 of its 600: then at once.
        limiter.finish(
            first,
            Some(Cost {
                input: 0,
                output: 100,
            }),
            None,
        );
        let at = waiting.await.unwrap();
        assert!(
            at.duration_since(start) < Duration::from_millis(1100),
            "{:?}",
            at.duration_since(start)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn headers_correct_the_level_and_add_the_limits_the_plan_did_not_name() {
        let limiter = Limiter::new(limits(None, None));
        let p = limiter.acquire(SMALL).await.unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-ratelimit-input-tokens-limit",
            "6000".parse().unwrap(),
        );
        headers.insert(
            "anthropic-ratelimit-input-tokens-remaining",
            "0".parse().unwrap(),
        );
        let full_at = humantime::format_rfc3339(SystemTime::now() + Duration::from_secs(60));
        headers.insert(
            "anthropic-ratelimit-input-tokens-reset",
            full_at.to_string().parse().unwrap(),
        );
        limiter.finish(p, Some(SMALL), Some(&headers));
        // Empty, refilling 100 a second: 1000 tokens take 10 s, not the minute to full.
        let start = Instant::now();
        let p = limiter
            .acquire(Cost {
                input: 1000,
                output: 0,
            })
            .await
            .unwrap();
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(10) && took < Duration::from_secs(11),
            "{took:?}"
        );
        limiter.finish(p, None, None);
        assert_eq!(limiter.stats().waits, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_larger_than_the_bucket_goes_when_it_is_full() {
        let limiter = Limiter::new(limits(None, Some(1000)));
        let huge = Cost {
            input: 5000,
            output: 0,
        };
        let p = limiter.acquire(huge).await.unwrap();
        limiter.finish(p, Some(huge), None);
        // 4000 in debt: the next small request waits for the bucket to climb back above 10.
        let start = Instant::now();
        let p = limiter.acquire(SMALL).await.unwrap();
        assert!(
            start.elapsed() >= Duration::from_secs(240),
            "{:?}",
            start.elapsed()
        );
        limiter.finish(p, Some(SMALL), None);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_are_admitted_in_turn() {
        let limiter = Arc::new(Limiter::new(limits(Some(60), None)));
        for _ in 0..60 {
            let p = limiter.acquire(SMALL).await.unwrap();
            limiter.finish(p, Some(SMALL), None);
        }
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut handles = Vec::new();
        for k in 0..5 {
            let (limiter, order) = (limiter.clone(), order.clone());
            handles.push(tokio::spawn(async move {
                let p = limiter.acquire(SMALL).await.unwrap();
                order.lock().unwrap().push(k);
                limiter.finish(p, Some(SMALL), None);
            }));
            tokio::task::yield_now().await;
        }
        for h in handles {
            h.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_holds_every_request() {
        let limiter = Limiter::new(Limits::default());
        let start = Instant::now();
        limiter.pause(Duration::from_secs(5));
        let p = limiter.acquire(SMALL).await.unwrap();
        assert!(start.elapsed() >= Duration::from_secs(5));
        limiter.finish(p, Some(SMALL), None);
        assert_eq!(limiter.stats().pauses, 1);
    }

    #[tokio::test]
    async fn a_rejected_key_fails_every_later_request_at_once() {
        let limiter = Limiter::new(Limits::default());
        limiter.poison("mock rejected the API key (401): check KEY");
        let err = limiter.acquire(SMALL).await.err().unwrap();
        assert!(err.contains("401"));
    }

    #[tokio::test(start_paused = true)]
    async fn concurrency_is_bounded() {
        let limiter = Arc::new(Limiter::new(Limits {
            concurrency: 2,
            ..Limits::default()
        }));
        let first = limiter.acquire(SMALL).await.unwrap();
        let _second = limiter.acquire(SMALL).await.unwrap();
        let third = tokio::time::timeout(Duration::from_millis(100), limiter.acquire(SMALL)).await;
        assert!(
            third.is_err(),
            "a third request went out with two in flight"
        );
        limiter.finish(first, None, None);
        assert!(
            tokio::time::timeout(Duration::from_millis(100), limiter.acquire(SMALL))
                .await
                .is_ok()
        );
    }
}
