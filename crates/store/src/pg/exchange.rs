//! The rate limits every machine of a store shares: token buckets in `plait_buckets`,
//! named by a keyed hash, and request slots held as advisory locks.

use std::time::Duration;

use super::{PgError, PgStore};
use plait_core::sync::Locked as _;

/// A SHA-1 of `provider` and `api_key`, keyed by `secret` (each part length-prefixed).
fn keyed_digest(secret: &str, provider: &str, api_key: &str) -> String {
    use sha1::{Digest, Sha1};
    let mut hash = Sha1::new();
    for part in [secret, provider, api_key] {
        hash.update(part.len().to_be_bytes());
        hash.update(part.as_bytes());
    }
    plait_core::hex::lower(&hash.finalize())
}

impl PgStore {
    /// The name a limit of `provider` and `api_key` has in the store: a hash keyed by the
    /// store's own secret, so the key is never stored and cannot be guessed from the name.
    pub async fn bucket_name(
        &self,
        provider: &str,
        api_key: &str,
        limit: &str,
    ) -> Result<String, PgError> {
        let secret = self.secret().await?;
        Ok(format!(
            "{}:{limit}",
            keyed_digest(&secret, provider, api_key)
        ))
    }

    /// The store's own secret, which keys the names of its rate limits.
    async fn secret(&self) -> Result<String, PgError> {
        let row = self
            .client
            .query_one("SELECT secret FROM plait_secret LIMIT 1", &[])
            .await?;
        Ok(row.get(0))
    }

    /// Takes `cost` from the shared token bucket `name` of `capacity`, refilled at
    /// `per_second`, which starts full: `None` when taken, else how long until it will
    /// have refilled enough (nothing taken). One statement, so machines taking at once each
    /// see the others' takes.
    pub async fn take(
        &self,
        name: &str,
        capacity: f64,
        per_second: f64,
        cost: f64,
    ) -> Result<Option<Duration>, PgError> {
        let cost = cost.min(capacity);
        let take = "WITH now AS (
                SELECT least($2::float8,
                             level + extract(epoch FROM clock_timestamp() - at)::float8 * $3::float8)
                       AS level
                  FROM plait_buckets WHERE key = $1 FOR UPDATE
             )
             UPDATE plait_buckets b
                SET level = CASE WHEN now.level >= $4::float8 THEN now.level - $4::float8
                                 ELSE now.level END,
                    at = clock_timestamp()
               FROM now
              WHERE b.key = $1
          RETURNING now.level";
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&name, &capacity, &per_second, &cost];
        let row = match self.client.query_opt(take, &params).await? {
            Some(row) => row,
            None => {
                // A new bucket starts full.
                self.client
                    .execute(
                        "INSERT INTO plait_buckets (key, level) VALUES ($1, $2)
                         ON CONFLICT (key) DO NOTHING",
                        &[&name, &capacity],
                    )
                    .await?;
                self.client.query_one(take, &params).await?
            }
        };
        let level: f64 = row.get(0);
        if level >= cost {
            Ok(None)
        } else {
            Ok(Some(Duration::from_secs_f64((cost - level) / per_second)))
        }
    }
}

