//! A run's record in the store: its state, as the coordinator last saved it, and its
//! events.

use serde_json::Value;

use super::{PgError, PgStore};

impl PgStore {
    /// Records a new run of repository `repo`: its state, and each of its tasks, pending,
    /// in order, with its record.
    pub async fn create_run(
        &self,
        run: &str,
        repo: &str,
        state: &Value,
        tasks: &[(String, Value)],
    ) -> Result<(), PgError> {
        self.client.batch_execute("BEGIN").await?;
        let outcome = async {
            self.client
                .execute(
                    "INSERT INTO plait_runs (id, repo, state) VALUES ($1, $2, $3)",
                    &[&run, &repo, state],
                )
                .await?;
            for (position, (id, record)) in tasks.iter().enumerate() {
                self.client
                    .execute(
                        "INSERT INTO plait_tasks (run_id, id, position, state, record)
                         VALUES ($1, $2, $3, 'pending', $4)",
                        &[&run, id, &(position as i32), record],
                    )
                    .await?;
            }
            Ok::<_, PgError>(())
        }
        .await;
        self.end(outcome).await
    }

    /// The run's state, as last saved.
    pub async fn run_state(&self, run: &str) -> Result<Option<Value>, PgError> {
        let row = self
            .client
            .query_opt("SELECT state FROM plait_runs WHERE id = $1", &[&run])
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Saves the run's state.
    pub async fn save_run(&self, run: &str, state: &Value) -> Result<(), PgError> {
        let n = self
            .client
            .execute(
                "UPDATE plait_runs SET state = $2, updated_at = now() WHERE id = $1",
                &[&run, state],
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
