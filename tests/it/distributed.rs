//! Runs spread over many machines, against a real PostgreSQL server: a coordinator
//! (`plait run --store --remote`), worker processes (`plait worker`) each in its own
//! directory with its own clone, as if on other machines, and a bare repository as the
//! remote. Without PostgreSQL these tests say they are skipped.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::support::pg::database_url;
use crate::support::plan::Raw;
use crate::support::spread::{
    coordinator, log, project, project_with, spawn_with, stop, wait_for, worker, worker_with, Proc,
};
use crate::support::{git_in, runtime, stderr, stdout, Plan, TestRepo};

/// One query's rows of (text, bigint) from the test's store.
fn rows(url: &str, sql: &str) -> Vec<(String, String, i64)> {
    let rt = runtime();
    rt.block_on(async {
        // Connecting migrates the store, which the coordinator may not have done yet.
        let config: tokio_postgres::Config = url.parse().unwrap();
        let store = plait_store::pg::PgStore::connect(&config, Duration::from_secs(10))
            .await
            .unwrap();
        store
            .client()
            .query(sql, &[])
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
    })
}

fn merged_tree(repo: &TestRepo, run: &str) -> String {
    repo.git(&["rev-parse", &format!("plait/{run}/merged^{{tree}}")])
}

/// Every task branch of `run` is one commit on the base: nothing was committed twice.
fn one_commit_each(repo: &TestRepo, run: &str, n: usize) {
    for k in 0..n {
        let branch = format!("plait/{run}/m{k:02}");
        let count = repo.git(&["rev-list", "--count", &format!("main..{branch}")]);
        assert_eq!(count, "1", "{branch}");
    }
}

