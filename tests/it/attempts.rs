//! Best of N: a task run as several attempts (`attempts`), the one that becomes the task
//! chosen by its checks, by a command of the user's or by its reviewer; what a person,
//! the tasks after it, a send-back, a kill and the budget make of them.

use std::time::{Duration, Instant};

use plait_core::state::{RunState, TaskRecord, TaskState};
use serde_json::json;

use crate::mock::{edit, MockModel, Provider, ToolCall, Turn};
use crate::support::plan::Raw;
use crate::support::{stderr, wait_until, Plan, TestRepo};

fn repo() -> TestRepo {
    TestRepo::with_files(&[("a.txt", "one\n"), ("b.txt", "b\n")])
}

fn states(task: &TaskRecord) -> Vec<TaskState> {
    task.attempts.iter().map(|a| a.state).collect()
}

/// The file `path` on the run's merged branch (its last newline trimmed, as `git` says it).
fn merged(repo: &TestRepo, state: &RunState, path: &str) -> String {
    repo.git(&["show", &format!("plait/{}/merged:{path}", state.id)])
}

/// Runs `toml` through the library with this process's environment (the checks' `PATH`).
fn run(repo: &TestRepo, toml: &str, jobs: usize) -> RunState {
    repo.run_with_env(toml, jobs, &|k| std::env::var(k).ok())
}

#[test]
fn by_checks_the_first_attempt_to_pass_becomes_the_task_and_the_slower_one_stops() {
    let repo = repo();
    // Attempt 1 fails its check at once, attempt 2 would pass after a long while, attempt
    // 3 passes soon.
    let agent = "case $PLAIT_ATTEMPT in \
                 1) echo bad > a.txt;; \
                 2) sleep 60; echo slow > a.txt;; \
                 *) sleep 1; echo \"fast, $PLAIT_ATTEMPT of $PLAIT_ATTEMPTS\" > a.txt;; esac";
    let toml = Plan::new()
        .set("checks", "task", ["! grep -q bad a.txt"])
        .task("a")
        .prompt("write a")
        .owns(["a.txt"])
        .with("attempts", 3)
        .with("pick", "checks")
        .exec(agent)
        .task("b")
        .prompt("write b")
        .owns(["b.txt"])
        .exec("echo B > b.txt")
        .to_toml();
    let started = Instant::now();
    let state = run(&repo, &toml, 4);
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "the slow attempt was waited for: {:?}",
        started.elapsed()
    );
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Done, "{:?}", a.error);
    let pick = a.pick.as_ref().unwrap();
    assert_eq!((pick.attempt, pick.by.as_str()), (3, "checks"));
    assert_eq!(
        states(a),
        [TaskState::Failed, TaskState::Stopped, TaskState::Done]
    );
    let stopped = a.attempts[1].error.as_deref().unwrap();
    assert!(stopped.contains("attempt 3 was chosen"), "{stopped}");
    // The chosen attempt's work is the task's: its branch, its commit, its checks.
    let third = &a.attempts[2];
    assert_eq!(a.commit, third.commit);
    assert_eq!(a.checks, third.checks);
    assert_eq!(
        repo.git(&["rev-parse", &a.branch]).trim(),
        third.commit.as_deref().unwrap()
    );
    assert_eq!(third.branch, format!("plait/{}/a@3", state.id));
    assert_eq!(merged(&repo, &state, "a.txt"), "fast, 3 of 3");
    assert_eq!(merged(&repo, &state, "b.txt"), "B");
    assert!(
        plait_stages::report::attention(&state).is_empty(),
        "{:?}",
        plait_stages::report::attention(&state)
    );
}

