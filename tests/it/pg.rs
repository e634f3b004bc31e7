//! The PostgreSQL store against a real server: migrations, clear errors, and the task
//! queue's claims, leases and fence. The server is the one `.ci/run` starts
//! (`PLAIT_TEST_PG_URL`), or one these tests start themselves from the machine's
//! PostgreSQL (as the `postgres` user when run as root); without PostgreSQL they say they
//! are skipped.

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use plait_core::state::{TaskRecord, TaskState};
use plait_store::pg::{self, PgError, PgStore};
use tokio_postgres::Config;

use crate::support::pg::{database, database_url};
use crate::support::runtime;

#[path = "../../benches/common/records.rs"]
mod records;

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn the_store_migrates_itself_once_and_refuses_a_newer_schema() {
    let rt = runtime();
    let Some(config) = database(&rt) else { return };
    rt.block_on(async {
        let store = PgStore::connect(&config, WAIT).await.unwrap();
        assert_eq!(store.schema_version().await.unwrap(), pg::SCHEMA_VERSION);
        // Two machines starting at once: both connect, the schema is made once.
        let (a, b) = tokio::join!(
            PgStore::connect(&config, WAIT),
            PgStore::connect(&config, WAIT)
        );
        assert_eq!(
            a.unwrap().schema_version().await.unwrap(),
            pg::SCHEMA_VERSION
        );
        assert!(b.is_ok());
        let rows = store
            .client()
            .query("SELECT version FROM plait_schema", &[])
            .await
            .unwrap();
        assert_eq!(rows.len(), pg::SCHEMA_VERSION as usize);
        // A database a newer plait wrote.
        store
            .client()
            .execute("INSERT INTO plait_schema (version) VALUES (99)", &[])
            .await
            .unwrap();
        let err = PgStore::connect(&config, WAIT).await.err().unwrap();
        assert!(
            matches!(err, PgError::NewerSchema { found: 99, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("upgrade plait"), "{err}");
    });
}

#[test]
fn a_wrong_store_url_is_a_clear_error_without_the_password() {
    let rt = runtime();
    let err = pg::config("postgres://u:s3cret@host:notaport/db", &|_| None).unwrap_err();
    assert!(err.to_string().contains("is not a PostgreSQL URL"), "{err}");
    assert!(!err.to_string().contains("s3cret"), "{err}");
    // Nothing listens on this port.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = pg::config(&format!("postgres://u:s3cret@127.0.0.1:{port}/db"), &|_| {
        None
    })
    .unwrap();
    let err = rt
        .block_on(PgStore::connect(&config, Duration::from_secs(2)))
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("database db, user u"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

/// A run of `n` tasks `t00`.. in a fresh store.
async fn run_of(config: &Config, n: usize) -> PgStore {
    let store = PgStore::connect(config, WAIT).await.unwrap();
    let state = records::run_state("r1", (0..n).map(|k| format!("t{k:02}")));
    store.create_run("/repo", &state).await.unwrap();
    store
}

/// The record a claim of a task ends with: `state`, and who ended it as its summary.
fn ended(claim: &pg::Claim, state: TaskState, by: &str) -> TaskRecord {
    let mut record = claim.record.clone().expect("the task's record");
    record.state = state;
    record.summary = Some(by.to_string());
    record
}

/// Who ended each task of run `run`, as [`ended`] recorded it, and in which state.
async fn ended_by(store: &PgStore, run: &str) -> Vec<(String, Option<String>)> {
    store
        .task_rows(run)
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.state, row.record.and_then(|r| r.summary)))
        .collect()
}

