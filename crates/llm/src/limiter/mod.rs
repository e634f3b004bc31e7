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
use std::time::Duration;

use reqwest::header::HeaderMap;
use tokio::sync::{Notify, Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::provider::{Limits, ProviderSettings};

mod bucket;
mod shared;

use bucket::{Bucket, Kind, State};
use plait_core::sync::Locked as _;
pub use shared::{BoxFuture, Exchange};
use shared::{Shared, SharedSlot};

/// What one request may cost, reserved before it is sent: its input tokens as estimated
/// (without what the provider reads from its cache, where that does not count against the
/// limit) and its output tokens at most (`max_tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
}

/// How long one request waited before the limiter admitted it, and for what: what is
/// behind a slow start (a request waits for a slot, then its turn, then the limits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waited {
    /// For one of the `concurrency` slots (that many requests were in flight).
    pub slot: Duration,
    /// For its turn: behind requests that came before it and were waiting themselves.
    pub turn: Duration,
    /// For the slots and buckets shared with other machines.
    pub shared: Duration,
    /// For this machine's buckets, or a pause after a 429.
    pub limit: Duration,
    /// The limit it waited for last: `requests`, `input`, `output`, `tokens` or `pause`.
    pub why: Option<&'static str>,
}

impl Waited {
    /// The whole wait.
    pub fn total(&self) -> Duration {
        self.slot + self.turn + self.shared + self.limit
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
    /// Whether the server was found to end streamed answers before their first event:
    /// it is asked without streaming from then on (see `http::call`).
    no_streams: std::sync::atomic::AtomicBool,
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
    waited: Waited,
}

impl Permit<'_> {
    /// How long the request waited to be admitted, and for what.
    pub fn waited(&self) -> Waited {
        self.waited
    }
}

impl Limiter {
    /// A limiter of `limits` alone, this machine's.
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
            no_streams: Default::default(),
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

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Waits until a request of `cost` may be sent, in turn, and takes it from the buckets.
    pub async fn acquire(&self, cost: Cost) -> Result<Permit<'_>, String> {
        let arrived = Instant::now();
        let slot = self.slots.acquire().await.map_err(|e| e.to_string())?;
        let mut waited = Waited {
            slot: arrived.elapsed(),
            ..Waited::default()
        };
        let since = Instant::now();
        let _turn = self.queue.lock().await;
        waited.turn = since.elapsed();
        let since = Instant::now();
        let shared = self.share(cost).await;
        waited.shared = since.elapsed();
        let since = Instant::now();
        loop {
            let wait = {
                let mut state = self.state();
                if let Some(reason) = &state.poisoned {
                    return Err(reason.clone());
                }
                let now = Instant::now();
                let (wait, why) = state.wait(now, cost);
                if wait.is_zero() {
                    state.take(cost, now);
                    state.admit(cost);
                    let ledger = state.admitted;
                    if waited.why.is_some() {
                        waited.limit = now.saturating_duration_since(since);
                        self.stats.locked().waits += 1;
                    }
                    return Ok(Permit {
                        _slot: slot,
                        _shared: shared,
                        reserved: cost,
                        sent: now,
                        ledger,
                        waited,
                    });
                }
                waited.why = why;
                wait
            };
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
            self.give_shared(&state, back, more);
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
            self.stats.locked().pauses += 1;
        }
    }

    /// Whether this server's answers are asked for without streaming (see
    /// [`Limiter::refuse_streams`]).
    pub fn streams_refused(&self) -> bool {
        self.no_streams.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Notes that the server `provider` ends streamed answers before their first event
    /// (llama-cpp-python's function calling cannot stream a tool choice): said once, and
    /// every later request of the run asks without streaming.
    pub fn refuse_streams(&self, provider: &str) {
        use std::sync::atomic::Ordering;
        if !self.no_streams.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "provider {provider}: the server ended streamed answers before their first \
                 event; asking it without streaming from now on (set stream = false for it \
                 to start so)"
            );
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
    pub(crate) fn poison(&self, reason: &str) {
        self.state().poisoned = Some(reason.to_string());
    }

    /// What it has done so far.
    pub fn stats(&self) -> LimiterStats {
        *self.stats.locked()
    }
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
            .locked()
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
mod tests;
