//! Planning by a manager model (`plait plan --goal`, `plait run --goal`) against the mock
//! model server: a valid plan, corrections, a plan that never becomes valid.

use std::fs;

use serde_json::{json, Value};

use crate::mock::{edit, MockModel, Provider, ToolCall, Turn};
use crate::support::{stderr, stdout, TestRepo};

const KEY: &str = "sk-test-manager-0123456789";

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("src/a.py", "A = 1\n"),
        ("src/b.py", "B = 1\n"),
        ("docs/guide.md", "guide\n"),
        ("README.md", "The project's readme, for the manager.\n"),
    ])
}

fn submit(tasks: Value) -> Turn {
    Turn::Tools(vec![ToolCall::new(
        "submit_plan",
        json!({ "tasks": tasks }),
    )])
}

fn good_tasks() -> Value {
    json!([
        {"id": "a", "owns": ["/src/a.py"], "prompt": "Set A to 2 in src/a.py"},
        {"id": "b", "owns": ["/src/b.py"], "prompt": "Set B to 2 in src/b.py", "context": ["docs/"]},
    ])
}

fn env(mock: &MockModel) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", mock.url()),
        ("ANTHROPIC_API_KEY", KEY.to_string()),
    ]
}

fn plait(repo: &TestRepo, mock: &MockModel, args: &[&str]) -> std::process::Output {
    let env = env(mock);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    repo.plait_env(args, &env)
}

/// The manager's requests, in order.
fn manager_requests(mock: &MockModel) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .filter(|r| r.task.as_deref() == Some("manager"))
        .map(|r| r.body)
        .collect()
}