#[test]
fn workers_racing_for_tasks_each_get_every_task_once() {
    let rt = runtime();
    let Some(config) = database(&rt) else { return };
    rt.block_on(async {
        run_of(&config, 30).await;
        let claimed = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut workers = Vec::new();
        for w in 0..3 {
            let (config, claimed) = (config.clone(), claimed.clone());
            workers.push(tokio::spawn(async move {
                let store = PgStore::connect(&config, WAIT).await.unwrap();
                let owner = format!("worker-{w}");
                while let Some(claim) = store
                    .claim("r1", &owner, Duration::from_secs(30))
                    .await
                    .unwrap()
                {
                    assert_eq!(claim.generation, 1);
                    let done = ended(&claim, TaskState::Done, &owner);
                    assert!(store.finish("r1", &claim, &done).await.unwrap());
                    claimed.lock().unwrap().push(claim.task);
                }
            }));
        }
        for w in workers {
            w.await.unwrap();
        }
        let mut claimed = claimed.lock().unwrap().clone();
        claimed.sort();
        let want: Vec<String> = (0..30).map(|k| format!("t{k:02}")).collect();
        assert_eq!(claimed, want, "every task once");
        let store = PgStore::connect(&config, WAIT).await.unwrap();
        let tasks = ended_by(&store, "r1").await;
        assert!(tasks.iter().all(|(state, _)| state == "done"));
        let by: std::collections::BTreeSet<String> =
            tasks.into_iter().map(|(_, by)| by.unwrap()).collect();
        assert!(by.len() > 1, "the work was shared: {by:?}");
    });
}

#[test]
fn a_lost_lease_is_taken_over_and_the_old_worker_cannot_record_its_result() {
    let rt = runtime();
    let Some(config) = database(&rt) else { return };
    rt.block_on(async {
        let store = run_of(&config, 1).await;
        let other = PgStore::connect(&config, WAIT).await.unwrap();
        let lease = Duration::from_millis(300);
        let first = store.claim("r1", "a", lease).await.unwrap().unwrap();
        // While the lease holds, nobody else gets the task; renewing keeps it.
        assert!(other.claim("r1", "b", lease).await.unwrap().is_none());
        assert!(store.renew("r1", &first, lease).await.unwrap());
        // Worker a goes silent; after its lease, b takes the task over.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let second = other.claim("r1", "b", lease * 10).await.unwrap().unwrap();
        assert_eq!(second.task, first.task);
        assert_eq!(second.generation, first.generation + 1);
        // a comes back: its lease is gone, its result is refused.
        assert!(!store.renew("r1", &first, lease).await.unwrap());
        assert!(!store
            .finish("r1", &first, &ended(&first, TaskState::Done, "a"))
            .await
            .unwrap());
        assert!(!store.release("r1", &first).await.unwrap());
        assert!(other
            .finish("r1", &second, &ended(&second, TaskState::Done, "b"))
            .await
            .unwrap());
        let tasks = ended_by(&store, "r1").await;
        assert_eq!(
            tasks[0],
            ("done".to_string(), Some("b".to_string())),
            "recorded once, by the lease holder"
        );
        // A released task goes back to the queue.
        let store = run_of_named(&config, "r2").await;
        let c = store.claim("r2", "a", lease).await.unwrap().unwrap();
        assert!(store.release("r2", &c).await.unwrap());
        let again = store.claim("r2", "b", lease).await.unwrap().unwrap();
        assert_eq!(again.task, c.task);
    });
}