#[test]
fn by_command_a_scorer_of_the_users_names_the_smallest_diff() {
    let repo = repo();
    // Attempt n writes 4 - n lines... but attempt 3 writes two: attempt 2's one line is the
    // smallest change.
    let agent = "case $PLAIT_ATTEMPT in \
                 1) printf '1\\n2\\n3\\n4\\n' > a.txt;; \
                 2) echo two > a.txt;; \
                 *) printf 'x\\ny\\nz\\n' > a.txt;; esac";
    // Counts each candidate's changed lines; the last line of output is the smallest's number.
    let scorer = "best=; least=; for n in $PLAIT_CANDIDATES; do \
                  eval c=\\$PLAIT_CANDIDATE_$n; \
                  lines=$(git diff --numstat $PLAIT_BASE $c | awk '{s+=$1+$2} END {print s}'); \
                  echo \"attempt $n: $lines lines\"; \
                  if [ -z \"$least\" ] || [ $lines -lt $least ]; then least=$lines; best=$n; fi; done; \
                  echo $best";
    let toml = Plan::new()
        .task("a")
        .prompt("write a")
        .owns(["a.txt"])
        .with("attempts", 3)
        .exec(agent)
        .set("pick", "by", Raw(&format!("{{ command = {:?} }}", scorer)))
        .to_toml();
    let state = run(&repo, &toml, 3);
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Done, "{:?}", a.error);
    let pick = a.pick.as_ref().unwrap();
    assert_eq!(pick.attempt, 2, "{pick:?}");
    assert_eq!(pick.by, "command");
    assert_eq!(pick.candidates, [1, 2, 3]);
    assert!(pick.note.is_none(), "{pick:?}");
    assert_eq!(merged(&repo, &state, "a.txt"), "two");
}

