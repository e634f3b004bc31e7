//! What people ask of one task of a spread run while it goes (`plait tell`, `plait stop`,
//! the page), carried from the coordinator to the worker that holds the task: a row per
//! request, in the order they were made, `NOTIFY` on [`REQUESTS_CHANNEL`] when one is made
//! or answered, and the worker's answer written into the row once (the first answer
//! stands). A request for a task no worker holds yet waits for the worker that takes it.

use serde_json::Value;

use super::{PgError, PgStore};

/// The channel `NOTIFY` speaks on when a request of a run is made or answered; the payload
/// is the run id.
pub(crate) const REQUESTS_CHANNEL: &str = "plait_requests";

/// A request not answered yet.
#[derive(Debug, Clone)]
pub struct StoredRequest {
    /// Its number: requests are taken in this order.
    pub id: i64,
    /// The task it is for (the task itself, for a request of one of its attempts).
    pub task: String,
    /// The request, as the coordinator wrote it.
    pub body: Value,
}

impl PgStore {
    /// Stores a request for task `task` of `run` and tells the listeners; its number.
    pub async fn ask(&self, run: &str, task: &str, body: &Value) -> Result<i64, PgError> {
        let row = self
            .client
            .query_one(
                "INSERT INTO plait_requests (run_id, task_id, body) VALUES ($1, $2, $3)
                 RETURNING id",
                &[&run, &task, body],
            )
            .await?;
        self.client
            .execute("SELECT pg_notify($1, $2)", &[&REQUESTS_CHANNEL, &run])
            .await?;
        Ok(row.get(0))
    }

    /// The requests of `run` for any of `tasks` not answered yet, oldest first.
    pub async fn asked(&self, run: &str, tasks: &[String]) -> Result<Vec<StoredRequest>, PgError> {
        if tasks.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .client
            .query(
                "SELECT id, task_id, body FROM plait_requests
                  WHERE run_id = $1 AND task_id = ANY($2) AND answer IS NULL
                  ORDER BY id",
                &[&run, &tasks],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| StoredRequest {
                id: r.get(0),
                task: r.get(1),
                body: r.get(2),
            })
            .collect())
    }

    /// Answers request `id` of `run` and tells the listeners; false when it had been
    /// answered already (that answer stands).
    pub async fn answer(&self, run: &str, id: i64, answer: &Value) -> Result<bool, PgError> {
        let n = self
            .client
            .execute(
                "UPDATE plait_requests SET answer = $2, answered_at = now()
                  WHERE id = $1 AND answer IS NULL",
                &[&id, answer],
            )
            .await?;
        if n > 0 {
            self.client
                .execute("SELECT pg_notify($1, $2)", &[&REQUESTS_CHANNEL, &run])
                .await?;
        }
        Ok(n > 0)
    }

    /// The answer to request `id`, once it has one.
    pub async fn answer_of(&self, id: i64) -> Result<Option<Value>, PgError> {
        let row = self
            .client
            .query_opt("SELECT answer FROM plait_requests WHERE id = $1", &[&id])
            .await?;
        Ok(row.and_then(|r| r.get(0)))
    }
}
