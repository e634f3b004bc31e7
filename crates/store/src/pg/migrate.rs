//! The store's schema: plait's migrations, embedded and versioned, each run once, in
//! order, by whichever machine connects first.

use super::{PgError, PgStore};

/// Each migration, in order; the schema's version is how many have run.
const MIGRATIONS: &[&str] = &[
    // 1: runs, their tasks (the queue) and their events.
    "CREATE TABLE plait_runs (
        id text PRIMARY KEY,
        repo text NOT NULL,
        state jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE plait_tasks (
        run_id text NOT NULL REFERENCES plait_runs (id) ON DELETE CASCADE,
        id text NOT NULL,
        position integer NOT NULL,
        state text NOT NULL,
        record jsonb NOT NULL,
        owner text,
        lease_until timestamptz,
        generation bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, id)
    );
    CREATE INDEX plait_tasks_queue ON plait_tasks (run_id, state, position);
    CREATE TABLE plait_events (
        id bigserial PRIMARY KEY,
        run_id text NOT NULL REFERENCES plait_runs (id) ON DELETE CASCADE,
        task_id text,
        body jsonb NOT NULL,
        at timestamptz NOT NULL DEFAULT now()
    );",
    // 2: rate-limit buckets shared by every machine, by a keyed hash of provider and key.
    "CREATE TABLE plait_secret (secret text NOT NULL);
    INSERT INTO plait_secret (secret) VALUES (gen_random_uuid()::text);
    CREATE TABLE plait_buckets (
        key text PRIMARY KEY,
        level double precision NOT NULL,
        at timestamptz NOT NULL DEFAULT clock_timestamp()
    );",
    // 3: runs whose tasks workers take (with their plan, base and git remote), and each
    // task's work as pushed: the last checkpoint and the winning generation's tip.
    "ALTER TABLE plait_runs
        ADD COLUMN plan text,
        ADD COLUMN plan_path text,
        ADD COLUMN base text,
        ADD COLUMN remote text,
        ADD COLUMN open boolean NOT NULL DEFAULT false;
    ALTER TABLE plait_tasks
        ADD COLUMN checkpoint text,
        ADD COLUMN tip text;
    CREATE INDEX plait_tasks_open ON plait_tasks (state) WHERE state IN ('pending', 'running');",
    // 4: each change of a task numbered, so a coordinator reads only what changed.
    "CREATE SEQUENCE plait_task_changes;
    ALTER TABLE plait_tasks ADD COLUMN changed bigint NOT NULL DEFAULT 0;
    CREATE INDEX plait_tasks_changed ON plait_tasks (run_id, changed);",
    // 5: a claim reads the queue in index order: the pending tasks of a run by their place
    // in the plan, and its running ones by lease, to find those run out. The indexes no
    // query reads go (each was one more write per claim and finish).
    "DROP INDEX plait_tasks_queue;
    DROP INDEX plait_tasks_open;
    CREATE INDEX plait_tasks_pending ON plait_tasks (run_id, position) WHERE state = 'pending';
    CREATE INDEX plait_tasks_leased ON plait_tasks (run_id, lease_until) WHERE state = 'running';",
    // 6: a task sent back for another round (a supervisor asked for changes, or it broke
    // the merged checks) carries what it is told until a claim of it ends.
    "ALTER TABLE plait_tasks ADD COLUMN feedback text;",
    // 7: what people ask of a running task (tell it, stop it), for the worker holding it.
    "CREATE TABLE plait_requests (
        id bigserial PRIMARY KEY,
        run_id text NOT NULL REFERENCES plait_runs (id) ON DELETE CASCADE,
        task_id text NOT NULL,
        body jsonb NOT NULL,
        made_at timestamptz NOT NULL DEFAULT now(),
        answer jsonb,
        answered_at timestamptz
    );
    CREATE INDEX plait_requests_open ON plait_requests (run_id, task_id, id)
        WHERE answer IS NULL;",
];

/// The schema version this plait writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

impl PgStore {
    /// Runs the migrations this database has not had, one transaction, under a lock so
    /// that two machines starting at once do not both run them.
    pub(super) async fn migrate(&self) -> Result<(), PgError> {
        self.client
            .batch_execute(
                "BEGIN;
                 SELECT pg_advisory_xact_lock(7140281);
                 CREATE TABLE IF NOT EXISTS plait_schema (
                    version integer PRIMARY KEY,
                    applied_at timestamptz NOT NULL DEFAULT now()
                 );",
            )
            .await?;
        let outcome = self.migrate_locked().await;
        self.end(outcome).await
    }

    /// [`migrate`](Self::migrate)'s work, under its lock and in its transaction.
    async fn migrate_locked(&self) -> Result<(), PgError> {
        let row = self
            .client
            .query_one("SELECT coalesce(max(version), 0) FROM plait_schema", &[])
            .await?;
        let found: i32 = row.get(0);
        if found > SCHEMA_VERSION {
            return Err(PgError::NewerSchema {
                found,
                known: SCHEMA_VERSION,
            });
        }
        for (k, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            self.client.batch_execute(sql).await?;
            self.client
                .execute(
                    "INSERT INTO plait_schema (version) VALUES ($1)",
                    &[&(k as i32 + 1)],
                )
                .await?;
        }
        Ok(())
    }

    /// The schema version of the database.
    pub async fn schema_version(&self) -> Result<i32, PgError> {
        let row = self
            .client
            .query_one("SELECT coalesce(max(version), 0) FROM plait_schema", &[])
            .await?;
        Ok(row.get(0))
    }
}