/// The rate limits of each provider and key shared by every machine of the store: token
/// buckets in `plait_buckets`, named by a hash of the base URL and key keyed with the
/// store's own secret (the key is never stored), and request slots held as session
/// advisory locks (a machine that dies lets its slots go with its connection).
pub struct PgExchange {
    store: std::sync::Arc<PgStore>,
    secret: tokio::sync::OnceCell<String>,
    /// The slots this connection holds, by key: a session holds an advisory lock again
    /// when it asks twice, so its own slots are left out of each try.
    held: tokio::sync::Mutex<std::collections::HashSet<(i32, i32)>>,
    /// Buckets known to exist.
    made: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl PgExchange {
    /// The limits shared through `store`.
    pub fn new(store: std::sync::Arc<PgStore>) -> PgExchange {
        PgExchange {
            store,
            secret: Default::default(),
            held: Default::default(),
            made: Default::default(),
        }
    }

    /// The keyed hash naming `key`'s limits.
    async fn digest(&self, key: &(String, String)) -> Result<String, PgError> {
        let secret = self.secret.get_or_try_init(|| self.store.secret()).await?;
        Ok(keyed_digest(secret, &key.0, &key.1))
    }

    /// The buckets' names for `costs`, each made (full) if it is new.
    async fn buckets(
        &self,
        key: &(String, String),
        costs: &[(&'static str, f64, f64)],
    ) -> Result<Vec<String>, PgError> {
        let digest = self.digest(key).await?;
        let names: Vec<String> = costs
            .iter()
            .map(|(limit, _, _)| format!("{digest}:{limit}"))
            .collect();
        let new: Vec<(String, f64)> = {
            let made = self.made.locked();
            names
                .iter()
                .zip(costs)
                .filter(|(n, _)| !made.contains(*n))
                .map(|(n, (_, capacity, _))| (n.clone(), *capacity))
                .collect()
        };
        if !new.is_empty() {
            let (keys, levels): (Vec<String>, Vec<f64>) = new.iter().cloned().unzip();
            self.store
                .client
                .execute(
                    "INSERT INTO plait_buckets (key, level)
                     SELECT * FROM unnest($1::text[], $2::float8[])
                     ON CONFLICT (key) DO NOTHING",
                    &[&keys, &levels],
                )
                .await?;
            self.made.locked().extend(keys);
        }
        Ok(names)
    }

    async fn take_all(
        &self,
        key: &(String, String),
        costs: Vec<(&'static str, f64, f64)>,
    ) -> Result<Option<Duration>, PgError> {
        let names = self.buckets(key, &costs).await?;
        let capacities: Vec<f64> = costs.iter().map(|c| c.1).collect();
        let rates: Vec<f64> = costs.iter().map(|c| c.1 / 60.0).collect();
        let amounts: Vec<f64> = costs.iter().map(|c| c.2.min(c.1)).collect();
        let rows = self
            .store
            .client
            .query(
                "WITH want AS (
                    SELECT * FROM unnest($1::text[], $2::float8[], $3::float8[], $4::float8[])
                        AS w(key, capacity, rate, cost)
                 ), cur AS (
                    SELECT b.key, w.cost, w.rate,
                           least(w.capacity, b.level
                                 + extract(epoch FROM clock_timestamp() - b.at)::float8 * w.rate)
                           AS level
                      FROM plait_buckets b JOIN want w ON w.key = b.key
                     ORDER BY b.key
                       FOR UPDATE OF b
                 ), ok AS (SELECT bool_and(level >= cost) AS all_ok FROM cur)
                 UPDATE plait_buckets b
                    SET level = CASE WHEN ok.all_ok THEN cur.level - cur.cost ELSE cur.level END,
                        at = clock_timestamp()
                   FROM cur, ok
                  WHERE b.key = cur.key
              RETURNING ok.all_ok,
                        CASE WHEN cur.level >= cur.cost OR cur.rate <= 0 THEN 0::float8
                             ELSE (cur.cost - cur.level) / cur.rate END",
                &[&names, &capacities, &rates, &amounts],
            )
            .await?;
        if rows.first().is_none_or(|r| r.get::<_, bool>(0)) {
            return Ok(None);
        }
        let wait = rows.iter().map(|r| r.get::<_, f64>(1)).fold(0.0, f64::max);
        Ok(Some(Duration::from_secs_f64(wait.max(0.001))))
    }

    async fn give_all(
        &self,
        key: &(String, String),
        amounts: Vec<(&'static str, f64, f64)>,
    ) -> Result<(), PgError> {
        let names = self.buckets(key, &amounts).await?;
        let capacities: Vec<f64> = amounts.iter().map(|c| c.1).collect();
        let rates: Vec<f64> = amounts.iter().map(|c| c.1 / 60.0).collect();
        let deltas: Vec<f64> = amounts.iter().map(|c| c.2).collect();
        self.store
            .client
            .execute(
                "WITH w AS (
                    SELECT * FROM unnest($1::text[], $2::float8[], $3::float8[], $4::float8[])
                        AS w(key, capacity, rate, amount)
                 ), locked AS (
                    SELECT b.key FROM plait_buckets b JOIN w ON w.key = b.key
                     ORDER BY b.key FOR UPDATE OF b
                 )
                 UPDATE plait_buckets b
                    SET level = least(w.capacity, b.level
                                + extract(epoch FROM clock_timestamp() - b.at)::float8 * w.rate
                                + w.amount),
                        at = clock_timestamp()
                   FROM w, locked
                  WHERE b.key = w.key AND locked.key = w.key",
                &[&names, &capacities, &rates, &deltas],
            )
            .await?;
        Ok(())
    }

    /// The advisory lock key of `key`'s slots.
    async fn lock_key(&self, key: &(String, String)) -> Result<i32, PgError> {
        let digest = self.digest(key).await?;
        Ok(i32::from_str_radix(&digest[..8], 16)
            .unwrap_or_else(|_| u32::from_str_radix(&digest[..8], 16).unwrap_or(0) as i32))
    }

    async fn take_slot(
        &self,
        key: &(String, String),
        count: usize,
    ) -> Result<Option<i32>, PgError> {
        let lock = self.lock_key(key).await?;
        let mut held = self.held.lock().await;
        let mine: Vec<i32> = held
            .iter()
            .filter(|(k, _)| *k == lock)
            .map(|(_, s)| *s)
            .collect();
        let row = self
            .store
            .client
            .query_opt(
                // CASE, for the order of an AND is the planner's: trying a slot this
                // session holds would lock it once more, and one unlock would not free it.
                "SELECT s FROM generate_series(0, $2 - 1) s
                  WHERE CASE WHEN s = ANY($3::int4[]) THEN false
                             ELSE pg_try_advisory_lock($1, s) END
                  LIMIT 1",
                &[&lock, &(count as i32), &mine],
            )
            .await?;
        let slot = row.map(|r| r.get::<_, i32>(0));
        if let Some(slot) = slot {
            held.insert((lock, slot));
        }
        Ok(slot)
    }

    async fn free_slot(&self, key: &(String, String), slot: i32) -> Result<(), PgError> {
        let lock = self.lock_key(key).await?;
        let mut held = self.held.lock().await;
        self.store
            .client
            .execute("SELECT pg_advisory_unlock($1, $2)", &[&lock, &slot])
            .await?;
        held.remove(&(lock, slot));
        Ok(())
    }
}

impl plait_llm::limiter::Exchange for PgExchange {
    fn take<'a>(
        &'a self,
        key: &'a (String, String),
        costs: Vec<(&'static str, f64, f64)>,
    ) -> futures_util::future::BoxFuture<'a, Result<Option<Duration>, String>> {
        Box::pin(async move { self.take_all(key, costs).await.map_err(|e| e.to_string()) })
    }

    fn give<'a>(
        &'a self,
        key: &'a (String, String),
        amounts: Vec<(&'static str, f64, f64)>,
    ) -> futures_util::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move { self.give_all(key, amounts).await.map_err(|e| e.to_string()) })
    }

    fn slot<'a>(
        &'a self,
        key: &'a (String, String),
        count: usize,
    ) -> futures_util::future::BoxFuture<'a, Result<Option<i32>, String>> {
        Box::pin(async move { self.take_slot(key, count).await.map_err(|e| e.to_string()) })
    }

    fn free<'a>(
        &'a self,
        key: &'a (String, String),
        slot: i32,
    ) -> futures_util::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(e) = self.free_slot(key, slot).await {
                tracing::warn!("could not let a shared request slot go: {e}");
            }
        })
    }
}