#[test]
fn a_person_takes_another_attempt_and_the_run_lands_it() {
    let repo = repo();
    let toml = Plan::new()
        .set("pick", "by", Raw("{ command = \"echo 1\" }"))
        .task("a")
        .prompt("write a")
        .owns(["a.txt"])
        .with("attempts", 2)
        .exec("echo \"attempt $PLAIT_ATTEMPT\" > a.txt")
        .to_toml();
    let state = run(&repo, &toml, 2);
    let run = state.id.clone();
    assert_eq!(state.task("a").unwrap().pick.as_ref().unwrap().attempt, 1);
    let out = repo.plait(&["accept", &run, "a~2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[&run]);
    assert_eq!(status["tasks"][0]["pick"]["attempt"], 2);
    assert_eq!(status["tasks"][0]["pick"]["by"], "person");
    // The merge took attempt 1: landing merges again first.
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("merging again"), "{}", stderr(&out));
    assert_eq!(repo.read("a.txt"), "attempt 2\n");
    // An id that is no attempt of the run is refused, naming the run.
    let out = repo.plait(&["accept", &run, "a~7"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("has no task `a~7`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_task_after_a_task_of_attempts_starts_from_the_chosen_one_and_a_send_back_goes_to_it_alone() {
    let repo = repo();
    let toml = Plan::new()
        .set("checks", "task", ["! grep -q bad a.txt"])
        .task("a")
        .prompt("write a")
        .owns(["a.txt"])
        .with("attempts", 2)
        .with("pick", "checks")
        .exec(
            "if [ \"$PLAIT_ROUND\" != 0 ]; then echo \"round $PLAIT_ROUND\" >> a.txt; \
               elif [ $PLAIT_ATTEMPT = 1 ]; then echo bad > a.txt; else echo good > a.txt; fi",
        )
        .task("b")
        .prompt("copy a")
        .owns(["b.txt"])
        .after(["a"])
        .exec("cp a.txt b.txt")
        .to_toml();
    let state = run(&repo, &toml, 2);
    let a = state.task("a").unwrap();
    assert_eq!(a.pick.as_ref().unwrap().attempt, 2);
    assert_eq!(merged(&repo, &state, "b.txt"), "good");
    // A send-back is a round of the task, from its chosen attempt's work.
    let run = state.id.clone();
    let out = repo.plait(&["send-back", &run, "a", "-m", "add the round"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[&run]);
    let task = &status["tasks"][0];
    assert_eq!(task["state"], "done", "{task}");
    assert_eq!(task["rounds"], 1);
    assert_eq!(task["attempts"][0]["rounds"], 0);
    assert_eq!(task["attempts"][1]["rounds"], 0);
    assert_eq!(
        repo.git(&["show", &format!("plait/{run}/a:a.txt")]),
        "good\nround 1"
    );
    // The attempts' branches are as they were.
    assert_eq!(
        repo.git(&["show", &format!("plait/{run}/a@2:a.txt")]),
        "good"
    );
}

#[test]
fn no_attempt_passing_fails_the_task_naming_each() {
    let repo = repo();
    let toml = Plan::new()
        .set("checks", "task", ["! grep -q bad a.txt"])
        .task("a")
        .prompt("write a")
        .owns(["a.txt"])
        .with("attempts", 2)
        .exec("[ $PLAIT_ATTEMPT = 1 ] && exit 3; echo bad > a.txt")
        .to_toml();
    let state = run(&repo, &toml, 2);
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Failed);
    assert!(a.pick.is_none());
    let error = a.error.as_deref().unwrap();
    assert!(error.starts_with("no attempt passed"), "{error}");
    assert!(error.contains("a~1: failed"), "{error}");
    assert!(error.contains("a~2: failed"), "{error}");
}

#[test]
fn attempts_go_on_after_a_kill_and_the_pick_is_made_on_resume() {
    let repo = repo();
    let marks = tempfile::tempdir().unwrap();
    let go = marks.path().join("go");
    // Each attempt says in its log that it started, then waits for `go`.
    let agent = format!(
        "echo started $PLAIT_ATTEMPT; n=0; until [ -e {go} ]; do sleep 0.05; \
         n=$((n+1)); [ $n -gt 2400 ] && exit 9; done; echo \"attempt $PLAIT_ATTEMPT\" > a.txt",
        go = go.display()
    );
    let toml = Plan::new()
        .task("a")
        .prompt("write a")
        .owns(["a.txt"])
        .with("attempts", 2)
        .with("pick", "checks")
        .exec(&agent)
        .to_toml();
    let plan = repo.plan(&toml);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan.to_str().unwrap(), "-j", "2"])
        .current_dir(&repo.path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("both attempts started", || {
        let mut started = repo.printed("started ");
        started.sort();
        started == ["started 1", "started 2"]
    });
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(&go, "").unwrap();
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    assert_eq!(status["tasks"][0]["attempts"].as_array().unwrap().len(), 2);
    let out = repo.plait(&["resume", &run]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[&run]);
    let task = &status["tasks"][0];
    assert_eq!(task["state"], "done", "{task}");
    let chosen = task["pick"]["attempt"].as_u64().unwrap();
    assert_eq!(
        repo.git(&["show", &format!("plait/{run}/merged:a.txt")]),
        format!("attempt {chosen}")
    );
}

#[test]
fn a_plan_with_attempts_that_cannot_be_is_refused_whole() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")]);
    let toml = Plan::new()
        .task("a")
        .prompt("p")
        .owns(["a.txt"])
        .with("attempts", 0)
        .exec("true")
        .task("b")
        .prompt("p")
        .owns(["b.txt"])
        .with("agents", ["claude-code"])
        .exec("true")
        .task("c")
        .prompt("p")
        .owns(["c.txt"])
        .with("attempts", 2)
        .with("pick", "review")
        .exec("true")
        .to_toml();
    let plan = repo.plan(&toml);
    let out = repo.plait(&["run", plan.to_str().unwrap(), "--dry-run"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    for wanted in [
        "task `a`: attempts = 0; give 1 to 20",
        "task `b` sets both `agent` and `agents`",
        "task `c` picks its attempt by review, and it has no reviewer",
    ] {
        assert!(err.contains(wanted), "{wanted}\n{err}");
    }
}

#[test]
fn a_model_judge_compares_the_attempts_and_is_asked_again_for_a_number_that_is_none() {
    const KEY: &str = "sk-pick";
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let approve = || {
        Turn::Tools(vec![ToolCall::new(
            "submit_review",
            json!({"verdict": "approve", "summary": "fine"}),
        )])
    };
    for n in 1..=3 {
        mock.script(&format!("review:a~{n}"), vec![approve()]);
    }
    mock.script(
        "pick:a",
        vec![
            Turn::Tools(vec![ToolCall::new(
                "submit_pick",
                json!({"attempt": 7, "why": "the seventh"}),
            )]),
            Turn::Tools(vec![ToolCall::new(
                "submit_pick",
                json!({"attempt": 2, "why": "the smallest change"}),
            )]),
        ],
    );
    let repo = repo();
    let toml = Plan::new()
        .provider("mock", "anthropic", &mock.url(), "K", "m")
        .set("review", "agent", "mock")
        .task("a")
        .prompt("write a")
        .owns(["a.txt"])
        .with("attempts", 3)
        .exec("echo \"attempt $PLAIT_ATTEMPT\" > a.txt")
        .to_toml();
    let state = repo.run_with_env(&toml, 3, &|k| (k == "K").then(|| KEY.to_string()));
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Done, "{:?}", a.error);
    let pick = a.pick.as_ref().unwrap();
    assert_eq!(pick.attempt, 2, "{pick:?}");
    assert_eq!(pick.why, "the smallest change");
    assert!(pick.by.starts_with("model m"), "{pick:?}");
    assert!(pick.note.as_deref().unwrap_or("").contains("7"), "{pick:?}");
    assert_eq!(merged(&repo, &state, "a.txt"), "attempt 2");
    let picks: Vec<String> = mock
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .filter(|b| b.contains("Pick among the attempts of task: a"))
        .collect();
    assert_eq!(picks.len(), 2);
    for n in 1..=3 {
        assert!(picks[0].contains(&format!("Attempt {n}")), "{}", picks[0]);
    }
    assert!(picks[1].contains("not a candidate"), "{}", picks[1]);
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
    // The judge's and every attempt's usage are the task's.
    assert!(
        a.usage.as_ref().is_some_and(|u| u.requests >= 5),
        "{:?}",
        a.usage
    );
}

#[test]
fn a_spent_budget_starts_no_more_attempts() {
    const KEY: &str = "sk-budget";
    let mock = MockModel::start(Provider::Anthropic, KEY);
    for n in 1..=3 {
        mock.script(
            &format!("a~{n}"),
            vec![
                Turn::Tools(vec![edit::view("a.txt")]),
                Turn::Text("done".into()),
            ],
        );
    }
    let repo = repo();
    repo.max_cost.set(Some(0.0001));
    let toml = Plan::new()
        .provider("mock", "anthropic", &mock.url(), "K", "claude-sonnet-4-5")
        .review_off()
        .task("a")
        .prompt("write a")
        .owns(["a.txt"])
        .with("attempts", 3)
        .with("agent", "mock")
        .to_toml();
    let state = repo.run_with_env(&toml, 1, &|k| (k == "K").then(|| KEY.to_string()));
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Failed, "{:?}", a.error);
    assert_eq!(
        states(a),
        [TaskState::Stopped, TaskState::Stopped, TaskState::Stopped]
    );
    for later in &a.attempts[1..] {
        let error = later.error.as_deref().unwrap();
        assert!(error.starts_with("not started: "), "{error}");
        assert!(later.started_at.is_none());
    }
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn a_model_agents_attempts_are_told_their_number_and_sampled_apart() {
    for provider in [Provider::Anthropic, Provider::OpenAi] {
        const KEY: &str = "sk-apart";
        let mock = MockModel::start(provider, KEY);
        for n in 1..=2 {
            mock.script(
                &format!("a~{n}"),
                vec![
                    Turn::Tools(vec![edit::str_replace("a.txt", "one", &format!("try {n}"))]),
                    Turn::Text("done".into()),
                ],
            );
        }
        let kind = if provider == Provider::Anthropic {
            "anthropic"
        } else {
            "openai"
        };
        let repo = repo();
        let toml = Plan::new()
            .provider("mock", kind, &mock.url(), "K", "m")
            .review_off()
            .task("a")
            .prompt("write a")
            .owns(["a.txt"])
            .with("attempts", 2)
            .with("pick", Raw("{ command = \"echo 2\" }"))
            .with("agent", "mock")
            .to_toml();
        let state = repo.run_with_env(&toml, 2, &|k| (k == "K").then(|| KEY.to_string()));
        let a = state.task("a").unwrap();
        assert_eq!(a.pick.as_ref().map(|p| p.attempt), Some(2), "{:?}", a.error);
        assert_eq!(merged(&repo, &state, "a.txt"), "try 2");
        let first = |n: u32| {
            mock.requests()
                .into_iter()
                .find(|r| r.task.as_deref() == Some(&format!("a~{n}")))
                .unwrap()
                .body
        };
        let (one, two) = (first(1), first(2));
        assert!(one.to_string().contains("This is attempt 1 of 2"), "{one}");
        assert!(two.to_string().contains("This is attempt 2 of 2"), "{two}");
        match provider {
            Provider::Anthropic => {
                assert!(one.get("temperature").is_none(), "{one}");
                assert_eq!(two["temperature"], 0.75);
            }
            Provider::OpenAi => {
                assert!(one.get("seed").is_none(), "{one}");
                assert_eq!(two["seed"], 2);
            }
        }
        assert!(mock.problems().is_empty(), "{:?}", mock.problems());
    }
}

#[test]
fn one_task_tried_by_the_real_claude_code_and_the_real_aider() {
    use crate::mock::claude_tools;
    use crate::support::agents::{real_aider, real_claude, run_real, sample, KEY};
    let (Some(claude), Some(aider)) = (real_claude(), real_aider()) else {
        return;
    };
    let repo = sample();
    let cc = MockModel::start_claude_code(KEY);
    let ai = MockModel::start_aider(KEY);
    cc.script(
        "a~1",
        claude_tools::read_and_edit("src/a/x.txt", "hi", "hello", "Said hello."),
    );
    ai.script(
        "a~2",
        vec![Turn::Text("src/a/x.txt\n```\nhullo\n```\n".into())],
    );
    let toml = Plan::new()
        .goal("Greet properly")
        .set("defaults", "timeout", "60s")
        .set("defaults", "max_turns", 7)
        .review_off()
        .set("agents.claude-code", "bin", claude.display().to_string())
        .set("agents.claude-code", "provider", "cc")
        .set("agents.aider", "bin", aider.display().to_string())
        .set("agents.aider", "provider", "ai")
        .set("agents.aider", "args", ["--edit-format", "whole"])
        .provider(
            "cc",
            "anthropic",
            &cc.url(),
            "PLAIT_TEST_KEY",
            "claude-sonnet-4-5",
        )
        .provider("ai", "openai", &ai.url(), "PLAIT_TEST_KEY", "qwen-coder")
        .set("pick", "by", Raw("{ command = \"echo 2\" }"))
        .task("a")
        .prompt("Say hello in src/a/x.txt")
        .owns(["src/a/"])
        .with("agents", ["claude-code", "aider"])
        .to_toml();
    let out = run_real(&repo, &toml);
    let status = repo.status_json(&[]);
    let logs: Vec<String> = (0..2)
        .map(|n| {
            let log = status["tasks"][0]["attempts"][n]["log"]
                .as_str()
                .unwrap_or("");
            std::fs::read_to_string(log).unwrap_or_default()
        })
        .collect();
    assert!(
        out.status.success(),
        "plait run failed: {}\n{logs:#?}\n{:?}\n{:?}",
        stderr(&out),
        cc.requests()
            .iter()
            .map(|r| (&r.task, &r.path, r.status))
            .collect::<Vec<_>>(),
        ai.requests()
            .iter()
            .map(|r| (&r.task, &r.path, r.status))
            .collect::<Vec<_>>()
    );
    assert!(cc.problems().is_empty(), "{:#?}", cc.problems());
    assert!(ai.problems().is_empty(), "{:#?}", ai.problems());
    let a = &status["tasks"][0];
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["pick"]["attempt"], 2, "{a}");
    assert_eq!(a["attempts"][0]["state"], "done", "{a}");
    assert_eq!(a["attempts"][1]["state"], "done", "{a}");
    assert!(cc.count("a~1") >= 1);
    assert_eq!(ai.count("a~2"), 1);
    let run = status["id"].as_str().unwrap();
    assert_eq!(
        repo.git(&["show", &format!("plait/{run}/a@1:src/a/x.txt")]),
        "hello"
    );
    assert_eq!(
        repo.git(&["show", &format!("plait/{run}/merged:src/a/x.txt")]),
        "hullo"
    );
    // What both used is the task's.
    assert!(a["usage"]["requests"].as_u64().unwrap() >= 2, "{a}");
}

/// Red is red: a check that fails on the base too still fails an attempt. The attempt
/// that gets it wrong ends first, and the one that makes the check pass is chosen; when
/// none does, the task fails naming each attempt's failure.
#[test]
fn by_checks_an_attempt_red_as_on_the_base_is_never_chosen() {
    let repo = repo();
    // The check is red on the base (a.txt holds no "fixed"): the task's job is to make it pass.
    let check = ["grep -q fixed a.txt"];
    let agent = "case $PLAIT_ATTEMPT in \
                 1) echo wrong > a.txt;; \
                 *) sleep 2; echo fixed > a.txt;; esac";
    let toml = Plan::new()
        .set("checks", "task", check)
        .task("a")
        .prompt("make the check pass")
        .owns(["a.txt"])
        .with("attempts", 2)
        .with("pick", "checks")
        .exec(agent)
        .to_toml();
    let state = run(&repo, &toml, 4);
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Done, "{:?}", a.error);
    assert_eq!(a.pick.as_ref().unwrap().attempt, 2);
    assert_eq!(merged(&repo, &state, "a.txt"), "fixed");
    // No attempt gets it right: none is taken.
    let toml = Plan::new()
        .set("checks", "task", check)
        .task("a")
        .prompt("make the check pass")
        .owns(["a.txt"])
        .with("attempts", 2)
        .with("pick", "checks")
        .exec("echo \"wrong $PLAIT_ATTEMPT\" > a.txt")
        .to_toml();
    let state = run(&repo, &toml, 4);
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Failed);
    let error = a.error.as_deref().unwrap();
    assert!(
        error.contains("no attempt passed")
            && error.contains("a~1: ")
            && error.contains("`grep -q fixed a.txt` failed, as it also does on the base"),
        "{error}"
    );
}

