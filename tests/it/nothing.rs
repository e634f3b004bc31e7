//! A declared "nothing to do": a model agent that, having looked, finds nothing to change
//! calls `nothing_to_do` with its reason and ends done without changes and without needing
//! a person (the run exits 0, its reason in the status); one that changes nothing without
//! saying so still needs attention (exit 1), as before.

use serde_json::json;

use crate::mock::{MockModel, Provider, ToolCall, Turn};
use crate::support::{stderr, stdout, Plan, TestRepo};

const KEY: &str = "sk-test-secret-0123456789";

/// Two files, only one of which holds the copyright line the task fixes.
fn repo() -> TestRepo {
    TestRepo::with_files(&[
        ("a.py", "# Copyright (c) 2020\nx = 1\n"),
        ("b.py", "y = 2\n"),
    ])
}

/// The plan: task `a` fixes its line, task `b` (owning `b.py`) is asked the same.
fn plan(mock: &MockModel) -> String {
    Plan::new()
        .goal("Capitalise the copyright mark")
        .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
        .set("providers.mock", "max_tokens", 1024)
        .review_off()
        .set("defaults", "agent", "mock")
        .set("defaults", "timeout", "60s")
        .task("a")
        .prompt("Capitalise the copyright mark in a.py")
        .owns(["/a.py"])
        .task("b")
        .prompt("Capitalise the copyright mark in b.py")
        .owns(["/b.py"])
        .to_toml()
}

fn view(path: &str) -> ToolCall {
    ToolCall::new(
        "str_replace_based_edit_tool",
        json!({"command": "view", "path": path}),
    )
}

fn fix_a() -> Vec<Turn> {
    vec![
        Turn::Tools(vec![view("a.py")]),
        Turn::Tools(vec![ToolCall::new(
            "str_replace_based_edit_tool",
            json!({"command": "str_replace", "path": "a.py", "old_str": "(c)", "new_str": "(C)"}),
        )]),
        Turn::Text("done".into()),
    ]
}

/// Runs the plan with task `b` answering `b_turns`, through the real binary: the repository,
/// the mock and plait's output.
fn run_with(b_turns: Vec<Turn>) -> (TestRepo, MockModel, std::process::Output) {
    let repo = repo();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script("a", fix_a());
    mock.script("b", b_turns);
    let plan = repo.plan(&plan(&mock));
    let out = repo.plait_env(&["run", plan.to_str().unwrap()], &[("PLAIT_TEST_KEY", KEY)]);
    (repo, mock, out)
}

#[test]
fn a_declared_nothing_to_do_ends_done_and_needs_no_one() {
    let (repo, mock, out) = run_with(vec![
        Turn::Tools(vec![view("b.py")]),
        Turn::Tools(vec![ToolCall::new(
            "nothing_to_do",
            json!({"reason": "b.py has no copyright line"}),
        )]),
    ]);
    assert_eq!(mock.problems(), Vec::<String>::new());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let b = status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "b")
        .unwrap();
    assert_eq!(b["state"], "done");
    assert_eq!(b["nothing_to_do"], "b.py has no copyright line");
    let text = stdout(&repo.plait(&["status"]));
    assert!(
        text.contains("nothing to do: b.py has no copyright line"),
        "{text}"
    );
    assert!(!text.contains("needs attention"), "{text}");
    let run = status["id"].as_str().unwrap();
    let review = stdout(&repo.plait(&["review", run]));
    assert!(
        review.contains("nothing to do, its agent said: b.py has no copyright line"),
        "{review}"
    );
    // The round ended at the declaration: no request after it.
    assert_eq!(mock.count("b"), 2);
}

#[test]
fn changing_nothing_without_saying_so_still_needs_attention() {
    let (repo, mock, out) = run_with(vec![
        Turn::Tools(vec![view("b.py")]),
        Turn::Text("there is no copyright line".into()),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&repo.plait(&["status"]));
    assert!(
        text.contains("no changes: the agent changed nothing"),
        "{text}"
    );
    // The tool was offered all the same.
    let offered = mock
        .requests()
        .into_iter()
        .find(|r| r.task.as_deref() == Some("b"))
        .map(|r| r.body["tools"].to_string())
        .unwrap_or_default();
    assert!(offered.contains("nothing_to_do"), "{offered}");
}