#[test]
fn a_valid_plan_is_written_with_the_files_no_task_owns() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script("manager", vec![submit(good_tasks())]);
    let out_path = repo.scratch.join("plan.toml");
    let out = plait(
        &repo,
        &mock,
        &[
            "plan",
            "--goal",
            "Set every constant to 2",
            "--include",
            "README.md",
            "--exec",
            "sed -i 's/1/2/' $(cat \"$PLAIT_OWNED\")",
            "-o",
            out_path.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let text = fs::read_to_string(&out_path).unwrap();
    let plan = plait_plan::parse(&text, &out_path).unwrap();
    assert_eq!(plan.goal, "Set every constant to 2");
    assert_eq!(plan.tasks.len(), 2);
    assert_eq!(plan.tasks[1].context, Some(vec!["docs/".to_string()]));
    assert!(
        text.contains("2 tracked file(s) no task owns")
            && text.contains("#   README.md")
            && text.contains("#   docs/guide.md"),
        "{text}"
    );
    assert!(
        stderr(&out).contains("no task owns: README.md, docs/guide.md"),
        "{}",
        stderr(&out)
    );

    // What the manager saw: the goal, files with sizes by directory, the included file.
    let requests = manager_requests(&mock);
    assert_eq!(requests.len(), 1);
    let first = requests[0]["messages"][0]["content"].to_string();
    assert!(first.contains("Set every constant to 2"), "{first}");
    assert!(
        first.contains("src/ (2 files, 12 bytes)") && first.contains("a.py 6"),
        "{first}"
    );
    assert!(
        first.contains("The project's readme, for the manager."),
        "{first}"
    );
    assert!(
        !first.contains("guide\\n"),
        "only --include files are shown: {first}"
    );
    assert_eq!(
        requests[0]["tool_choice"],
        json!({"type": "tool", "name": "submit_plan"})
    );

    // The plan runs as written.
    let out = repo.plait(&["run", out_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a.py"], "A = 2\n");
    assert_eq!(merged["src/b.py"], "B = 2\n");
}

#[test]
fn overlapping_ownership_and_globs_matching_nothing_go_back_to_the_manager() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "manager",
        vec![
            submit(json!([
                {"id": "a", "owns": ["src/"], "prompt": "Change src"},
                {"id": "b", "owns": ["/src/b.py"], "prompt": "Change b"},
            ])),
            submit(json!([
                {"id": "a", "owns": ["/src/a.py"], "prompt": "Change a"},
                {"id": "b", "owns": ["/lib/b.py"], "prompt": "Change b"},
            ])),
            submit(good_tasks()),
        ],
    );
    let out_path = repo.scratch.join("plan.toml");
    let out = plait(
        &repo,
        &mock,
        &[
            "plan",
            "--goal",
            "Set every constant to 2",
            "-o",
            out_path.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let requests = manager_requests(&mock);
    assert_eq!(requests.len(), 3);
    let said = |i: usize| {
        let messages = requests[i]["messages"].as_array().unwrap();
        messages.last().unwrap()["content"][0].clone()
    };
    let second = said(1);
    assert_eq!(second["type"], "tool_result");
    assert_eq!(second["is_error"], true);
    let text = second["content"].to_string();
    assert!(
        text.contains("tasks `a` and `b` both own 1 file: src/b.py"),
        "{text}"
    );
    let third = said(2)["content"].to_string();
    assert!(
        third.contains("glob `/lib/b.py` matches no tracked file"),
        "{third}"
    );
    assert!(stderr(&out).contains("in 3 answer(s)"), "{}", stderr(&out));
    let plan = plait_plan::load(&out_path).unwrap();
    assert_eq!(plan.tasks[0].owns, vec!["/src/a.py".to_string()]);
    assert!(matches!(
        plan.defaults.agent,
        Some(plait_plan::AgentSpec::Named(ref n)) if n == "anthropic"
    ));
}

#[test]
fn a_plan_that_never_becomes_valid_fails_clearly_and_nothing_is_written() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let bad = json!([{"id": "merged", "owns": ["/nothing/here.py"], "prompt": "x"}]);
    mock.script(
        "manager",
        vec![submit(bad.clone()), submit(bad.clone()), submit(bad)],
    );
    let out_path = repo.scratch.join("plan.toml");
    let out = plait(
        &repo,
        &mock,
        &[
            "plan",
            "--goal",
            "Do it",
            "--corrections",
            "2",
            "-o",
            out_path.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("still not valid after 3 answer(s)"), "{err}");
    assert!(
        err.contains("reserved") && err.contains("matches no tracked file"),
        "{err}"
    );
    assert!(!out_path.exists());
    assert_eq!(manager_requests(&mock).len(), 3);
    assert!(repo.branches().iter().all(|b| !b.starts_with("plait/")));
}

#[test]
fn run_goal_plans_and_runs_and_asks_unless_yes() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script("manager", vec![submit(good_tasks())]);

    // No terminal to ask on and no --yes: refused before the manager is asked.
    let out = plait(&repo, &mock, &["run", "--goal", "Set every constant to 2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert_eq!(manager_requests(&mock).len(), 0);

    for (task, file, old) in [("a", "src/a.py", "A = 1"), ("b", "src/b.py", "B = 1")] {
        let new = old.replace('1', "2");
        mock.script(
            task,
            vec![
                Turn::Tools(vec![edit::str_replace(file, old, &new)]),
                Turn::Text("done".into()),
            ],
        );
        let approve = ToolCall::new(
            "submit_review",
            json!({"verdict": "approve", "summary": "ok"}),
        );
        mock.script(&format!("review:{task}"), vec![Turn::Tools(vec![approve])]);
    }
    let out = plait(
        &repo,
        &mock,
        &["run", "--goal", "Set every constant to 2", "--yes"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let err = stderr(&out);
    assert!(err.contains("the manager planned 2 task(s)"), "{err}");
    let run = stdout(&out).trim().to_string();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a.py"], "A = 2\n");
    assert_eq!(merged["src/b.py"], "B = 2\n");
    let status = repo.status_json(&[]);
    assert_eq!(status["goal"], "Set every constant to 2");
    // The manager's plan and transcript are kept; the key is in neither.
    let plans = repo.path.join(".git/plait/plans");
    let kept: Vec<String> = fs::read_dir(&plans)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        kept.iter().any(|n| n.ends_with(".toml")) && kept.iter().any(|n| n.ends_with(".jsonl")),
        "{kept:?}"
    );
    repo.assert_not_written(KEY);
}

#[test]
fn an_openai_compatible_manager_plans_too() {
    let repo = sample();
    let mock = MockModel::start(Provider::OpenAi, KEY);
    mock.script("manager", vec![submit(good_tasks())]);
    let out_path = repo.scratch.join("plan.toml");
    let url = mock.url();
    let out = repo.plait_env(
        &[
            "plan",
            "--goal",
            "Set every constant to 2",
            "--manager",
            "openai",
            "--manager-model",
            "gpt-4.1-mini",
            "-o",
            out_path.to_str().unwrap(),
        ],
        &[("OPENAI_BASE_URL", &url), ("OPENAI_API_KEY", KEY)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let requests = manager_requests(&mock);
    assert_eq!(requests[0]["model"], "gpt-4.1-mini");
    assert_eq!(
        requests[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "submit_plan"}})
    );
    let plan = plait_plan::load(&out_path).unwrap();
    assert_eq!(plan.tasks.len(), 2);

    // Without a key: a clear error naming the variable, before any request.
    let out = repo.plait_env(
        &["plan", "--goal", "x", "--manager", "openai"],
        &[("OPENAI_BASE_URL", &url), ("OPENAI_API_KEY", "")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("OPENAI_API_KEY"), "{}", stderr(&out));
    assert_eq!(manager_requests(&mock).len(), 1);
}

#[test]
fn the_manager_orders_tasks_with_after_and_a_cycle_goes_back_to_it() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "manager",
        vec![
            submit(json!([
                {"id": "a", "owns": ["/src/a.py"], "prompt": "p", "after": ["b"]},
                {"id": "b", "owns": ["/src/b.py"], "prompt": "p", "after": ["a"]},
            ])),
            submit(json!([
                {"id": "a", "owns": ["/src/a.py"], "prompt": "Define A"},
                {"id": "b", "owns": ["/src/b.py"], "prompt": "Use A", "after": ["a"]},
            ])),
        ],
    );
    let out_path = repo.scratch.join("plan.toml");
    let out = plait(
        &repo,
        &mock,
        &[
            "plan",
            "--goal",
            "g",
            "--exec",
            "true",
            "-o",
            out_path.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let requests = manager_requests(&mock);
    assert_eq!(requests.len(), 2);
    let system = requests[0]["system"].to_string();
    assert!(system.contains("give a task `after`"), "{system}");
    let schema = requests[0]["tools"][0]["input_schema"].to_string();
    assert!(schema.contains("\"after\""), "{schema}");
    let correction = requests[1]["messages"].to_string();
    assert!(correction.contains("in a circle"), "{correction}");
    let plan = plait_plan::parse(&fs::read_to_string(&out_path).unwrap(), &out_path).unwrap();
    assert_eq!(plan.tasks[1].after, Some(vec!["a".to_string()]));
}

#[test]
fn the_manager_may_give_a_risky_task_attempts() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "manager",
        vec![
            submit(json!([
                {"id": "a", "owns": ["/src/a.py"], "prompt": "p", "attempts": 9},
                {"id": "b", "owns": ["/src/b.py"], "prompt": "p"},
            ])),
            submit(json!([
                {"id": "a", "owns": ["/src/a.py"], "prompt": "The hard one", "attempts": 3},
                {"id": "b", "owns": ["/src/b.py"], "prompt": "Routine", "attempts": 1},
            ])),
        ],
    );
    let out_path = repo.scratch.join("plan.toml");
    let args = ["plan", "--goal", "g", "--exec", "true", "-o"];
    let mut args = args.to_vec();
    args.push(out_path.to_str().unwrap());
    let out = plait(&repo, &mock, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let requests = manager_requests(&mock);
    assert_eq!(requests.len(), 2);
    let schema = requests[0]["tools"][0]["input_schema"].to_string();
    assert!(schema.contains("\"attempts\""), "{schema}");
    let correction = requests[1]["messages"].to_string();
    assert!(
        correction.contains("`attempts` must be a whole number from 1 to 5"),
        "{correction}"
    );
    let plan = plait_plan::parse(&fs::read_to_string(&out_path).unwrap(), &out_path).unwrap();
    assert_eq!(plan.tasks[0].attempts, Some(3));
    assert_eq!(plan.tasks[1].attempts, None);
}