#[test]
fn a_batch_claim_takes_tasks_in_plan_order_run_out_leases_included_oldest_run_first() {
    let rt = runtime();
    let Some(config) = database(&rt) else { return };
    rt.block_on(async {
        let store = run_of(&config, 6).await;
        let ids = |claims: &[pg::Claim]| -> Vec<String> {
            claims.iter().map(|c| c.task.clone()).collect()
        };
        let short = Duration::from_millis(200);
        let first = store.claim_many(Some("r1"), "a", short, 2).await.unwrap();
        assert_eq!(ids(&first), ["t00", "t01"]);
        let long = Duration::from_secs(30);
        let next = store.claim_many(Some("r1"), "b", long, 2).await.unwrap();
        assert_eq!(ids(&next), ["t02", "t03"]);
        // a's leases run out: its tasks come first again, before the pending ones, in
        // plan order, each a claim of its own generation; fewer than asked when no more.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let again = store.claim_many(Some("r1"), "c", long, 3).await.unwrap();
        assert_eq!(ids(&again), ["t00", "t01", "t04"]);
        assert!(again[..2].iter().all(|c| c.generation == 2));
        assert_eq!(again[2].generation, 1);
        let rest = store.claim_many(Some("r1"), "c", long, 5).await.unwrap();
        assert_eq!(ids(&rest), ["t05"]);
        assert!(store
            .claim_many(Some("r1"), "c", long, 5)
            .await
            .unwrap()
            .is_empty());
        // The fence holds for a batch's claims: a's are lost.
        assert!(!store
            .finish("r1", &first[0], &ended(&first[0], TaskState::Done, "a"))
            .await
            .unwrap());
        assert!(store
            .finish("r1", &again[0], &ended(&again[0], TaskState::Done, "c"))
            .await
            .unwrap());

        // Any run: the oldest open one with a task to take, then the next.
        let queue = |run: &str| pg::Queue {
            plan: String::new(),
            plan_path: format!("{run}.toml"),
            base: "0".repeat(40),
            remote: "remote.git".into(),
        };
        let older = run_of_named(&config, "r2").await;
        older.open_queue("r2", &queue("r2")).await.unwrap();
        let newer = run_of_named(&config, "r3").await;
        newer.open_queue("r3", &queue("r3")).await.unwrap();
        let taken = store.claim_many(None, "d", long, 4).await.unwrap();
        assert_eq!(
            taken
                .iter()
                .map(|c| (c.run.as_str(), c.task.as_str()))
                .collect::<Vec<_>>(),
            [("r2", "t00")],
            "r1 is not open to workers; r2 is older than r3"
        );
        let taken = store.claim_next(None, "d", long).await.unwrap().unwrap();
        assert_eq!((taken.run.as_str(), taken.task.as_str()), ("r3", "t00"));
        assert!(store.claim_next(None, "d", long).await.unwrap().is_none());
    });
}

