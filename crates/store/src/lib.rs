//! plait's store for runs spread over many machines: [`pg`] (the PostgreSQL record, task
//! queue, change feed and shared rate limits) and [`remote`] (the git remote the base and
//! the tasks' work go through).
//!
//! Start from [`pg::PgStore`] (a connection: the run's record, the queue workers claim tasks
//! from with fenced leases, `LISTEN/NOTIFY`) and [`remote`]'s refs. A crate of its own
//! because only runs over many machines need it, and because a database and a remote can
//! go away: every failure here is a [`pg::PgError`] or a [`remote::RemoteError`] that the
//! layers above can wait out.
//!
//! ```
//! use plait_store::pg::config;
//!
//! // A store's address, completed from libpq's variables as `psql` would.
//! let env = |name: &str| match name {
//!     "PGPORT" => Some("5433".to_string()),
//!     "PGUSER" => Some("plait".to_string()),
//!     _ => None,
//! };
//! let store = config("postgres://db.internal/runs", &env)?;
//! assert_eq!(store.get_ports(), [5433]);
//! assert_eq!(store.get_user(), Some("plait"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

pub mod pg;
pub mod remote;