#[test]
fn with_no_attempt_green_least_red_takes_the_one_with_fewest_failing_checks_still_red() {
    let repo = repo();
    // Two checks; attempt 2 gets one of them right, attempts 1 and 3 none.
    let checks = ["grep -q left a.txt", "grep -q right a.txt"];
    let agent = "case $PLAIT_ATTEMPT in 2) echo left > a.txt;; *) echo \"none $PLAIT_ATTEMPT\" > a.txt;; esac";
    let toml = |fallback: Option<&str>| {
        let plan = Plan::new().set("checks", "task", checks);
        let plan = match fallback {
            Some(f) => plan.set("pick", "fallback", f),
            None => plan,
        };
        plan.task("a")
            .prompt("make both checks pass")
            .owns(["a.txt"])
            .with("attempts", 3)
            .with("pick", "checks")
            .exec(agent)
            .to_toml()
    };
    let state = run(&repo, &toml(None), 4);
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Failed);
    assert!(a.pick.is_none());
    let state = run(&repo, &toml(Some("least-red")), 4);
    let a = state.task("a").unwrap();
    let pick = a.pick.as_ref().expect("a pick");
    assert_eq!(
        (pick.attempt, pick.by.as_str()),
        (2, "least-red"),
        "{pick:?}"
    );
    assert!(pick.why.contains("fewest failing (1 of 2)"), "{}", pick.why);
    // Still red, and said so.
    assert!(!a.checks_green());
    assert_eq!(merged(&repo, &state, "a.txt"), "left");
}
