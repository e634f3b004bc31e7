//! Distributed-run benchmark: the same plan run locally (`plait run -j W`) and spread over
//! W worker processes of one task at a time (`plait run --store --remote -j 0` and
//! `plait worker -j 1`, each in its own directory with its own clone), on this machine,
//! against a PostgreSQL store. Prints figures, asserts nothing.
//!
//! 1. Added time per task: tasks that each change their file (so each pushes a branch and
//!    the coordinator fetches it): (distributed − local) wall time × W / tasks.
//! 2. No-op tasks (the agent is `true`) at each size: wall time of both, the peak RSS of
//!    the coordinator and of the largest worker, the store's size, and the time the
//!    coordinator took from the last task's end to the run's end (the merge).
//!
//! `./bench --distributed [--sizes 1000,10000] [--workers 4] [--edit 100]`; the server is
//! `PLAIT_BENCH_PG_URL`, or a throwaway cluster from the machine's PostgreSQL.

// Children are reaped with `wait4` (for their peak memory), which clippy cannot see.
#![allow(clippy::zombie_processes)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

#[path = "common/cluster.rs"]
mod cluster;

struct Opts {
    sizes: Vec<usize>,
    workers: usize,
    edit: usize,
}

fn opts() -> Opts {
    let mut opts = Opts {
        sizes: vec![1_000, 10_000],
        workers: 4,
        edit: 100,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        match arg.as_str() {
            "--sizes" => opts.sizes = value.split(',').filter_map(|n| n.parse().ok()).collect(),
            "--workers" => opts.workers = value.parse().unwrap_or(opts.workers),
            "--edit" => opts.edit = value.parse().unwrap_or(opts.edit),
            _ => {}
        }
    }
    opts
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?} failed");
}

/// A repository of `n` files in directories of 100, a bare remote beside it, and a plan of
/// one task per file whose agent is `agent`.
fn project(root: &Path, n: usize, agent: &str) -> (PathBuf, PathBuf, PathBuf) {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let mut toml = format!(
        "goal = \"bench\"\n[defaults]\nagent = {{ exec = '''{agent}''' }}\n[review]\nagent = \"off\"\n"
    );
    for k in 0..n {
        let path = format!("d{:03}/f{:02}.txt", k / 100, k % 100);
        let file = repo.join(&path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, format!("file {k}\n")).unwrap();
        let _ = writeln!(
            toml,
            "[[task]]\nid = \"t{k:05}\"\nprompt = \"p\"\nowns = [\"/{path}\"]"
        );
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let plan = root.join("plan.toml");
    std::fs::write(&plan, toml).unwrap();
    let remote = root.join("remote.git");
    git(root, &["init", "-q", "--bare", "remote.git"]);
    (repo, plan, remote)
}

fn plait(dir: &Path, args: &[&str], out: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .expect("start plait")
}

/// Waits for `child`; whether it exited 0, and its peak resident memory in bytes.
fn reap(child: &Child) -> (bool, u64) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for a child spawned here that nothing else waits for.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let ok = waited == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (ok, usage.ru_maxrss as u64 * 1024)
}

struct Local {
    secs: f64,
    rss: u64,
}

fn local(root: &Path, n: usize, agent: &str, jobs: usize) -> Local {
    let dir = root.join(format!("local-{n}"));
    let (repo, plan, _) = project(&dir, n, agent);
    let start = Instant::now();
    let child = plait(
        &repo,
        &["run", plan.to_str().unwrap(), "-j", &jobs.to_string()],
        Stdio::null(),
    );
    let (ok, rss) = reap(&child);
    let secs = start.elapsed().as_secs_f64();
    assert!(ok, "the local run of {n} tasks failed");
    let _ = std::fs::remove_dir_all(&dir);
    Local { secs, rss }
}

struct Spread {
    secs: f64,
    coordinator_rss: u64,
    worker_rss: u64,
    store_bytes: i64,
    merge_secs: f64,
}