#[test]
fn thirty_tasks_over_three_workers_each_run_once_and_merge_as_a_local_run_does() {
    let Some(url) = database_url() else { return };
    let n = 30;
    let (repo, plan) = project(
        n,
        "sleep 0.2; echo \"changed by $PLAIT_TASK\" >> pkg/$PLAIT_TASK.txt",
    );
    let plan = plan.to_str().unwrap();
    let mut coordinator = coordinator(&repo, plan, &url);
    let workers: Vec<Proc> = (1..=3)
        .map(|k| worker(&repo, &url, &format!("w{k}"), "2", "30"))
        .collect();
    let status = wait_for(
        &mut coordinator,
        "the coordinator",
        Duration::from_secs(120),
    );
    let err = log(&repo.scratch, "coordinator", "err");
    assert!(status.success(), "{err}");
    let run = log(&repo.scratch, "coordinator", "out").trim().to_string();
    let recorded: Vec<usize> = workers
        .into_iter()
        .enumerate()
        .map(|(k, w)| stop(w, &repo, &format!("w{}", k + 1)))
        .collect();
    assert_eq!(recorded.iter().sum::<usize>(), n, "{recorded:?}");
    assert!(
        recorded.iter().filter(|&&r| r > 0).count() >= 2,
        "the work was spread: {recorded:?}"
    );
    // Each task was claimed once, and ended done with the tip its branch has.
    let tasks = rows(
        &url,
        "SELECT id, state || ' ' || coalesce(tip, ''), generation FROM plait_tasks ORDER BY id",
    );
    assert_eq!(tasks.len(), n);
    for (id, state, generation) in &tasks {
        assert_eq!(*generation, 1, "{id} claimed once");
        let (state, tip) = state.split_once(' ').unwrap();
        assert_eq!(state, "done", "{id}");
        assert_eq!(repo.git(&["rev-parse", &format!("plait/{run}/{id}")]), tip);
    }
    one_commit_each(&repo, &run, n);
    // The remote has each task branch too.
    let remote = repo.scratch.join("remote.git");
    let on_remote = git_in(
        &remote,
        &[
            "for-each-ref",
            "--format=%(refname)",
            &format!("refs/heads/plait/{run}/"),
        ],
    );
    let task_branches = on_remote
        .lines()
        .filter(|l| l.contains(&format!("{run}/m")) && !l.ends_with("/merged"))
        .count();
    assert_eq!(task_branches, n, "{on_remote}");
    assert!(
        on_remote.contains(&format!("refs/heads/plait/{run}/merged")),
        "{on_remote}"
    );

    // The same plan run locally merges to the same tree.
    let out = repo.plait(&["run", plan, "-j", "4"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let local = stdout(&out).trim().to_string();
    assert_eq!(merged_tree(&repo, &run), merged_tree(&repo, &local));
    let content = repo.git(&["show", &format!("plait/{run}/merged:pkg/m07.txt")]);
    assert_eq!(content, "module 7\nchanged by m07");
}

#[test]
fn a_worker_killed_mid_task_loses_its_tasks_to_the_others_and_nothing_is_done_twice() {
    let Some(url) = database_url() else { return };
    let n = 6;
    let (repo, plan) = project(
        n,
        "sleep 1; echo \"changed by $PLAIT_TASK\" >> pkg/$PLAIT_TASK.txt",
    );
    let plan = plan.to_str().unwrap();
    let mut coordinator = coordinator(&repo, plan, &url);
    // The first worker alone takes two tasks, and is killed while their agents run.
    let mut doomed = worker(&repo, &url, "doomed", "2", "2");
    let running = || {
        rows(
            &url,
            "SELECT id, coalesce(owner, ''), generation FROM plait_tasks WHERE state = 'running'",
        )
    };
    crate::support::wait_until("the first worker takes two tasks", || running().len() == 2);
    let taken: Vec<String> = running().into_iter().map(|(id, _, _)| id).collect();
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    let others: Vec<Proc> = ["w1", "w2"]
        .iter()
        .map(|name| worker(&repo, &url, name, "2", "2"))
        .collect();
    let status = wait_for(
        &mut coordinator,
        "the coordinator",
        Duration::from_secs(120),
    );
    assert!(
        status.success(),
        "{}",
        log(&repo.scratch, "coordinator", "err")
    );
    let run = log(&repo.scratch, "coordinator", "out").trim().to_string();
    let recorded: usize = others
        .into_iter()
        .zip(["w1", "w2"])
        .map(|(w, name)| stop(w, &repo, name))
        .sum();
    assert_eq!(recorded, n, "the other workers recorded every task");
    let tasks = rows(
        &url,
        "SELECT id, state, generation FROM plait_tasks ORDER BY id",
    );
    for (id, state, generation) in &tasks {
        assert_eq!(state, "done", "{id}");
        let want = if taken.contains(id) { 2 } else { 1 };
        assert_eq!(
            *generation, want,
            "{id}: taken over once after the lease ran out"
        );
    }
    one_commit_each(&repo, &run, n);
    let log_count = repo.git(&["rev-list", "--count", &format!("main..plait/{run}/merged")]);
    assert_eq!(
        log_count,
        (n + 1).to_string(),
        "each task's commit once, and the merge"
    );
}

#[test]
fn a_killed_coordinator_is_resumed_and_merges_what_the_workers_did() {
    let Some(url) = database_url() else { return };
    let n = 8;
    let (repo, plan) = project(
        n,
        "sleep 0.5; echo \"changed by $PLAIT_TASK\" >> pkg/$PLAIT_TASK.txt",
    );
    let plan = plan.to_str().unwrap();
    let mut coordinator = coordinator(&repo, plan, &url);
    let w1 = worker(&repo, &url, "w1", "1", "30");
    let done = || {
        rows(
            &url,
            "SELECT id, state, generation FROM plait_tasks WHERE state = 'done'",
        )
    };
    crate::support::wait_until("a task is done", || !done().is_empty());
    coordinator.kill().unwrap();
    coordinator.wait().unwrap();
    let run = rows(&url, "SELECT id, repo, 0::bigint FROM plait_runs")[0]
        .0
        .clone();
    // The worker goes on without the coordinator.
    crate::support::wait_until("every task is done", || done().len() == n);
    let out = repo.plait(&["resume", &run, "--store", &url, "-j", "0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), run);
    assert_eq!(stop(w1, &repo, "w1"), n);
    let out = repo.plait(&["status", &run, "--json"]);
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["phase"], "finished", "{state}");
    assert_eq!(state["merge"]["included"].as_array().unwrap().len(), n);
    one_commit_each(&repo, &run, n);
}

#[test]
fn a_remote_that_cannot_take_the_base_or_a_newer_store_is_refused_and_nothing_is_made() {
    let Some(url) = database_url() else { return };
    let rt = runtime();
    let (repo, plan) = project(2, "echo x >> pkg/$PLAIT_TASK.txt");
    let plan = plan.to_str().unwrap();
    let out = repo.plait(&[
        "run",
        plan,
        "--store",
        &url,
        "--remote",
        "../scratch/nowhere.git",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--remote"), "{}", stderr(&out));
    assert!(stderr(&out).contains("nowhere.git"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing was created"),
        "{}",
        stderr(&out)
    );
    assert!(
        !repo.path.join(".git/plait/runs").exists(),
        "no run was made"
    );
    assert!(rows(&url, "SELECT id, repo, 0::bigint FROM plait_runs").is_empty());
    assert_eq!(repo.branches(), vec!["main".to_string()]);
    // -j 0 without workers to run the tasks is a mistake.
    let out = repo.plait(&["run", plan, "-j", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--remote"), "{}", stderr(&out));

    // A store of a newer schema: the coordinator and the worker both refuse it.
    rt.block_on(async {
        let config: tokio_postgres::Config = url.parse().unwrap();
        let (client, conn) = config.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        client
            .execute("INSERT INTO plait_schema (version) VALUES (99)", &[])
            .await
            .unwrap();
    });
    let out = repo.plait(&[
        "run",
        plan,
        "--store",
        &url,
        "--remote",
        "../scratch/remote.git",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("newer than this plait knows"),
        "{}",
        stderr(&out)
    );
    assert!(
        !repo.path.join(".git/plait/runs").exists(),
        "no run was made"
    );
    let dir = repo.scratch.join("w");
    fs::create_dir_all(&dir).unwrap();
    let out = crate::support::plait_in(&dir, &["worker", "--store", &url, "--dir", "."]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("upgrade plait"), "{}", stderr(&out));
    // And a worker without a store says what it needs.
    let out = crate::support::plait_in(&dir, &["worker", "--dir", "."]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("PLAIT_STORE"), "{}", stderr(&out));
}

#[test]
fn a_worker_taking_a_task_over_goes_on_from_the_work_last_pushed() {
    let Some(url) = database_url() else { return };
    // Round one writes `first` and is sent back; round two hangs until the worker is
    // killed. The worker that takes over is told so, and writes `second`.
    let agent =
        "f=pkg/$PLAIT_TASK.txt; case \"$PLAIT_FEEDBACK\" in *\"taken over\"*) echo second >> $f;; \
                 *) if grep -q first $f; then sleep 15; else echo first >> $f; fi;; esac";
    let (repo, _) = project(1, agent);
    let plan = repo.plan(
        &Plan::new()
            .goal("spread")
            .exec_all(agent)
            .set("review", "rounds", 2)
            .set(
                "review.agent",
                "exec",
                "grep -q '^+second' \"$PLAIT_DIFF\" || { echo more please; exit 1; }",
            )
            .task("m00")
            .prompt("Edit m00")
            .owns(["/pkg/m00.txt"])
            .to_toml(),
    );
    let plan = plan.to_str().unwrap();
    let mut coordinator = coordinator(&repo, plan, &url);
    let mut doomed = worker(&repo, &url, "doomed", "1", "2");
    let pushed = || {
        rows(
            &url,
            "SELECT id, coalesce(checkpoint, ''), generation FROM plait_tasks WHERE checkpoint IS NOT NULL",
        )
    };
    crate::support::wait_until("the first round's work is pushed", || !pushed().is_empty());
    let checkpoint = pushed()[0].1.split_once(' ').unwrap().1.to_string();
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    let next = worker(&repo, &url, "next", "1", "2");
    let status = wait_for(&mut coordinator, "the coordinator", Duration::from_secs(60));
    assert!(
        status.success(),
        "{}",
        log(&repo.scratch, "coordinator", "err")
    );
    let run = log(&repo.scratch, "coordinator", "out").trim().to_string();
    assert_eq!(stop(next, &repo, "next"), 1);
    let branch = format!("plait/{run}/m00");
    assert_eq!(
        repo.git(&["show", &format!("{branch}:pkg/m00.txt")]),
        "module 0\nfirst\nsecond"
    );
    // The second worker's commit sits on the one the first pushed.
    assert_eq!(repo.git(&["rev-parse", &format!("{branch}~1")]), checkpoint);
    assert_eq!(
        repo.git(&["rev-list", "--count", &format!("main..{branch}")]),
        "2"
    );
}

#[test]
fn three_workers_keep_together_to_one_keys_concurrency_and_rate() {
    use crate::mock::{MockModel, Provider, Turn};
    let Some(url) = database_url() else { return };
    const KEY: &str = "sk-test-shared-0123456789";
    let env = [("PLAIT_TEST_KEY", KEY)];
    // 84 tasks of four requests: 336 against a key of 30 at once and 300 a minute (a
    // bucket that starts full), over three workers that could run 60 tasks at once.
    let n = 84;
    let files: Vec<(String, String)> = (0..n)
        .map(|k| (format!("m/t{k:02}.txt"), format!("{k}\n")))
        .collect();
    let repo = TestRepo::with_owned_files(&files);
    git_in(&repo.scratch, &["init", "-q", "--bare", "remote.git"]);
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.keep_bodies(false);
    mock.set_latency(Duration::from_millis(100));
    mock.set_limits(30, 300, 1);
    let mut toml = Plan::on_mock(&mock.url())
        .set(
            "providers.mock",
            "limits",
            Raw("{ concurrency = 30, rpm = 300 }"),
        )
        .set("defaults", "timeout", "120s")
        .set("defaults", "expect_changes", false);
    for k in 0..n {
        mock.script(
            &format!("t{k:02}"),
            vec![
                Turn::PauseTurn,
                Turn::PauseTurn,
                Turn::PauseTurn,
                Turn::Text("done".into()),
            ],
        );
        toml = toml
            .task(&format!("t{k:02}"))
            .owns([format!("/m/t{k:02}.txt")]);
    }
    let plan = repo.plan(&toml.to_toml());
    let mut coordinator = spawn_with(
        &repo.path,
        &repo.scratch,
        "coordinator",
        &[
            "run",
            plan.to_str().unwrap(),
            "--store",
            &url,
            "--remote",
            "../scratch/remote.git",
            "-j",
            "0",
        ],
        &env,
    );
    let workers: Vec<Proc> = (1..=3)
        .map(|k| worker_with(&repo, &url, &format!("w{k}"), "20", "30", &env))
        .collect();
    let status = wait_for(
        &mut coordinator,
        "the coordinator",
        Duration::from_secs(180),
    );
    let err = log(&repo.scratch, "coordinator", "err");
    let recorded: Vec<usize> = workers
        .into_iter()
        .enumerate()
        .map(|(k, w)| stop(w, &repo, &format!("w{}", k + 1)))
        .collect();
    assert!(status.success(), "{err}");
    assert_eq!(recorded.iter().sum::<usize>(), n, "{recorded:?}");
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let s = mock.load_stats();
    assert_eq!(s.ok, 4 * n as u64, "{s:?}");
    let total = s.ok + s.limited;
    eprintln!("three workers: {s:?}");
    assert!(
        (s.limited as f64) < 0.05 * total as f64,
        "{} of {total} requests answered 429 ({} for the rate), at most {} in flight",
        s.limited,
        s.limited_rpm,
        s.peak_in_flight
    );
    assert!(s.peak_in_flight <= 30, "{s:?}");
}

#[test]
fn another_clone_reviews_decides_and_lands_a_run_through_the_store() {
    let Some(url) = database_url() else { return };
    let n = 3;
    let (repo, plan) = project(n, "echo \"changed by $PLAIT_TASK\" >> pkg/$PLAIT_TASK.txt");
    let plan = plan.to_str().unwrap();
    let w1 = worker(&repo, &url, "w1", "2", "30");
    let out = repo.plait(&[
        "run",
        plan,
        "--store",
        &url,
        "--remote",
        "../scratch/remote.git",
        "-j",
        "0",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    assert_eq!(stop(w1, &repo, "w1"), n);
    // Another machine: a clone of the project, with no record of the run.
    let other = repo.scratch.join("other");
    git_in(
        &repo.scratch,
        &[
            "clone",
            "-q",
            repo.path.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    let plait = |args: &[&str]| crate::support::plait_in(&other, args);
    let out = plait(&["diff", &run, "merged", "--stat", "--store", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("pkg/m01.txt"), "{}", stdout(&out));
    let out = plait(&["review", &run, "--store", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("m02"), "{}", stdout(&out));
    let out = plait(&["reject", &run, "m01", "--store", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = plait(&["land", &run, "--into", "main", "--partial", "--store", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Landed there without m01; the store has the decision and the landing.
    assert_eq!(git_in(&other, &["show", "main:pkg/m01.txt"]), "module 1");
    assert_eq!(
        git_in(&other, &["show", "main:pkg/m02.txt"]),
        "module 2\nchanged by m02"
    );
    let out = repo.plait(&["status", &run, "--store", &url, "--json"]);
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["landed"].as_array().map(Vec::len), Some(1), "{state}");
    let m01 = state["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "m01")
        .unwrap();
    assert_eq!(m01["decision"]["verdict"], "reject", "{m01}");
    // A run the store does not have is named.
    let out = plait(&["diff", "nosuch", "merged", "--store", &url]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the store has no run `nosuch`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_worker_stopped_with_ctrl_c_gives_its_tasks_back_and_another_finishes_them() {
    let Some(url) = database_url() else { return };
    let n = 4;
    let (repo, plan) = project(
        n,
        "sleep 2; echo \"changed by $PLAIT_TASK\" >> pkg/$PLAIT_TASK.txt",
    );
    let plan = plan.to_str().unwrap();
    // --remote needs a store.
    let out = repo.plait(&["run", plan, "--remote", "../scratch/remote.git"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--store"), "{}", stderr(&out));
    let mut coordinator = coordinator(&repo, plan, &url);
    let first = worker(&repo, &url, "first", "2", "30");
    let running = || {
        rows(
            &url,
            "SELECT id, state, generation FROM plait_tasks WHERE state = 'running'",
        )
    };
    crate::support::wait_until("the first worker takes two tasks", || running().len() == 2);
    std::thread::sleep(Duration::from_millis(300));
    let taken: Vec<String> = running().into_iter().map(|(id, _, _)| id).collect();
    assert_eq!(stop(first, &repo, "first"), 0, "it recorded nothing");
    let err = log(&repo.scratch, "first", "err");
    assert!(err.contains("2 given back"), "{err}");
    let second = worker(&repo, &url, "second", "2", "30");
    let status = wait_for(&mut coordinator, "the coordinator", Duration::from_secs(60));
    assert!(
        status.success(),
        "{}",
        log(&repo.scratch, "coordinator", "err")
    );
    let run = log(&repo.scratch, "coordinator", "out").trim().to_string();
    assert_eq!(stop(second, &repo, "second"), n);
    for (id, state, generation) in rows(&url, "SELECT id, state, generation FROM plait_tasks") {
        assert_eq!(state, "done", "{id}");
        let want = if taken.contains(&id) { 2 } else { 1 };
        assert_eq!(generation, want, "{id}");
    }
    one_commit_each(&repo, &run, n);
}

/// An agent that appends a line to its task's file and, told something in a later round,
/// the words of it that match `heard` (so the file shows what it was told); task `bad`'s
/// first round also writes `broken`, which a later round makes `fixed`.
fn listening_agent(bad: &str, heard: &str) -> String {
    format!(
        "f=pkg/$PLAIT_TASK.txt; if [ -n \"$PLAIT_FEEDBACK\" ]; then sed -i s/broken/fixed/ $f; \
         echo \"$PLAIT_FEEDBACK\" | grep -o '{heard}' | head -n 1 >> $f; \
         else echo \"changed by $PLAIT_TASK\" >> $f; \
         if [ $PLAIT_TASK = {bad} ]; then echo broken >> $f; fi; fi"
    )
}

/// Runs `plan` over two workers to its end; the run's id, its record, and how many task
/// ends the workers recorded.
fn run_spread(repo: &TestRepo, plan: &Path, url: &str) -> (String, serde_json::Value, usize) {
    let mut coordinator = coordinator(repo, plan.to_str().unwrap(), url);
    let workers: Vec<Proc> = ["w1", "w2"]
        .iter()
        .map(|name| worker(repo, url, name, "2", "30"))
        .collect();
    let status = wait_for(
        &mut coordinator,
        "the coordinator",
        Duration::from_secs(120),
    );
    let err = log(&repo.scratch, "coordinator", "err");
    assert!(status.code().is_some_and(|c| c <= 1), "{err}");
    let run = log(&repo.scratch, "coordinator", "out").trim().to_string();
    let recorded = workers
        .into_iter()
        .zip(["w1", "w2"])
        .map(|(w, name)| stop(w, repo, name))
        .sum();
    let out = repo.plait(&["status", &run, "--json"]);
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (run, state, recorded)
}

/// Each task's generation in the store, by id.
fn generations(url: &str) -> std::collections::BTreeMap<String, i64> {
    rows(url, "SELECT id, state, generation FROM plait_tasks")
        .into_iter()
        .map(|(id, _, generation)| (id, generation))
        .collect()
}

#[test]
fn a_culprit_of_the_merged_checks_goes_back_to_a_worker_and_its_new_round_is_merged() {
    let Some(url) = database_url() else { return };
    let n = 3;
    let (repo, plan) = project_with(
        n,
        &listening_agent("m01", "merged checks fail"),
        "[checks]\nmerged = [\"! grep -q broken pkg/*.txt\"]\nrework = 1\n",
    );
    let (run, state, recorded) = run_spread(&repo, &plan, &url);
    assert_eq!(state["phase"], "finished", "{state}");
    // m01 broke the merged checks, went back once, and is merged with its new round.
    assert_eq!(
        state["culprits"]["reworked"],
        serde_json::json!(["m01"]),
        "{state}"
    );
    assert!(
        state["culprits"]["sets"].is_null(),
        "nobody held out: {state}"
    );
    assert_eq!(
        state["merge"]["included"].as_array().unwrap().len(),
        n,
        "{state}"
    );
    assert_eq!(state["merged_checks"][0]["passed"], true, "{state}");
    assert_eq!(recorded, n + 1, "each task once, and m01 once more");
    let g = generations(&url);
    assert_eq!((g["m00"], g["m01"], g["m02"]), (1, 2, 1), "{g:?}");
    // Its branch has the worker's new commit on the first, told what broke.
    let branch = format!("plait/{run}/m01");
    assert_eq!(
        repo.git(&["rev-list", "--count", &format!("main..{branch}")]),
        "2"
    );
    let reworked = "module 1\nchanged by m01\nfixed\nmerged checks fail";
    assert_eq!(
        repo.git(&["show", &format!("{branch}:pkg/m01.txt")]),
        reworked
    );
    assert_eq!(
        repo.git(&["show", &format!("plait/{run}/merged:pkg/m01.txt")]),
        reworked
    );
    one_commit_each(&repo, &run, 1);
}

#[test]
fn a_supervisors_request_for_changes_goes_back_to_the_workers_and_the_group_is_merged_again() {
    let Some(url) = database_url() else { return };
    let n = 4;
    // The supervisor of group-2 asks for changes until its diff says `fixed`.
    let (repo, plan) = project_with(
        n,
        &listening_agent("none", "add the word fixed"),
        "[groups]\ncount = 2\nreview = { exec = '''[ \"$PLAIT_TASK\" = group-1 ] || \
         grep -q fixed \"$PLAIT_DIFF\" || { echo 'add the word fixed'; exit 1; }''' }\n",
    );
    let (run, state, recorded) = run_spread(&repo, &plan, &url);
    assert_eq!(state["phase"], "finished", "{state}");
    let groups = state["groups"].as_array().unwrap();
    assert_eq!(
        groups[1]["tasks"],
        serde_json::json!(["m02", "m03"]),
        "{state}"
    );
    assert_eq!(groups[1]["review"]["verdict"], "approve", "{state}");
    assert_eq!(groups[1]["merged_up"], true, "{state}");
    assert_eq!(
        state["merge"]["included"].as_array().unwrap().len(),
        n,
        "{state}"
    );
    assert_eq!(recorded, n + 2, "each task once, and group-2's once more");
    let g = generations(&url);
    assert_eq!(
        (g["m00"], g["m01"], g["m02"], g["m03"]),
        (1, 1, 2, 2),
        "{g:?}"
    );
    let rounds = |id: &str| {
        state["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .unwrap()["rounds"]
            .clone()
    };
    assert_eq!(
        (rounds("m01"), rounds("m02")),
        (0.into(), 1.into()),
        "{state}"
    );
    for (k, told) in [(1, false), (2, true), (3, true)] {
        let mut want = format!("module {k}\nchanged by m{k:02}");
        if told {
            want.push_str("\nadd the word fixed");
        }
        let merged = repo.git(&["show", &format!("plait/{run}/merged:pkg/m{k:02}.txt")]);
        assert_eq!(merged, want);
    }
    assert_eq!(
        repo.git(&["rev-list", "--count", &format!("main..plait/{run}/m03")]),
        "2"
    );
}

#[test]
fn a_plan_in_waves_over_two_workers_starts_each_task_from_what_it_comes_after() {
    let Some(url) = database_url() else { return };
    let repo = TestRepo::with_files(&[
        ("src/core.txt", "core\n"),
        ("src/a.txt", "a\n"),
        ("src/b.txt", "b\n"),
        ("src/z.txt", "z\n"),
        ("src/bad.txt", "bad\n"),
        ("src/late.txt", "late\n"),
    ]);
    // a and b copy core's work into their own files, so their work shows what they
    // started from; z copies theirs. `bad` fails, so `late` is blocked.
    let plan = repo.plan(
        &Plan::new()
            .goal("waves")
            .task("core")
            .owns(["/src/core.txt"])
            .exec("echo new >> src/core.txt")
            .task("a")
            .owns(["/src/a.txt"])
            .after(["core"])
            .exec("cat src/core.txt >> src/a.txt")
            .task("b")
            .owns(["/src/b.txt"])
            .after(["core"])
            .exec("cat src/core.txt >> src/b.txt")
            .task("z")
            .owns(["/src/z.txt"])
            .after(["a", "b"])
            .exec("cat src/a.txt src/b.txt >> src/z.txt")
            .task("bad")
            .owns(["/src/bad.txt"])
            .exec("exit 3")
            .task("late")
            .owns(["/src/late.txt"])
            .after(["bad"])
            .exec("echo 2 >> src/late.txt")
            .to_toml(),
    );
    git_in(&repo.scratch, &["init", "-q", "--bare", "remote.git"]);
    let (run, state, recorded) = run_spread(&repo, &plan, &url);
    assert_eq!(state["phase"], "finished", "{state}");
    let task = |id: &str| crate::support::task_json(&state, id);
    for id in ["core", "a", "b", "z"] {
        assert_eq!(task(id)["state"], "done", "{:#}", task(id));
    }
    assert_eq!(task("bad")["state"], "failed");
    assert_eq!(task("late")["state"], "blocked");
    assert_eq!(task("late")["blocked_by"], serde_json::json!(["bad"]));
    assert_eq!(
        recorded, 5,
        "every task but the blocked one ran on a worker, once"
    );
    assert_eq!(task("a")["start_from"]["core"], task("core")["commit"]);
    let merged = |path: &str| repo.git(&["show", &format!("plait/{run}/merged:{path}")]);
    assert_eq!(merged("src/a.txt"), "a\ncore\nnew");
    assert_eq!(merged("src/z.txt"), "z\na\ncore\nnew\nb\ncore\nnew");
    let states = rows(
        &url,
        &format!("SELECT id, state, generation FROM plait_tasks WHERE run_id = '{run}'"),
    );
    assert!(
        states
            .iter()
            .any(|(id, s, g)| id == "late" && s == "blocked" && *g == 0),
        "{states:?}"
    );
}

#[test]
fn a_culprit_sent_back_in_a_spread_run_runs_the_tasks_after_it_again_on_the_workers() {
    let Some(url) = database_url() else { return };
    let repo = crate::support::fixtures::culprit_waves_repo();
    let plan = repo.plan(&crate::support::fixtures::culprit_waves());
    git_in(&repo.scratch, &["init", "-q", "--bare", "remote.git"]);
    let (run, state, recorded) = run_spread(&repo, &plan, &url);
    assert_eq!(state["phase"], "finished", "{state}");
    assert_eq!(
        state["culprits"]["reworked"],
        serde_json::json!(["core"]),
        "{state}"
    );
    assert_eq!(state["merged_checks"][0]["passed"], true, "{state}");
    assert_eq!(recorded, 8, "four tasks, each twice");
    let merged = |path: &str| repo.git(&["show", &format!("plait/{run}/merged:{path}")]);
    assert_eq!(merged("src/a.txt"), "fixed");
    assert_eq!(merged("src/z.txt"), "fixed\nfixed");
    let g = generations(&url);
    assert_eq!((g["core"], g["a"], g["z"]), (2, 2, 2), "{g:?}");
}

#[test]
fn a_worker_runs_a_tasks_attempts_and_the_coordinator_merges_the_chosen_one() {
    let Some(url) = database_url() else { return };
    let (repo, plan) = project_with(
        3,
        "f=pkg/$PLAIT_TASK.txt; [ $PLAIT_ATTEMPT = 1 ] && sleep 2; \
         echo \"attempt $PLAIT_ATTEMPT of $PLAIT_ATTEMPTS\" >> $f",
        "attempts = 2\n[pick]\nby = \"checks\"",
    );
    let plan = plan.to_str().unwrap();
    let mut coordinator = coordinator(&repo, plan, &url);
    let workers: Vec<Proc> = (1..=2)
        // Slots enough for every attempt: the attempts of a task run at once.
        .map(|k| worker(&repo, &url, &format!("w{k}"), "8", "30"))
        .collect();
    let status = wait_for(
        &mut coordinator,
        "the coordinator",
        Duration::from_secs(120),
    );
    let err = log(&repo.scratch, "coordinator", "err");
    assert!(status.success(), "{err}");
    let run = log(&repo.scratch, "coordinator", "out").trim().to_string();
    let recorded: usize = workers
        .into_iter()
        .enumerate()
        .map(|(k, w)| stop(w, &repo, &format!("w{}", k + 1)))
        .sum();
    assert_eq!(recorded, 3);
    let status = repo.status_json(&[&run]);
    for (k, task) in status["tasks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(task["state"], "done", "{task}");
        assert_eq!(task["pick"]["attempt"], 2, "{task}");
        assert_eq!(task["attempts"].as_array().unwrap().len(), 2, "{task}");
        let content = repo.git(&["show", &format!("plait/{run}/merged:pkg/m{k:02}.txt")]);
        assert_eq!(content, format!("module {k}\nattempt 2 of 2"));
    }
}
