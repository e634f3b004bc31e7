//! Store benchmark: claims a second from one PostgreSQL store, as workers of a distributed
//! run make them: each task claimed, then finished, each a round trip; then the same with
//! claims made in batches (`claim_many`, one round trip for several tasks, as a worker with
//! several free slots makes them), each task still finished on its own. Prints figures,
//! asserts nothing. The server is `PLAIT_BENCH_PG_URL`, or a throwaway cluster from the
//! machine's PostgreSQL. Run it through `./bench --store [--tasks N] [--batch N]`.

use std::time::{Duration, Instant};

use plait_core::state::TaskState;
use plait_store::pg::{self, PgStore};
use tokio_postgres::Config;

#[path = "common/cluster.rs"]
mod cluster;
#[path = "common/records.rs"]
mod records;

const WAIT: Duration = Duration::from_secs(10);

fn main() {
    let (mut tasks, mut batch) = (5_000usize, 8usize);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = |args: &mut dyn Iterator<Item = String>, default| {
            args.next().and_then(|n| n.parse().ok()).unwrap_or(default)
        };
        match arg.as_str() {
            "--tasks" => tasks = value(&mut args, tasks),
            "--batch" => batch = value(&mut args, batch).max(1),
            _ => {}
        }
    }
    let base = match cluster::start("PLAIT_BENCH_PG_URL") {
        Ok(url) => url,
        Err(why) => {
            eprintln!("no PostgreSQL server: {why}");
            std::process::exit(1);
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async move {
        let admin = pg::config(&base, &|_| None).expect("url");
        let (client, conn) = admin.connect(tokio_postgres::NoTls).await.expect("connect");
        tokio::spawn(conn);
        let db = format!("plait_bench_{}", std::process::id());
        client
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .await
            .expect("create database");
        let mut config = admin.clone();
        config.dbname(&db);
        println!("plait store benchmark: {tasks} tasks per run; each claimed, then finished");
        println!(
            "{:>9} {:>6} {:>10} {:>22}",
            "claimers", "batch", "claims/s", "per task per claimer"
        );
        for size in [1, batch] {
            for claimers in [1usize, 4, 16] {
                let run = format!("bench-{claimers}-{size}");
                let s = measure(&config, &run, tasks, claimers, size).await;
                println!(
                    "{claimers:>9} {size:>6} {:>10.0} {:>19.2} ms",
                    tasks as f64 / s,
                    s * 1e3 / tasks as f64 * claimers as f64
                );
            }
            if batch == 1 {
                break;
            }
        }
        println!("goal: at least 500 claims a second from one store (batch 1)");
    });
}

/// Seconds for `claimers` connections to claim every task of a new run of `tasks`, `size`
/// at a time, finishing each.
async fn measure(config: &Config, run: &str, tasks: usize, claimers: usize, size: usize) -> f64 {
    let store = PgStore::connect(config, WAIT).await.expect("store");
    let state = records::run_state(run, (0..tasks).map(|k| format!("t{k:05}")));
    store.create_run("/repo", &state).await.expect("run");
    let start = Instant::now();
    let mut handles = Vec::new();
    for w in 0..claimers {
        let (config, run) = (config.clone(), run.to_string());
        handles.push(tokio::spawn(async move {
            // Each claimer's connection is made on the clock, as it always was here.
            let store = PgStore::connect(&config, WAIT).await.expect("store");
            let owner = format!("w{w}");
            let lease = Duration::from_secs(60);
            let mut n = 0usize;
            loop {
                let claims = store
                    .claim_many(Some(&run), &owner, lease, size)
                    .await
                    .expect("claim");
                if claims.is_empty() {
                    return n;
                }
                for claim in &claims {
                    let mut done = claim.record.clone().expect("record");
                    done.state = TaskState::Done;
                    store.finish(&run, claim, &done).await.expect("finish");
                }
                n += claims.len();
            }
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.expect("claimer");
    }
    let s = start.elapsed().as_secs_f64();
    assert_eq!(total, tasks, "every task claimed once");
    s
}
