//! The task queue: claims of the next tasks under a lease, renewed by the worker and
//! fenced by the task's generation, each claim's end recorded once; tasks sent back for
//! another round; the checkpoints a worker taking a task over goes on from; and the
//! tasks that changed, for the coordinator.

use std::fmt;
use std::time::Duration;

use git2::Oid;
use tokio_postgres::types::Json;
use tokio_postgres::Row;

use super::{PgError, PgStore};
use plait_core::state::TaskRecord;

/// A task a worker claimed: its id, its record, and the generation its lease fences.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The run.
    pub run: String,
    /// The task's id.
    pub task: String,
    /// The claim's generation: a later claim of the task fences this one out.
    pub generation: i64,
    /// The task's record as the store holds it; `None` when it cannot be read as one
    /// (another version of plait wrote it).
    pub record: Option<TaskRecord>,
    /// The last work pushed for the task by an earlier claim, to go on from.
    pub checkpoint: Option<Checkpoint>,
    /// For a task sent back after it ended: what its next round is told (it goes on from
    /// its branch's tip, the checkpoint).
    pub feedback: Option<String>,
}

/// What workers need to take a run's tasks: its plan, base commit and git remote.
#[derive(Debug, Clone, PartialEq)]
pub struct Queue {
    /// The plan's text, as the coordinator ran it (the config files merged in).
    pub plan: String,
    /// Where the coordinator read the plan, for messages.
    pub plan_path: String,
    /// The base commit.
    pub base: String,
    /// The git remote the base and the tasks' work go through.
    pub remote: String,
}

/// A task as the store holds it.
#[derive(Debug, Clone)]
pub struct TaskRow {
    /// The task's id.
    pub id: String,
    /// Its state's name ([`TaskState::as_str`](plait_core::state::TaskState::as_str)).
    pub state: String,
    /// Its record as its last claim left it; `None` when it cannot be read as one
    /// (another version of plait wrote it).
    pub record: Option<TaskRecord>,
    /// The generation of its latest claim.
    pub generation: i64,
    /// The winning generation's branch tip, once the task has ended with one.
    pub tip: Option<String>,
}

/// Work a claim pushed for its task, for a worker that takes the task over to go on from:
/// the generation of the claim that pushed it (which names the ref it is on,
/// [`plait_core::refs::attempt_ref`]) and the commit. The store keeps it as the text
/// `"{generation} {commit}"`, written by [`Display`](fmt::Display) and read by
/// [`Checkpoint::parse`] (and, for a task sent back, built from its tip by
/// [`PgStore::send_back`]'s statement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// The generation of the claim that pushed it.
    pub generation: i64,
    /// The commit pushed.
    pub commit: Oid,
}

impl Checkpoint {
    /// Reads a checkpoint as the store keeps it; `None` when `text` is not one.
    pub fn parse(text: &str) -> Option<Checkpoint> {
        let (generation, commit) = text.split_once(' ')?;
        Some(Checkpoint {
            generation: generation.parse().ok()?,
            commit: Oid::from_str(commit).ok()?,
        })
    }
}

impl fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.generation, self.commit)
    }
}

/// A task record read from the store, as a [`TaskRow`] or [`Claim`] holds it.
fn task_record(value: serde_json::Value) -> Option<TaskRecord> {
    serde_json::from_value(value).ok()
}

/// A [`TaskRow`] from the columns `id, state, record, generation, tip`.
fn task_row(r: &Row) -> TaskRow {
    TaskRow {
        id: r.get(0),
        state: r.get(1),
        record: task_record(r.get(2)),
        generation: r.get(3),
        tip: r.get(4),
    }
}

