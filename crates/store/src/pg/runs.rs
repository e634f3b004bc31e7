//! A run's record in the store: its state, as the coordinator last saved it, and its
//! events.

use serde_json::Value;
use tokio_postgres::types::Json;

use super::{PgError, PgStore};
use plait_core::state::RunState;

impl PgStore {
    /// Records run `state` of repository `repo`: its state, and each of its tasks, pending
    /// (or waiting, when it comes after others), in order, with its record.
    pub async fn create_run(&self, repo: &str, state: &RunState) -> Result<(), PgError> {
        let run = &state.id;
        self.client.batch_execute("BEGIN").await?;
        let outcome = async {
            self.client
                .execute(
                    "INSERT INTO plait_runs (id, repo, state) VALUES ($1, $2, $3)",
                    &[run, &repo, &Json(state)],
                )
                .await?;
            for (position, record) in state.tasks.iter().enumerate() {
                // A task that comes after others waits until the coordinator releases it
                // with its start (`release_waiting`).
                let queued = if record.after.is_empty() {
                    "pending"
                } else {
                    "waiting"
                };
                self.client
                    .execute(
                        "INSERT INTO plait_tasks (run_id, id, position, state, record)
                         VALUES ($1, $2, $3, $5, $4)",
                        &[run, &record.id, &(position as i32), &Json(record), &queued],
                    )
                    .await?;
            }
            Ok::<_, PgError>(())
        }
        .await;
        self.end(outcome).await
    }

    /// Whether the store has run `run`.
    pub async fn has_run(&self, run: &str) -> Result<bool, PgError> {
        let row = self
            .client
            .query_opt("SELECT 1 FROM plait_runs WHERE id = $1", &[&run])
            .await?;
        Ok(row.is_some())
    }

    /// The run's state, as last saved; `None` when the store has no run `run`.
    pub async fn run_state(&self, run: &str) -> Result<Option<RunState>, PgError> {
        let row = self
            .client
            .query_opt("SELECT state FROM plait_runs WHERE id = $1", &[&run])
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        serde_json::from_value(row.get(0))
            .map(Some)
            .map_err(|source| PgError::Decode {
                what: format!("run {run}"),
                source,
            })
    }

    /// Saves the run's state (it names the run).
    pub async fn save_run(&self, state: &RunState) -> Result<(), PgError> {
        let run = &state.id;
        let n = self
            .client
            .execute(
                "UPDATE plait_runs SET state = $2, updated_at = now() WHERE id = $1",
                &[run, &Json(state)],
            )
            .await?;
        if n == 0 {
            return Err(PgError::Data(format!("the store has no run `{run}`")));
        }
        Ok(())
    }

    /// Appends an event of the run (a task's, with `task`).
    pub async fn event(&self, run: &str, task: Option<&str>, body: &Value) -> Result<(), PgError> {
        self.client
            .execute(
                "INSERT INTO plait_events (run_id, task_id, body) VALUES ($1, $2, $3)",
                &[&run, &task, body],
            )
            .await?;
        Ok(())
    }
}
