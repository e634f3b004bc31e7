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

use std::str::FromStr;
use std::time::Duration;

use serde_json::Value;
use tokio_postgres::{Client, Config, NoTls, Statement};

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("store `{url}` is not a PostgreSQL URL or connection string: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("cannot reach the store at {server}: {source}; check the URL, that the server runs and that it lets this user in")]
    Connect {
        server: String,
        source: tokio_postgres::Error,
    },
    #[error("the store's schema is version {found}, newer than this plait knows ({known}); upgrade plait on this machine")]
    NewerSchema { found: i32, known: i32 },
    #[error("store: {0}")]
    Db(#[from] tokio_postgres::Error),
    #[error("store: {0}")]
    Data(String),
}

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
];

/// The schema version this plait writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// The channel `NOTIFY` speaks on when a task of a run changes; the payload is the run id.
pub const TASKS_CHANNEL: &str = "plait_tasks";

/// Parses a store URL, filling what it leaves out from libpq's variables (`env` looks them
/// up).
pub fn config(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, PgError> {
    let mut config = Config::from_str(url).map_err(|e| PgError::BadUrl {
        url: redact(url),
        reason: e.to_string(),
    })?;
    if config.get_hosts().is_empty() {
        config.host(env("PGHOST").as_deref().unwrap_or("localhost"));
    }
    if config.get_ports().is_empty() {
        if let Some(port) = env("PGPORT").and_then(|p| p.parse().ok()) {
            config.port(port);
        }
    }
    if config.get_user().is_none() {
        if let Some(user) = env("PGUSER").or_else(|| env("USER")) {
            config.user(user);
        }
    }
    if config.get_password().is_none() {
        if let Some(password) = env("PGPASSWORD") {
            config.password(password);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(db) = env("PGDATABASE") {
            config.dbname(db);
        }
    }
    Ok(config)
}

/// A URL with its password, if any, replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url
            .split_whitespace()
            .map(|kv| {
                if kv.starts_with("password=") {
                    "password=***"
                } else {
                    kv
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
    };
    match rest.split_once('@') {
        Some((auth, host)) => match auth.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// The server a config names, for messages: hosts, ports, database, user; no password.
fn server(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
    format!(
        "{}{} (database {}, user {})",
        hosts.join(","),
        if ports.is_empty() {
            String::new()
        } else {
            format!(":{}", ports.join(","))
        },
        config.get_dbname().unwrap_or("(default)"),
        config.get_user().unwrap_or("(default)")
    )
}

/// Opens a connection, waiting at most `timeout`; the error names the server.
async fn open(
    config: &Config,
    timeout: Duration,
) -> Result<
    (
        Client,
        tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
    ),
    PgError,
> {
    let mut config = config.clone();
    config.connect_timeout(timeout);
    config
        .connect(NoTls)
        .await
        .map_err(|source| PgError::Connect {
            server: server(&config),
            source,
        })
}

/// A SHA-1 of `provider` and `api_key`, keyed by `secret` (each part length-prefixed).
fn keyed_digest(secret: &str, provider: &str, api_key: &str) -> String {
    use sha1::{Digest, Sha1};
    let mut hash = Sha1::new();
    for part in [secret, provider, api_key] {
        hash.update(part.len().to_be_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A task a worker claimed: its id, its record, and the generation its lease fences.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub run: String,
    pub task: String,
    pub generation: i64,
    pub record: Value,
    /// The last work pushed for the task by an earlier claim (a commit id), to go on from.
    pub checkpoint: Option<String>,
    /// For a task sent back after it ended: what its next round is told (it goes on from
    /// its branch's tip, the checkpoint).
    pub feedback: Option<String>,
}

/// What workers need to take a run's tasks: its plan, base commit and git remote.
#[derive(Debug, Clone, PartialEq)]
pub struct Queue {
    pub plan: String,
    /// Where the coordinator read the plan, for messages.
    pub plan_path: String,
    pub base: String,
    pub remote: String,
}

/// A task as the store holds it.
#[derive(Debug, Clone)]
pub struct TaskRow {
    pub id: String,
    pub state: String,
    pub record: Value,
    pub generation: i64,
    /// The winning generation's branch tip, once the task has ended with one.
    pub tip: Option<String>,
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
        let known = self
            .prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(sql)
            .cloned();
        if let Some(statement) = known {
            return Ok(statement);
        }
        let statement = self.client.prepare(sql).await?;
        self.prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sql, statement.clone());
        Ok(statement)
    }

    /// Runs the migrations this database has not had, one transaction, under a lock so
    /// that two machines starting at once do not both run them.
    async fn migrate(&self) -> Result<(), PgError> {
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
                record: row.get(3),
                checkpoint: row.get(4),
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

    /// Records a claimed task's outcome (`state` and its record) and tells the listeners;
    /// false, and nothing written, when the claim was lost: a result is recorded once.
    pub async fn finish(
        &self,
        run: &str,
        claim: &Claim,
        state: &str,
        record: &Value,
    ) -> Result<bool, PgError> {
        self.finish_at(run, claim, state, record, None).await
    }

    /// [`finish`](Self::finish), recording the branch tip the claim pushed (`tip`): the
    /// state and the branch agree, for only the claim that holds the lease records either.
    pub async fn finish_at(
        &self,
        run: &str,
        claim: &Claim,
        state: &str,
        record: &Value,
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
                &[&run, &claim.task, &claim.generation, &state, record, &tip],
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

    /// Records work a claim pushed (`commit`), for a worker that takes the task over;
    /// false when the claim was lost.
    pub async fn checkpoint(&self, claim: &Claim, commit: &str) -> Result<bool, PgError> {
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
                &[&claim.run, &claim.task, &claim.generation, &commit],
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
            .map(|r| {
                let position: i32 = r.get(5);
                (
                    position as usize,
                    TaskRow {
                        id: r.get(0),
                        state: r.get(1),
                        record: r.get(2),
                        generation: r.get(3),
                        tip: r.get(4),
                    },
                )
            })
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
        Ok(rows
            .iter()
            .map(|r| TaskRow {
                id: r.get(0),
                state: r.get(1),
                record: r.get(2),
                generation: r.get(3),
                tip: r.get(4),
            })
            .collect())
    }

    /// Each task of `run`, in plan order: id, state, record.
    pub async fn tasks(&self, run: &str) -> Result<Vec<(String, String, Value)>, PgError> {
        let rows = self
            .client
            .query(
                "SELECT id, state, record FROM plait_tasks WHERE run_id = $1 ORDER BY position",
                &[&run],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
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

    async fn notify(&self, run: &str) -> Result<(), PgError> {
        self.client
            .execute("SELECT pg_notify($1, $2)", &[&TASKS_CHANNEL, &run])
            .await?;
        Ok(())
    }

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

    /// The connection itself, for the tests' and benchmarks' own queries.
    pub fn client(&self) -> &Client {
        &self.client
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
            let made = self.made.lock().unwrap_or_else(|e| e.into_inner());
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
            self.made
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(keys);
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

impl crate::llm::limiter::Exchange for PgExchange {
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

/// A connection that waits for the store's task changes (`LISTEN`), for a coordinator
/// that must not poll.
pub struct PgListener {
    _client: Client,
    changes: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl PgListener {
    /// Connects and listens on [`TASKS_CHANNEL`].
    pub async fn connect(config: &Config, timeout: Duration) -> Result<PgListener, PgError> {
        let (client, mut connection) = open(config, timeout).await?;
        let (tx, changes) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = futures_util::StreamExt::next(&mut messages).await {
                match message {
                    Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                        if tx.send(n.payload().to_string()).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!("store listener ended: {e}");
                        return;
                    }
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {TASKS_CHANNEL}"))
            .await?;
        Ok(PgListener {
            _client: client,
            changes,
        })
    }

    /// Waits at most `timeout` for a task of any run to change; true when one did (and
    /// every change heard by then is taken).
    pub async fn any(&mut self, timeout: Duration) -> bool {
        match tokio::time::timeout(timeout, self.changes.recv()).await {
            Ok(Some(_)) => {
                while self.changes.try_recv().is_ok() {}
                true
            }
            Ok(None) | Err(_) => false,
        }
    }

    /// Waits at most `timeout` for a task of `run` to change; true when one did (and
    /// every change heard by then is taken).
    pub async fn changed(&mut self, run: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.changes.recv()).await {
                Ok(Some(changed)) if changed == run => {
                    while self.changes.try_recv().is_ok() {}
                    return true;
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("postgres://plait:s3cret@db.example:5432/plait"),
            "postgres://plait:***@db.example:5432/plait"
        );
        assert_eq!(
            redact("host=db user=plait password=s3cret dbname=x"),
            "host=db user=plait password=*** dbname=x"
        );
        let env = |k: &str| (k == "PGPASSWORD").then(|| "s3cret".to_string());
        let c = config("postgres://plait@db.example/plait", &env).unwrap();
        assert_eq!(c.get_password(), Some(&b"s3cret"[..]));
        assert!(!server(&c).contains("s3cret"));
        let err = config("postgres://plait:s3cret@db:notaport/x", &|_| None).unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }
}
