//! Store benchmark: claims a second from one PostgreSQL store, as workers of a distributed
//! run make them (claim, then finish, each a round trip). Prints figures, asserts nothing.
//! The server is `PLAIT_BENCH_PG_URL`, or a throwaway cluster from the machine's
//! PostgreSQL. Run it through `./bench --store [--tasks N]`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plait::pg::{self, PgStore};
use serde_json::json;

#[path = "common/cluster.rs"]
mod cluster;

fn main() {
    let mut tasks = 5_000usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--tasks" {
            tasks = args.next().and_then(|n| n.parse().ok()).unwrap_or(tasks);
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
        let wait = Duration::from_secs(10);
        println!("plait store benchmark: {tasks} tasks per run, claim + finish each");
        println!("{:>8} {:>12} {:>14}", "workers", "claims/s", "per claim");
        for workers in [1usize, 4, 16] {
            let store = PgStore::connect(&config, wait).await.expect("store");
            let run = format!("bench-{workers}");
            let list: Vec<(String, serde_json::Value)> = (0..tasks)
                .map(|k| (format!("t{k:05}"), json!({})))
                .collect();
            store
                .create_run(&run, "/repo", &json!({}), &list)
                .await
                .expect("run");
            let start = Instant::now();
            let run = Arc::new(run);
            let mut handles = Vec::new();
            for w in 0..workers {
                let (config, run) = (config.clone(), run.clone());
                handles.push(tokio::spawn(async move {
                    let store = PgStore::connect(&config, wait).await.expect("store");
                    let owner = format!("w{w}");
                    let mut n = 0u64;
                    while let Some(claim) = store
                        .claim(&run, &owner, Duration::from_secs(60))
                        .await
                        .expect("claim")
                    {
                        store
                            .finish(&run, &claim, "done", &json!({}))
                            .await
                            .expect("finish");
                        n += 1;
                    }
                    n
                }));
            }
            let mut total = 0;
            for h in handles {
                total += h.await.expect("worker");
            }
            let s = start.elapsed().as_secs_f64();
            assert_eq!(total as usize, tasks, "every task claimed once");
            println!(
                "{workers:>8} {:>12.0} {:>11.2} ms",
                total as f64 / s,
                s * 1e3 / total as f64 * workers as f64
            );
        }
        println!("goal: at least 500 claims a second from one store");
    });
}
