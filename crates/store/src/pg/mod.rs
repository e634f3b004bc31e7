//! The PostgreSQL store, for runs spread over many machines: a run's record and its tasks
//! in tables every machine reaches, created and migrated by plait itself (the migrations
//! are embedded and versioned), and the task queue workers claim from: a claim takes the
//! next pending tasks (or ones whose lease ran out) with `FOR UPDATE SKIP LOCKED`, under a
//! lease the worker renews, and bumps the task's generation; renewing, finishing and
//! releasing a task all name that generation, so a worker whose lease was taken over
//! cannot record a result twice (the fence). `tokio-postgres` is the client: async like the
//! rest of plait, well kept, and it needs no compile-time database (as `sqlx`'s macros do).
//!
//! Credentials come the way libpq takes them: the URL (or `key=value` string), and for what
//! it leaves out `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, which the
//! command line reads and hands in. They are never written to the run's files, and errors
//! name the server without its password.
//!
//! By concern: `config` reads a store's URL and opens connections, `migrate` brings the
//! schema up to date, `runs` keeps a run's record, `queue` is the task queue and its
//! fence, `listen` hears the queue's changes, `requests` carries what people ask of a
//! running task to its worker, and `exchange` holds the rate limits every machine shares. Everything is reached as `pg::X`.

mod config;
mod exchange;
mod listen;
mod migrate;
mod queue;
mod requests;
mod runs;

use std::time::Duration;

use tokio_postgres::{Client, Config, Statement};

use config::open;
use plait_core::sync::Locked as _;

pub use config::config;
pub use exchange::PgExchange;
pub use listen::PgListener;
pub use migrate::SCHEMA_VERSION;
pub use queue::{Checkpoint, Claim, Queue, TaskRow};
pub use requests::StoredRequest;

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// The store's address cannot be read.
    #[error("store `{url}` is not a PostgreSQL URL or connection string: {reason}")]
    BadUrl {
        /// The address as given, its password hidden.
        url: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// The server could not be reached, or would not let this user in.
    #[error("cannot reach the store at {server}: {source}; check the URL, that the server runs and that it lets this user in")]
    Connect {
        /// The server, as the URL names it.
        server: String,
        /// What the driver said.
        source: tokio_postgres::Error,
    },
    /// A newer plait migrated the store.
    #[error("the store's schema is version {found}, newer than this plait knows ({known}); upgrade plait on this machine")]
    NewerSchema {
        /// The store's schema version.
        found: i32,
        /// The newest this plait knows.
        known: i32,
    },
    /// The server refused or failed a statement.
    #[error("store: {0}")]
    Db(#[from] tokio_postgres::Error),
    /// What the store holds is not what was asked for (a run it does not have).
    #[error("store: {0}")]
    Data(String),
    /// A record the store holds cannot be read as this plait's (`what` names it).
    #[error("{what} in the store: {source}")]
    Decode {
        /// What was read.
        what: String,
        /// Why it cannot be read.
        source: serde_json::Error,
    },
}

impl PgError {
    /// Whether the store was asked wrongly (a bad address, a server it cannot reach, a
    /// schema a newer plait made) rather than failing itself.
    pub fn is_request(&self) -> bool {
        matches!(
            self,
            PgError::BadUrl { .. } | PgError::Connect { .. } | PgError::NewerSchema { .. }
        )
    }
}

/// A connection to the store.
pub struct PgStore {
    client: Client,
    /// The queue's statements prepared on this connection, by their text: they run for
    /// every task, and preparing one again each time costs a round trip and its parsing.
    prepared: std::sync::Mutex<std::collections::HashMap<&'static str, Statement>>,
}

impl PgStore {
    /// Connects (waiting at most `timeout`) and brings the schema up to this plait's
    /// version; a newer schema is refused.
    pub async fn connect(config: &Config, timeout: Duration) -> Result<PgStore, PgError> {
        let (client, connection) = open(config, timeout).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!("store connection ended: {e}");
            }
        });
        let store = PgStore {
            client,
            prepared: Default::default(),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Statement `sql`, prepared on this connection the first time it is asked for.
    async fn prepared(&self, sql: &'static str) -> Result<Statement, PgError> {
        let known = self.prepared.locked().get(sql).cloned();
        if let Some(statement) = known {
            return Ok(statement);
        }
        let statement = self.client.prepare(sql).await?;
        self.prepared.locked().insert(sql, statement.clone());
        Ok(statement)
    }

    /// Ends the transaction `outcome` was made in: committed when it is `Ok`, else rolled
    /// back; the outcome.
    async fn end<T>(&self, outcome: Result<T, PgError>) -> Result<T, PgError> {
        let end = if outcome.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        self.client.batch_execute(end).await?;
        outcome
    }

    /// The connection itself, for the tests' and benchmarks' own queries.
    pub fn client(&self) -> &Client {
        &self.client
    }
}
