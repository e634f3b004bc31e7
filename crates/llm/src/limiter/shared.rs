//! Limits shared with other machines through an [`Exchange`] (the store of a run over
//! many machines): the shared buckets a request also pays, and the shared slots it holds.

use std::sync::Arc;
use std::time::Duration;

use super::bucket::{Kind, State};
use super::{Cost, Limiter};

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
pub(super) type Shared = (Arc<dyn Exchange>, Arc<(String, String)>);

/// A shared slot a request holds; let go when dropped.
pub(super) struct SharedSlot {
    pub(super) exchange: Arc<dyn Exchange>,
    pub(super) key: Arc<(String, String)>,
    pub(super) slot: i32,
}

impl Drop for SharedSlot {
    fn drop(&mut self) {
        let (exchange, key, slot) = (self.exchange.clone(), self.key.clone(), self.slot);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { exchange.free(&key, slot).await });
        }
    }
}

impl Limiter {
    /// Notes that the exchange failed: warned once, then the limiter keeps to its own.
    pub(super) fn exchange_failed(&self, e: &str) {
        use std::sync::atomic::Ordering;
        if !self.exchange_failed.swap(true, Ordering::Relaxed) {
            tracing::warn!("the rate limit shared through the store failed ({e}); this machine keeps to its own");
        }
    }

    /// Waits for a shared slot and for the shared buckets to pay `cost`; the slot.
    pub(super) async fn share(&self, cost: Cost) -> Option<SharedSlot> {
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

    /// Gives the shared buckets back what a request reserved and did not use (`back`), or
    /// takes what it used beyond (`more`), in the background.
    pub(super) fn give_shared(&self, state: &State, back: Cost, more: Cost) {
        if let (Some((exchange, key)), false) = (
            &self.shared,
            self.exchange_failed
                .load(std::sync::atomic::Ordering::Relaxed),
        ) {
            let amounts: Vec<(&'static str, f64, f64)> = [Kind::Input, Kind::Output, Kind::Tokens]
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
                            tracing::warn!("could not give tokens back to the shared limit: {e}");
                        }
                    });
                }
            }
        }
    }
}