impl PgStore {
    /// Claims the next task of `run` for `owner`: a pending one, or one whose lease ran out
    /// (its worker is gone), in plan order; `None` when there is none. The lease lasts
    /// `lease`, and the task's generation goes up by one.
    pub async fn claim(
        &self,
        run: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<Option<Claim>, PgError> {
        self.claim_next(Some(run), owner, lease).await
    }

    /// Claims the next task for `owner` of run `only`, or of any queued run (oldest run
    /// first, then plan order), as [`claim`](Self::claim) does.
    pub async fn claim_next(
        &self,
        only: Option<&str>,
        owner: &str,
        lease: Duration,
    ) -> Result<Option<Claim>, PgError> {
        Ok(self.claim_many(only, owner, lease, 1).await?.pop())
    }

    /// Claims up to `n` tasks for `owner` in one round trip, as [`claim_next`] claims one:
    /// of run `only` or of the oldest queued run that has a task to take, in plan order.
    /// Fewer (or none) when fewer are there to take.
    ///
    /// [`claim_next`]: Self::claim_next
    pub async fn claim_many(
        &self,
        only: Option<&str>,
        owner: &str,
        lease: Duration,
        n: usize,
    ) -> Result<Vec<Claim>, PgError> {
        // The run named, or the oldest open one with a task to take; then its next tasks
        // in plan order, each kind read in the order of its index: the first pending ones
        // and the first whose lease ran out (usually none), the earliest of both taken.
        // No notification: NOTIFY serializes the commits that send one, and a claim needs
        // no one woken.
        let claim = self
            .prepared(
                "WITH run AS (
                    SELECT coalesce($1::text, (
                        SELECT r.id FROM plait_runs r
                         WHERE r.open
                           AND ((SELECT c.position FROM plait_tasks c
                                  WHERE c.run_id = r.id AND c.state = 'pending'
                                  ORDER BY c.position LIMIT 1) IS NOT NULL
                                OR (SELECT c.lease_until FROM plait_tasks c
                                     WHERE c.run_id = r.id AND c.state = 'running'
                                       AND c.lease_until < now()
                                     ORDER BY c.lease_until LIMIT 1) IS NOT NULL)
                         ORDER BY r.created_at, r.id
                         LIMIT 1)) AS id
                 ), pending AS (
                    SELECT t.run_id, t.id, t.position FROM plait_tasks t
                     WHERE t.run_id = (SELECT id FROM run) AND t.state = 'pending'
                     ORDER BY t.position
                     LIMIT $4
                     FOR UPDATE SKIP LOCKED
                 ), expired AS (
                    SELECT t.run_id, t.id, t.position FROM plait_tasks t
                     WHERE t.run_id = (SELECT id FROM run) AND t.state = 'running'
                       AND t.lease_until < now()
                     ORDER BY t.position
                     LIMIT $4
                     FOR UPDATE SKIP LOCKED
                 ), next AS (
                    SELECT * FROM pending UNION ALL SELECT * FROM expired
                     ORDER BY position
                     LIMIT $4
                 ), taken AS (
                    UPDATE plait_tasks t
                       SET state = 'running', owner = $2,
                           lease_until = now() + make_interval(secs => $3),
                           generation = t.generation + 1,
                           changed = nextval('plait_task_changes')
                      FROM next
                     WHERE t.run_id = next.run_id AND t.id = next.id
                 RETURNING t.run_id, t.id, t.generation, t.record, t.checkpoint, t.feedback,
                           t.position
                 )
                 SELECT run_id, id, generation, record, checkpoint, feedback FROM taken
                  ORDER BY position",
            )
            .await?;
        let rows = self
            .client
            .query(&claim, &[&only, &owner, &lease.as_secs_f64(), &(n as i64)])
            .await?;
        Ok(rows
            .iter()
            .map(|row| Claim {
                run: row.get(0),
                task: row.get(1),
                generation: row.get(2),
                record: task_record(row.get(3)),
                checkpoint: row
                    .get::<_, Option<String>>(4)
                    .as_deref()
                    .and_then(Checkpoint::parse),
                feedback: row.get(5),
            })
            .collect())
    }

    /// Extends a claim's lease; false when the claim was lost (its lease ran out and
    /// another worker took the task).
    pub async fn renew(&self, run: &str, claim: &Claim, lease: Duration) -> Result<bool, PgError> {
        let renew = self
            .prepared(
                "UPDATE plait_tasks SET lease_until = now() + make_interval(secs => $4)
                  WHERE run_id = $1 AND id = $2 AND generation = $3 AND state = 'running'",
            )
            .await?;
        let n = self
            .client
            .execute(
                &renew,
                &[&run, &claim.task, &claim.generation, &lease.as_secs_f64()],
            )
            .await?;
        Ok(n == 1)
    }

    /// Records a claimed task's outcome (its record, and the state it names) and tells the
    /// listeners; false, and nothing written, when the claim was lost: a result is recorded
    /// once.
    pub async fn finish(
        &self,
        run: &str,
        claim: &Claim,
        record: &TaskRecord,
    ) -> Result<bool, PgError> {
        self.finish_at(run, claim, record, None).await
    }

