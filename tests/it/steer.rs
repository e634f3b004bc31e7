//! Steering a running run: `plait tell` reaches one running agent (a model agent at its
//! next turn, any other at its next round), `plait stop` ends one task while the others go
//! on, with or without its work.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::mock::{edit, MockModel, Provider, Turn};
use crate::support::{printed, stderr, stdout, until_exists, wait_until, Plan, TestRepo};

/// `plait status --json`'s record of task `id`.
fn task(repo: &TestRepo, id: &str) -> Value {
    let status = repo.status_json(&[]);
    status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Starts `plait run PLAN -j 3` as a child process.
fn spawn_run(repo: &TestRepo, plan: &Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan.to_str().unwrap(), "-j", "3"])
        .current_dir(&repo.path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs `run` (a run of the repository at `path`) while another thread, once `ready`, tells
/// its task `a` `text` (`plait tell`); checks that the run answered with `answer`, and
/// returns what `run` returned.
fn told_while<T>(
    path: &Path,
    ready: &(dyn Fn() -> bool + Sync),
    (text, answer): (&str, &str),
    run: impl FnOnce() -> T,
) -> T {
    std::thread::scope(|s| {
        let telling = s.spawn(move || {
            wait_until("the moment to tell", ready);
            let status = crate::support::plait_in(path, &["status", "--json"]);
            let status: Value = serde_json::from_slice(&status.stdout).unwrap();
            let run = status["id"].as_str().unwrap().to_string();
            crate::support::plait_in(path, &["tell", &run, "a", "-m", text])
        });
        let ran = run();
        let told = telling.join().unwrap();
        assert!(told.status.success(), "{}", stderr(&told));
        assert!(stdout(&told).contains(answer), "{}", stdout(&told));
        ran
    })
}

#[test]
fn a_model_agent_told_mid_round_hears_it_after_its_tool_results() {
    for provider in [Provider::Anthropic, Provider::OpenAi] {
        const KEY: &str = "sk-tell";
        let mock = MockModel::start(provider, KEY);
        mock.script(
            "a",
            vec![
                Turn::Tools(vec![edit::view("a.txt")]),
                // What the message asked for.
                Turn::Tools(vec![edit::str_replace("a.txt", "one", "42")]),
                Turn::Text("done".into()),
            ],
        );
        // Each answer takes a while: the message arrives while the first is awaited.
        mock.set_latency(Duration::from_millis(1500));
        let kind = if provider == Provider::Anthropic {
            "anthropic"
        } else {
            "openai"
        };
        let repo = TestRepo::with_files(&[("a.txt", "one\n")]);
        let toml = Plan::new()
            .provider("mock", kind, &mock.url(), "K", "m")
            .review_off()
            .task("a")
            .prompt("write a")
            .owns(["a.txt"])
            .with("agent", "mock")
            .to_toml();
        let ready = || mock.count("a") == 1;
        let state = told_while(
            &repo.path,
            &ready,
            (
                "Write 42, not one",
                "told a: its agent hears it at its next turn",
            ),
            || repo.run_with_env(&toml, 1, &|k| (k == "K").then(|| KEY.to_string())),
        );
        let a = state.task("a").unwrap();
        assert_eq!(a.state, plait_core::state::TaskState::Done, "{:?}", a.error);
        assert_eq!(a.told.len(), 1);
        assert_eq!(a.told[0].by, "command line");
        assert_eq!(a.told[0].way, "next turn");
        assert!(a.told[0].heard_at.is_some(), "{:?}", a.told);
        assert_eq!(
            repo.git(&["show", &format!("plait/{}/merged:a.txt", state.id)]),
            "42"
        );
        // The next request after it was told carries it after the last turn's tool results.
        let second = mock
            .requests()
            .into_iter()
            .filter(|r| r.task.as_deref() == Some("a"))
            .map(|r| r.body)
            .find(|b| b.to_string().contains("Write 42, not one"))
            .unwrap();
        let messages = second["messages"].as_array().unwrap();
        match provider {
            Provider::Anthropic => {
                let last = &messages.last().unwrap()["content"];
                assert_eq!(last[0]["type"], "tool_result", "{last}");
                let told = last.as_array().unwrap().last().unwrap();
                assert_eq!(told["type"], "text", "{last}");
                assert!(told["text"].as_str().unwrap().contains("Write 42, not one"));
            }
            Provider::OpenAi => {
                let n = messages.len();
                assert_eq!(messages[n - 2]["role"], "tool", "{second}");
                assert_eq!(messages[n - 1]["role"], "user", "{second}");
                assert!(messages[n - 1]["content"]
                    .as_str()
                    .unwrap()
                    .contains("Write 42, not one"));
            }
        }
        assert!(mock.problems().is_empty(), "{:?}", mock.problems());
    }
}

#[test]
fn a_command_agent_hears_it_as_its_next_rounds_comment_in_order() {
    let repo = TestRepo::with_files(&[("a.txt", "one\n")]);
    let marks = tempfile::tempdir().unwrap();
    let go = marks.path().join("go");
    let agent = format!(
        "echo \"round $PLAIT_ROUND: ${{PLAIT_FEEDBACK:-none}}\" >> a.txt; echo ran $PLAIT_ROUND; {wait}",
        wait = until_exists(&go)
    );
    let toml = Plan::new()
        .task("a")
        .prompt("write a")
        .owns(["a.txt"])
        .exec(&agent)
        .to_toml();
    let plan = repo.plan(&toml);
    let child = spawn_run(&repo, &plan);
    wait_until("round 0 started", || repo.printed("ran 0").len() == 1);
    let run = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    for text in ["first this", "then that"] {
        let out = repo.plait(&["tell", &run, "a", "-m", text]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("hears this as its next round's comment"),
            "{}",
            stdout(&out)
        );
    }
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a = task(&repo, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["rounds"], 1, "{a}");
    let written = repo.git(&["show", &format!("plait/{run}/a:a.txt")]);
    let first = written.find("first this").unwrap();
    let then = written.find("then that").unwrap();
    assert!(written.contains("round 1: A person"), "{written}");
    assert!(first < then, "{written}");
    let told = a["told"].as_array().unwrap();
    assert_eq!(told.len(), 2);
    assert!(told
        .iter()
        .all(|t| t["way"] == "next round" && t["heard_at"].is_u64()));
    // A task that has ended is refused, naming send-back; so is a run that is not going.
    let out = repo.plait(&["tell", &run, "a", "-m", "more"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not going (finished)"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("plait send-back"), "{}", stderr(&out));
}

#[test]
fn stopping_one_of_three_tasks_lets_the_others_finish_and_keep_collects_and_judges() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")]);
    let marks = tempfile::tempdir().unwrap();
    let go = marks.path().join("go");
    let agent = format!(
        "echo \"by $PLAIT_TASK\" > $PLAIT_TASK.txt; echo ran $PLAIT_TASK; {wait}",
        wait = until_exists(&go)
    );
    let mut plan = Plan::new().set("checks", "task", ["test -s a.txt"]);
    for id in ["a", "b", "c"] {
        plan = plan
            .task(id)
            .prompt("write")
            .owns([format!("{id}.txt")])
            .exec(&agent);
    }
    let plan = repo.plan(&plan.to_toml());
    let child = spawn_run(&repo, &plan);
    wait_until("all three started", || {
        ["a", "b", "c"]
            .iter()
            .all(|id| repo.printed(&format!("ran {id}")).len() == 1)
    });
    let run = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    let out = repo.plait(&["stop", &run, "b"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("stopping b: it stays out of the merge"),
        "{}",
        stdout(&out)
    );
    let out = repo.plait(&["stop", &run, "c", "--keep"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until("b and c ended", || {
        let (b, c) = (task(&repo, "b"), task(&repo, "c"));
        b["state"] == "stopped" && c["state"] == "done"
    });
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (a, b, c) = (task(&repo, "a"), task(&repo, "b"), task(&repo, "c"));
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(b["state"], "stopped", "{b}");
    assert_eq!(b["error"], "stopped by a person (command line)", "{b}");
    assert_eq!(b["decision"]["verdict"], "reject", "{b}");
    // Kept: its work so far collected and judged by its checks.
    assert_eq!(c["state"], "done", "{c}");
    assert_eq!(c["checks"][0]["passed"], true, "{c}");
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["a.txt"], "by a\n");
    assert_eq!(merged["b.txt"], "b\n", "the stopped task stays out");
    assert_eq!(merged["c.txt"], "by c\n");
    // The run lands without the stopped task.
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn the_real_claude_code_told_mid_round_hears_it_in_its_next_request() {
    use crate::mock::claude_tools;
    use crate::support::agents::{real_claude, run_real, KEY};
    let Some(claude) = real_claude() else { return };
    let mock = MockModel::start_claude_code(KEY);
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![claude_tools::read("src/a/x.txt")]),
            Turn::Tools(vec![claude_tools::edit("src/a/x.txt", "hi", "hello there")]),
            Turn::Text("Said hello there.".into()),
        ],
    );
    mock.set_latency(Duration::from_millis(1500));
    let repo = TestRepo::with_files(&[("src/a/x.txt", "hi\n")]);
    let toml = Plan::new()
        .goal("Greet")
        .set("defaults", "timeout", "60s")
        .review_off()
        .set("agents.claude-code", "bin", claude.display().to_string())
        .set("agents.claude-code", "provider", "mock")
        .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
        .task("a")
        .prompt("Say hello in src/a/x.txt")
        .owns(["src/a/"])
        .with("agent", "claude-code")
        .to_toml();
    let ready = || mock.count("a") >= 1;
    let out = told_while(
        &repo.path,
        &ready,
        (
            "Say hello there",
            "told a: its agent hears it at its next turn",
        ),
        || run_real(&repo, &toml),
    );
    assert!(out.status.success(), "plait run failed: {}", stderr(&out));
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let bodies: Vec<String> = mock
        .requests()
        .into_iter()
        .filter(|r| r.task.as_deref() == Some("a"))
        .map(|r| r.body.to_string())
        .collect();
    assert!(
        bodies.iter().any(|b| b.contains("Say hello there")),
        "{} requests, none with the message",
        bodies.len()
    );
    let a = task(&repo, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["told"][0]["way"], "next turn", "{a}");
    assert!(a["told"][0]["heard_at"].is_u64(), "{a}");
}

#[test]
fn the_real_aider_told_mid_round_hears_it_as_its_next_rounds_comment() {
    use crate::support::agents::{real_aider, run_real, KEY};
    let Some(aider) = real_aider() else { return };
    let mock = MockModel::start_aider(KEY);
    mock.script(
        "a",
        vec![
            Turn::Text("src/a/x.txt\n```\nhello\n```\n".into()),
            Turn::Text("src/a/x.txt\n```\nhello there\n```\n".into()),
        ],
    );
    mock.set_latency(Duration::from_millis(1500));
    let repo = TestRepo::with_files(&[("src/a/x.txt", "hi\n")]);
    let toml = Plan::new()
        .goal("Greet")
        .set("defaults", "timeout", "60s")
        .review_off()
        .set("agents.aider", "bin", aider.display().to_string())
        .set("agents.aider", "provider", "mock")
        .set("agents.aider", "args", ["--edit-format", "whole"])
        .mock("openai", &mock.url(), "qwen-coder")
        .task("a")
        .prompt("Say hello in src/a/x.txt")
        .owns(["src/a/"])
        .with("agent", "aider")
        .to_toml();
    // Its first request is on its way (answered after the latency).
    let path = repo.path.clone();
    let ready = move || {
        let started = crate::support::plait_in(&path, &["status", "--json"])
            .status
            .success();
        started && {
            std::thread::sleep(Duration::from_millis(500));
            true
        }
    };
    let out = told_while(
        &repo.path,
        &ready,
        ("Say hello there", "hears this as its next round's comment"),
        || run_real(&repo, &toml),
    );
    assert!(out.status.success(), "plait run failed: {}", stderr(&out));
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    assert_eq!(mock.count("a"), 2);
    let second = mock
        .requests()
        .into_iter()
        .filter(|r| r.task.as_deref() == Some("a"))
        .nth(1)
        .unwrap()
        .body
        .to_string();
    assert!(second.contains("Say hello there"), "{second}");
    let a = task(&repo, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["rounds"], 1, "{a}");
    assert_eq!(a["told"][0]["way"], "next round", "{a}");
    let run = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a/x.txt"], "hello there\n");
}

#[test]
fn tell_and_stop_reach_tasks_held_by_a_worker_through_the_store() {
    use crate::support::pg::database_url;
    use crate::support::spread::{
        coordinator, log, project_with, stop as stop_worker, wait_for, worker,
    };
    let Some(url) = database_url() else { return };
    let marks = tempfile::tempdir().unwrap();
    let go = marks.path().join("go");
    let (repo, plan) = project_with(
        4,
        &format!(
            "f=pkg/$PLAIT_TASK.txt; echo \"round $PLAIT_ROUND: ${{PLAIT_FEEDBACK:-none}}\" >> $f; \
             echo ran $PLAIT_TASK.$PLAIT_ROUND; {wait}",
            wait = until_exists(&go)
        ),
        "",
    );
    // What the agents said they ran, from the logs of the coordinator's repository and of
    // the worker's directory, wherever the worker keeps them.
    let ran = |what: &str| {
        let mark = format!("ran {what}");
        repo.printed(&mark).len() + printed(&repo.scratch, &mark).len()
    };
    let mut coordinator = coordinator(&repo, plan.to_str().unwrap(), &url);
    // Three slots: m03 waits in the queue until one frees.
    let w1 = worker(&repo, &url, "w1", "3", "30");
    wait_until("three tasks running on the worker", || {
        (0..3).all(|k| ran(&format!("m{k:02}.0")) > 0)
    });
    let run = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    // Told: the worker's own answer comes back (a shell command hears it next round).
    let out = repo.plait(&["tell", &run, "m00", "-m", "first this"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out)
            .contains("told m00: its agent (a shell command) takes nothing while its round runs"),
        "{}",
        stdout(&out)
    );
    let out = repo.plait(&["tell", &run, "m00", "-m", "then that"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Not taken by a worker yet (every slot is busy): the one that takes it stops it before it starts.
    let out = repo.plait(&["stop", &run, "m03"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("no worker has taken it yet"),
        "{}",
        stdout(&out)
    );
    // Stopped: its agent ends now, on the worker (and m03 takes its slot, to stop at once).
    let out = repo.plait(&["stop", &run, "m01"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("stopping m01: it stays out of the merge"),
        "{}",
        stdout(&out)
    );
    // A task the run does not have is refused by the coordinator.
    let out = repo.plait(&["tell", &run, "m00~2", "-m", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("has no task `m00~2`"),
        "{}",
        stderr(&out)
    );
    let status = repo.status_json(&[&run]);
    let m00 = &status["tasks"][0];
    assert_eq!(m00["told"].as_array().unwrap().len(), 2, "{m00}");
    std::fs::write(&go, "").unwrap();
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
    assert_eq!(stop_worker(w1, &repo, "w1"), 4);
    let status = repo.status_json(&[&run]);
    let tasks = status["tasks"].as_array().unwrap();
    assert_eq!(tasks[0]["state"], "done", "{}", tasks[0]);
    assert_eq!(tasks[0]["rounds"], 1, "{}", tasks[0]);
    let told = tasks[0]["told"].as_array().unwrap();
    assert_eq!(told.len(), 2, "{}", tasks[0]);
    assert!(told.iter().all(|t| t["heard_at"].is_u64()), "{}", tasks[0]);
    assert_eq!(tasks[1]["state"], "stopped", "{}", tasks[1]);
    assert_eq!(
        tasks[1]["error"], "stopped by a person (command line)",
        "{}",
        tasks[1]
    );
    assert_eq!(tasks[2]["state"], "done", "{}", tasks[2]);
    assert_eq!(tasks[3]["state"], "stopped", "{}", tasks[3]);
    assert!(tasks[3]["started_at"].is_null(), "{}", tasks[3]);
    assert_eq!(ran("m03."), 0, "m03 never ran");
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    let m00 = &merged["pkg/m00.txt"];
    assert!(m00.contains("round 1: A person"), "{m00}");
    assert!(
        m00.find("first this").unwrap() < m00.find("then that").unwrap(),
        "{m00}"
    );
    assert_eq!(
        merged["pkg/m01.txt"], "module 1\n",
        "the stopped task stays out"
    );
    assert_eq!(merged["pkg/m02.txt"], "module 2\nround 0: none\n");
    assert_eq!(merged["pkg/m03.txt"], "module 3\n");
}