#[test]
fn an_ended_task_sent_back_is_claimed_again_with_its_feedback_from_its_tip() {
    let rt = runtime();
    let Some(config) = database(&rt) else { return };
    rt.block_on(async {
        let store = run_of(&config, 3).await;
        let lease = Duration::from_secs(30);
        let claims = store.claim_many(Some("r1"), "a", lease, 3).await.unwrap();
        let tip = "1".repeat(40);
        let (t00, t01) = (&claims[0], &claims[1]);
        let done = ended(t00, TaskState::Done, "a");
        assert!(store.finish_at("r1", t00, &done, Some(&tip)).await.unwrap());
        assert!(store
            .finish("r1", t01, &ended(t01, TaskState::Failed, "a"))
            .await
            .unwrap());
        let mut listener = pg::PgListener::connect(&config, WAIT).await.unwrap();
        // Only a task that ended with work goes back: not t01 (no tip), nor t02 (running).
        let back = store
            .send_back(
                "r1",
                &[
                    ("t00".into(), "do better".into()),
                    ("t01".into(), "x".into()),
                    ("t02".into(), "y".into()),
                ],
            )
            .await
            .unwrap();
        assert_eq!(back, ["t00"]);
        assert!(listener.changed("r1", WAIT).await, "workers are told");
        // The run is open to workers again; the claim goes on from the tip, told why.
        let again = store.claim_next(None, "b", lease).await.unwrap().unwrap();
        assert_eq!((again.task.as_str(), again.generation), ("t00", 2));
        assert_eq!(again.feedback.as_deref(), Some("do better"));
        let checkpoint = again.checkpoint.expect("a checkpoint");
        assert_eq!(checkpoint.to_string(), format!("1 {tip}"));
        assert_eq!(
            checkpoint,
            pg::Checkpoint {
                generation: 1,
                commit: git2::Oid::from_str(&tip).unwrap()
            }
        );
        let record = again.record.as_ref().expect("its record");
        assert_eq!(
            (record.state, record.summary.as_deref()),
            (TaskState::Done, Some("a")),
            "as its last claim recorded it"
        );
        // Its end clears the feedback; the claims before it are fenced off.
        assert!(!store.finish("r1", t00, &done).await.unwrap());
        assert!(store
            .finish("r1", &again, &ended(&again, TaskState::Done, "b"))
            .await
            .unwrap());
        let left = store
            .client()
            .query_one(
                "SELECT count(*) FROM plait_tasks WHERE feedback IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .get::<_, i64>(0);
        assert_eq!(left, 0);
    });
}

async fn run_of_named(config: &Config, run: &str) -> PgStore {
    let store = PgStore::connect(config, WAIT).await.unwrap();
    let state = records::run_state(run, ["t00".to_string()]);
    store.create_run("/repo", &state).await.unwrap();
    store
}
#[test]
fn a_run_with_a_store_is_seen_from_another_clone_and_a_wrong_store_creates_nothing() {
    use crate::support::{stderr, stdout, TestRepo};
    let Some(url) = database_url() else { return };
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let plan = repo.plan(
        "[defaults]\nagent = { exec = 'echo 2 >> $PLAIT_TASK.txt' }\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/a.txt\"]\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"/b.txt\"]\n",
    );
    // A store that is not there: a clear error, exit 2, and no run made.
    let out = repo.plait(&[
        "run",
        plan.to_str().unwrap(),
        "--store",
        "postgres://plait:s3cret@127.0.0.1:1/nope",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot reach the store"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("s3cret"));
    assert!(
        !repo.path.join(".git/plait/runs").exists(),
        "no run was made"
    );

    let out = repo.plait(&["run", plan.to_str().unwrap(), "--store", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = stdout(&out).trim().to_string();
    // Another clone, as on another machine: it has no local record of the run.
    let other = repo.scratch.join("other");
    crate::support::git_in(
        &repo.scratch,
        &[
            "clone",
            "-q",
            repo.path.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    let out = crate::support::plait_in(&other, &["status", &id, "--store", &url, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["id"], id);
    assert_eq!(state["phase"], "finished", "{state}");
    assert_eq!(state["merge"]["included"], serde_json::json!(["a", "b"]));
    let out = crate::support::plait_in(&other, &["status", &id, "--store", &url]);
    assert!(
        stdout(&out).contains(&format!("run {id}")),
        "{}",
        stdout(&out)
    );
    let out = crate::support::plait_in(&other, &["status", "nosuch", "--store", &url]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the store has no run `nosuch`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_coordinator_hears_a_task_end_without_polling() {
    let rt = runtime();
    let Some(config) = database(&rt) else { return };
    rt.block_on(async {
        let store = run_of(&config, 2).await;
        let other = run_of_named(&config, "r2").await;
        let mut listener = pg::PgListener::connect(&config, WAIT).await.unwrap();
        // Nothing happens: it waits the whole time and says so.
        assert!(!listener.changed("r1", Duration::from_millis(200)).await);
        // Another run's change does not wake it for r1; r1's does.
        let c2 = other.claim("r2", "w", WAIT).await.unwrap().unwrap();
        let done = ended(&c2, TaskState::Done, "w");
        other.finish("r2", &c2, &done).await.unwrap();
        let claim = store.claim("r1", "w", WAIT).await.unwrap().unwrap();
        let finisher = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let done = ended(&claim, TaskState::Done, "w");
            store.finish("r1", &claim, &done).await.unwrap()
        };
        let start = std::time::Instant::now();
        let (heard, finished) = tokio::join!(listener.changed("r1", WAIT), finisher);
        assert!(finished && heard);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "woken by the notification"
        );
    });
}

#[test]
fn machines_share_one_token_bucket_named_without_the_key() {
    let rt = runtime();
    let Some(config) = database(&rt) else { return };
    rt.block_on(async {
        let store = PgStore::connect(&config, WAIT).await.unwrap();
        let name = store
            .bucket_name("anthropic", "sk-ant-secret", "requests")
            .await
            .unwrap();
        assert!(!name.contains("sk-ant"), "{name}");
        let other_key = store
            .bucket_name("anthropic", "sk-ant-other", "requests")
            .await
            .unwrap();
        assert_ne!(name, other_key);
        // Three machines take one request at a time from a bucket of 30 that refills at
        // 10 a second, for one second: together they get 30 + about 10, not three times.
        let taken = Arc::new(AtomicUsize::new(0));
        let mut machines = Vec::new();
        for _ in 0..3 {
            let (config, name, taken) = (config.clone(), name.clone(), taken.clone());
            machines.push(tokio::spawn(async move {
                let store = PgStore::connect(&config, WAIT).await.unwrap();
                let again = store
                    .bucket_name("anthropic", "sk-ant-secret", "requests")
                    .await
                    .unwrap();
                assert_eq!(again, name, "every machine names the bucket alike");
                let end = std::time::Instant::now() + Duration::from_secs(1);
                while std::time::Instant::now() < end {
                    match store.take(&name, 30.0, 10.0, 1.0).await.unwrap() {
                        None => {
                            taken.fetch_add(1, Ordering::Relaxed);
                        }
                        Some(wait) => {
                            assert!(wait <= Duration::from_millis(110), "{wait:?}");
                            tokio::time::sleep(wait).await;
                        }
                    }
                }
            }));
        }
        for m in machines {
            m.await.unwrap();
        }
        let taken = taken.load(Ordering::Relaxed);
        assert!((30..=45).contains(&taken), "{taken} taken in one second");
    });
}

#[test]
fn limiters_of_three_machines_share_a_keys_slots_and_let_them_go() {
    use plait_llm::limiter::{Cost, Limiter};
    use plait_llm::provider::Limits;
    let rt = runtime();
    let Some(config) = database(&rt) else { return };
    rt.block_on(async {
        let limits = Limits {
            concurrency: 5,
            rpm: Some(6000),
            input_tpm: None,
            output_tpm: None,
        };
        let key = ("http://api".to_string(), "sk-1".to_string());
        let mut machines = Vec::new();
        for _ in 0..3 {
            let store = Arc::new(PgStore::connect(&config, WAIT).await.unwrap());
            let exchange = Arc::new(pg::PgExchange::new(store));
            machines.push(Arc::new(Limiter::with_exchange(
                limits,
                exchange,
                key.clone(),
            )));
        }
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let mut jobs = Vec::new();
        for k in 0..60 {
            let limiter = machines[k % 3].clone();
            let (in_flight, peak) = (in_flight.clone(), peak.clone());
            jobs.push(tokio::spawn(async move {
                let cost = Cost { input: 1, output: 0 };
                let permit = limiter.acquire(cost).await.unwrap();
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                limiter.finish(permit, Some(cost), None);
            }));
        }
        for job in jobs {
            job.await.unwrap();
        }
        assert!(peak.load(Ordering::SeqCst) <= 5, "at most the key's 5 at once");
        assert!(peak.load(Ordering::SeqCst) >= 3, "the slots are used");
        // Every slot was let go.
        let store = PgStore::connect(&config, WAIT).await.unwrap();
        let held = || async {
            store
                .client()
                .query_one(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2
                       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                    &[],
                )
                .await
                .unwrap()
                .get::<_, i64>(0)
        };
        let deadline = tokio::time::Instant::now() + WAIT;
        while held().await > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(held().await, 0, "slots still held");
    });
}