    /// [`finish`](Self::finish), recording the branch tip the claim pushed (`tip`): the
    /// state and the branch agree, for only the claim that holds the lease records either.
    pub async fn finish_at(
        &self,
        run: &str,
        claim: &Claim,
        record: &TaskRecord,
        tip: Option<&str>,
    ) -> Result<bool, PgError> {
        // The listeners are told in the same statement, when the claim held.
        let finish = self
            .prepared(
                "WITH done AS (
                    UPDATE plait_tasks
                       SET state = $4, record = $5, tip = $6, owner = NULL, lease_until = NULL,
                           feedback = NULL, changed = nextval('plait_task_changes')
                     WHERE run_id = $1 AND id = $2 AND generation = $3 AND state = 'running'
                 RETURNING run_id
                 )
                 SELECT 1 FROM done, LATERAL (SELECT pg_notify('plait_tasks', done.run_id)) told",
            )
            .await?;
        let rows = self
            .client
            .query(
                &finish,
                &[
                    &run,
                    &claim.task,
                    &claim.generation,
                    &record.state.as_str(),
                    &Json(record),
                    &tip,
                ],
            )
            .await?;
        Ok(rows.len() == 1)
    }

    /// Gives a claimed task back to the queue (the worker stops at a boundary); false when
    /// the claim was already lost.
    pub async fn release(&self, run: &str, claim: &Claim) -> Result<bool, PgError> {
        let release = self
            .prepared(
                "UPDATE plait_tasks SET state = 'pending', owner = NULL, lease_until = NULL,
                        changed = nextval('plait_task_changes')
                  WHERE run_id = $1 AND id = $2 AND generation = $3 AND state = 'running'",
            )
            .await?;
        let n = self
            .client
            .execute(&release, &[&run, &claim.task, &claim.generation])
            .await?;
        if n == 1 {
            self.notify(run).await?;
        }
        Ok(n == 1)
    }

    /// Sends ended tasks of `run` back to the queue for another round, each `(task,
    /// feedback)` with what it is told: a claim of it goes on from the tip its last claim
    /// recorded (as from a checkpoint). The run is opened to workers again, and they are
    /// told. The tasks sent back; not one that has not ended, or ended with no work.
    pub async fn send_back(
        &self,
        run: &str,
        tasks: &[(String, String)],
    ) -> Result<Vec<String>, PgError> {
        let (ids, feedback): (Vec<&str>, Vec<&str>) = tasks
            .iter()
            .map(|(id, text)| (id.as_str(), text.as_str()))
            .unzip();
        // A task's checkpoint is made of its last claim's generation and tip here, as
        // `Checkpoint`'s text.
        let rows = self
            .client
            .query(
                "WITH back AS (
                    UPDATE plait_tasks t
                       SET state = 'pending', feedback = b.feedback,
                           checkpoint = t.generation || ' ' || t.tip,
                           owner = NULL, lease_until = NULL,
                           changed = nextval('plait_task_changes')
                      FROM unnest($2::text[], $3::text[]) AS b(id, feedback)
                     WHERE t.run_id = $1 AND t.id = b.id AND t.tip IS NOT NULL
                       AND t.state NOT IN ('pending', 'running')
                 RETURNING t.id
                 ), reopened AS (
                    UPDATE plait_runs SET open = true
                     WHERE id = $1 AND EXISTS (SELECT 1 FROM back)
                 )
                 SELECT back.id FROM back, LATERAL (SELECT pg_notify('plait_tasks', $1)) told",
                &[&run, &ids, &feedback],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Releases waiting task `task` of `run` (one that comes after others, its inputs
    /// ended): `pending` for the workers with `record` (its start in it), and when
    /// `resume` is given, the work to go on from at the task's own generation and what it
    /// is told; or `state` for one that is not to run (`blocked`, `failed`). Workers are
    /// told. False when the task was not waiting.
    pub async fn release_waiting(
        &self,
        run: &str,
        record: &TaskRecord,
        state: &str,
        resume: Option<(Oid, String)>,
    ) -> Result<bool, PgError> {
        let (commit, feedback) = match resume {
            Some((commit, feedback)) => (Some(commit.to_string()), Some(feedback)),
            None => (None, None),
        };
        let n = self
            .client
            .execute(
                "UPDATE plait_tasks
                    SET state = $3, record = $4, feedback = $6,
                        checkpoint = CASE WHEN $5::text IS NULL THEN NULL
                                          ELSE generation || ' ' || $5::text END,
                        changed = nextval('plait_task_changes')
                  WHERE run_id = $1 AND id = $2 AND state = 'waiting'",
                &[&run, &record.id, &state, &Json(record), &commit, &feedback],
            )
            .await?;
        if n == 1 {
            self.notify(run).await?;
        }
        Ok(n == 1)
    }

    /// Puts ended tasks `tasks` of `run` back to waiting (their starts went stale), for the
    /// coordinator to release again, and opens the run to workers again.
    pub async fn rewait(&self, run: &str, tasks: &[String]) -> Result<(), PgError> {
        self.client
            .execute(
                "UPDATE plait_tasks
                    SET state = 'waiting', owner = NULL, lease_until = NULL, feedback = NULL,
                        checkpoint = NULL, changed = nextval('plait_task_changes')
                  WHERE run_id = $1 AND id = ANY($2) AND state NOT IN ('pending', 'running')",
                &[&run, &tasks],
            )
            .await?;
        self.client
            .execute("UPDATE plait_runs SET open = true WHERE id = $1", &[&run])
            .await?;
        Ok(())
    }

    /// The generation of task `task` of `run`: its last claim's (0 before any).
    pub async fn generation(&self, run: &str, task: &str) -> Result<i64, PgError> {
        let row = self
            .client
            .query_one(
                "SELECT generation FROM plait_tasks WHERE run_id = $1 AND id = $2",
                &[&run, &task],
            )
            .await?;
        Ok(row.get(0))
    }

    /// Records work a claim pushed (`commit`) as its generation's [`Checkpoint`], for a
    /// worker that takes the task over; false when the claim was lost.
    pub async fn checkpoint(&self, claim: &Claim, commit: Oid) -> Result<bool, PgError> {
        let at = Checkpoint {
            generation: claim.generation,
            commit,
        }
        .to_string();
        let checkpoint = self
            .prepared(
                "UPDATE plait_tasks SET checkpoint = $4
                  WHERE run_id = $1 AND id = $2 AND generation = $3 AND state = 'running'",
            )
            .await?;
        let n = self
            .client
            .execute(
                &checkpoint,
                &[&claim.run, &claim.task, &claim.generation, &at],
            )
            .await?;
        Ok(n == 1)
    }

    /// Opens run `run` to workers: they take its tasks with `queue`'s plan, base and remote.
    pub async fn open_queue(&self, run: &str, queue: &Queue) -> Result<(), PgError> {
        let n = self
            .client
            .execute(
                "UPDATE plait_runs SET plan = $2, plan_path = $3, base = $4, remote = $5,
                        open = true
                  WHERE id = $1",
                &[
                    &run,
                    &queue.plan,
                    &queue.plan_path,
                    &queue.base,
                    &queue.remote,
                ],
            )
            .await?;
        if n == 0 {
            return Err(PgError::Data(format!("the store has no run `{run}`")));
        }
        self.notify(run).await
    }

    /// Closes run `run` to workers (it has ended, or was thrown away).
    pub async fn close_queue(&self, run: &str) -> Result<(), PgError> {
        self.client
            .execute("UPDATE plait_runs SET open = false WHERE id = $1", &[&run])
            .await?;
        Ok(())
    }

    /// What workers need to take the tasks of run `run`; `None` when it is not queued.
    pub async fn queue(&self, run: &str) -> Result<Option<Queue>, PgError> {
        let row = self
            .client
            .query_opt(
                "SELECT plan, plan_path, base, remote FROM plait_runs
                  WHERE id = $1 AND plan IS NOT NULL",
                &[&run],
            )
            .await?;
        Ok(row.map(|r| Queue {
            plan: r.get(0),
            plan_path: r.get(1),
            base: r.get(2),
            remote: r.get(3),
        }))
    }

    /// The tasks of `run` that changed after change number `after`, each with its place in
    /// the plan, in the order they changed; and the newest change number.
    pub async fn changed_tasks(
        &self,
        run: &str,
        after: i64,
    ) -> Result<(Vec<(usize, TaskRow)>, i64), PgError> {
        let changed = self
            .prepared(
                "SELECT id, state, record, generation, tip, position, changed FROM plait_tasks
                  WHERE run_id = $1 AND changed > $2 ORDER BY changed",
            )
            .await?;
        let rows = self.client.query(&changed, &[&run, &after]).await?;
        let newest = rows
            .iter()
            .map(|r| r.get::<_, i64>(6))
            .fold(after, i64::max);
        let rows = rows
            .iter()
            .map(|r| (r.get::<_, i32>(5) as usize, task_row(r)))
            .collect();
        Ok((rows, newest))
    }

    /// Each task of `run`, in plan order, with its generation and winning tip.
    pub async fn task_rows(&self, run: &str) -> Result<Vec<TaskRow>, PgError> {
        let rows = self
            .client
            .query(
                "SELECT id, state, record, generation, tip FROM plait_tasks
                  WHERE run_id = $1 ORDER BY position",
                &[&run],
            )
            .await?;
        Ok(rows.iter().map(task_row).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_reads_back_as_it_was_written() {
        let commit = Oid::from_str(&"ab".repeat(20)).unwrap();
        let checkpoint = Checkpoint {
            generation: 3,
            commit,
        };
        let text = checkpoint.to_string();
        assert_eq!(text, format!("3 {}", "ab".repeat(20)));
        assert_eq!(Checkpoint::parse(&text), Some(checkpoint));
        for bad in ["", "3", "x abab", &format!("3{}", "ab".repeat(20)), "3 zz"] {
            assert_eq!(Checkpoint::parse(bad), None, "{bad:?}");
        }
    }
}