fn spread(root: &Path, base_url: &str, n: usize, agent: &str, workers: usize) -> Spread {
    let dir = root.join(format!("spread-{n}"));
    let (repo, plan, remote) = project(&dir, n, agent);
    let db = format!("plait_dist_{}_{n}", std::process::id());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let admin: tokio_postgres::Config = base_url.parse().unwrap();
    let client = rt.block_on(async {
        let (client, conn) = admin.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        client
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .await
            .unwrap();
        client
    });
    let mut config = admin.clone();
    config.dbname(&db);
    let url = format!(
        "postgres://{}@{}:{}/{db}",
        admin.get_user().unwrap_or("plait"),
        match &admin.get_hosts()[0] {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        },
        admin.get_ports().first().copied().unwrap_or(5432)
    );
    let out = std::fs::File::create(dir.join("run.out")).unwrap();
    let start = Instant::now();
    let coordinator = plait(
        &repo,
        &[
            "run",
            plan.to_str().unwrap(),
            "--store",
            &url,
            "--remote",
            remote.to_str().unwrap(),
            "-j",
            "0",
        ],
        Stdio::from(out),
    );
    let pool: Vec<Child> = (0..workers)
        .map(|k| {
            let wdir = dir.join(format!("w{k}"));
            std::fs::create_dir_all(&wdir).unwrap();
            plait(
                &wdir,
                &["worker", "--store", &url, "--dir", ".", "-j", "1"],
                Stdio::null(),
            )
        })
        .collect();
    let (ok, coordinator_rss) = reap(&coordinator);
    let secs = start.elapsed().as_secs_f64();
    assert!(ok, "the spread run of {n} tasks failed");
    let mut worker_rss = 0;
    for w in &pool {
        // SAFETY: signals a child of ours.
        unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    }
    for w in &pool {
        worker_rss = worker_rss.max(reap(w).1);
    }
    let store_bytes: i64 = rt.block_on(async {
        client
            .query_one(&format!("SELECT pg_database_size('{db}')"), &[])
            .await
            .unwrap()
            .get(0)
    });
    let run = std::fs::read_to_string(dir.join("run.out")).unwrap();
    let state_path = repo
        .join(".git/plait/runs")
        .join(run.trim())
        .join("state.json");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state_path).unwrap()).unwrap();
    let last_task = state["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["finished_at"].as_u64())
        .max()
        .unwrap_or(0);
    let merge_secs = state["finished_at"]
        .as_u64()
        .unwrap_or(0)
        .saturating_sub(last_task) as f64
        / 1000.0;
    let _ = std::fs::remove_dir_all(&dir);
    Spread {
        secs,
        coordinator_rss,
        worker_rss,
        store_bytes,
        merge_secs,
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let opts = opts();
    let base = match cluster::start("PLAIT_BENCH_PG_URL") {
        Ok(url) => url,
        Err(why) => {
            eprintln!("no PostgreSQL server: {why}");
            std::process::exit(1);
        }
    };
    let root = tempfile::tempdir().unwrap();
    let w = opts.workers;
    println!("plait distributed benchmark: {w} workers of -j 1 against a local run of -j {w}, this machine ({} CPUs)",
        std::thread::available_parallelism().map_or(0, |n| n.get()));

    let edit = "echo changed >> \"$PLAIT_FILE\"";
    let n = opts.edit;
    let l = local(root.path(), n, edit, w);
    let s = spread(root.path(), &base, n, edit, w);
    println!(
        "\n{n} tasks that each change their file (a branch pushed and fetched per task):\n  local {:.2} s, spread {:.2} s: {:+.0} ms per task (wall difference × {w} / {n}); merge {:.2} s after the last task",
        l.secs,
        s.secs,
        (s.secs - l.secs) * 1000.0 * w as f64 / n as f64,
        s.merge_secs
    );

    println!(
        "\nno-op tasks:\n{:>7} {:>9} {:>9} {:>7} {:>11} {:>11} {:>9} {:>10} {:>9}",
        "tasks",
        "local s",
        "spread s",
        "ratio",
        "local MiB",
        "coord MiB",
        "work MiB",
        "store MiB",
        "merge s"
    );
    for &n in &opts.sizes {
        let l = local(root.path(), n, "true", w);
        let s = spread(root.path(), &base, n, "true", w);
        println!(
            "{n:>7} {:>9.2} {:>9.2} {:>6.2}x {:>11.1} {:>11.1} {:>9.1} {:>10.1} {:>9.2}",
            l.secs,
            s.secs,
            s.secs / l.secs,
            mib(l.rss),
            mib(s.coordinator_rss),
            mib(s.worker_rss),
            s.store_bytes as f64 / (1024.0 * 1024.0),
            s.merge_secs
        );
    }
}
