//! Every role on an agent CLI: Claude Code (the real CLI against the mock model server)
//! and any program answering in JSON as reviewer, with no key for plait itself.

use serde_json::{json, Value};

use crate::mock::{claude_tools, MockModel, ToolCall, Turn};
use crate::support::agents::{login_home, plait_on_login, real_claude, run_real, KEY};
use crate::support::fixtures::wide;
use crate::support::{stderr, task_json, Plan, TestRepo};

fn verdict(verdict: &str, summary: &str, comments: Value) -> Turn {
    Turn::Tools(vec![ToolCall::new(
        "StructuredOutput",
        json!({"verdict": verdict, "summary": summary, "comments": comments}),
    )])
}

#[test]
fn claude_code_reviews_claude_code_workers_by_default() {
    let Some(claude) = real_claude() else { return };
    let repo = TestRepo::with_files(&[
        ("src/a/x.txt", "hi\n"),
        ("src/b/y.txt", "yo\n"),
        ("src/c/z.txt", "hey\n"),
    ]);
    let mock = MockModel::start_claude_code(KEY);
    mock.script(
        "a",
        claude_tools::read_and_edit("src/a/x.txt", "hi", "hello", "Said hello."),
    );
    mock.script("review:a", vec![verdict("approve", "Greets.", json!([]))]);
    // b is sent back once with a comment, then approved.
    mock.script(
        "b",
        vec![
            Turn::Tools(vec![claude_tools::read("src/b/y.txt")]),
            Turn::Tools(vec![claude_tools::edit("src/b/y.txt", "yo", "hey")]),
            Turn::Text("Said hey.".into()),
            Turn::Tools(vec![claude_tools::read("src/b/y.txt")]),
            Turn::Tools(vec![claude_tools::edit("src/b/y.txt", "hey", "hey there")]),
            Turn::Text("Said hey there.".into()),
        ],
    );
    mock.script(
        "review:b",
        vec![
            verdict(
                "request_changes",
                "Too short.",
                json!([{"path": "src/b/y.txt", "body": "say hey there"}]),
            ),
            verdict("approve", "Better.", json!([])),
        ],
    );
    mock.script(
        "c",
        claude_tools::read_and_edit("src/c/z.txt", "hey", "go away", "Done."),
    );
    mock.script("review:c", vec![verdict("reject", "Rude.", json!([]))]);
    // No [review]: the workers' own kind reviews them.
    let toml = Plan::new()
        .goal("Greet properly")
        .set("defaults", "agent", "claude-code")
        .set("defaults", "timeout", "60s")
        .set("agents.claude-code", "bin", claude.display().to_string())
        .set("agents.claude-code", "provider", "mock")
        .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
        .task("a")
        .prompt("Say hello in src/a/x.txt")
        .owns(["src/a/"])
        .task("b")
        .prompt("Say hey in src/b/y.txt")
        .owns(["src/b/"])
        .task("c")
        .prompt("Greet in src/c/z.txt")
        .owns(["src/c/"])
        .to_toml();
    let out = run_real(&repo, &toml);
    let status = repo.status_json(&[]);
    assert!(
        mock.problems().is_empty(),
        "{:#?}\n{}",
        mock.problems(),
        stderr(&out)
    );
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["review"]["verdict"], "approve", "{a}");
    let by = a["review"]["by"].as_str().unwrap();
    assert!(by.starts_with("claude-code"), "{by}");
    // The review's tokens count with the task's.
    assert!(
        a["review"]["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{a}"
    );

    let b = task_json(&status, "b");
    assert_eq!(b["state"], "done", "{b}");
    assert_eq!(b["review"]["verdict"], "approve", "{b}");
    assert_eq!(b["rounds"], 1, "{b}");
    // The comment reached the worker's second round.
    let asked: Vec<String> = mock
        .requests()
        .into_iter()
        .filter(|r| r.task.as_deref() == Some("b"))
        .map(|r| r.body.to_string())
        .collect();
    assert!(
        asked.iter().any(|b| b.contains("say hey there")),
        "{asked:#?}"
    );

    let c = task_json(&status, "c");
    assert_eq!(c["state"], "rejected", "{c}");
    let run = status["id"].as_str().unwrap();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a/x.txt"], "hello\n");
    assert_eq!(merged["src/b/y.txt"], "hey there\n");
    assert_eq!(
        merged["src/c/z.txt"], "hey\n",
        "a rejection stays out of the merge"
    );
    // `plait review` says who reviewed.
    let review = repo.plait(&["review", run]);
    let text = String::from_utf8_lossy(&review.stdout);
    assert!(text.contains("claude-code"), "{text}");
}

#[test]
fn a_cli_reviewer_answers_in_json_and_its_garbage_fails_the_review() {
    for (script, verdict, note) in [
        (
            r#"echo thinking...; echo '{"verdict": "approve", "summary": "fine"}'"#,
            "approve",
            None,
        ),
        (
            "echo this is not a verdict",
            "request_changes",
            Some("no JSON object"),
        ),
        (
            r#"echo '{"verdict": "maybe", "summary": "?"}'"#,
            "request_changes",
            Some("unknown verdict `maybe`"),
        ),
        (
            // The program writes its answer to the file plait names.
            r#"printf '{"verdict": "reject", "summary": "no"}' > "$PLAIT_ANSWER"; echo done"#,
            "reject",
            None,
        ),
    ] {
        let repo = TestRepo::with_files(&[("src/a/x.txt", "hi\n")]);
        let toml = Plan::new()
            .exec_all("echo hello > src/a/x.txt")
            .set("review", "rounds", 0)
            .set("review.agent", "cli", ["sh", "-c", script])
            .set("review.agent", "answer", "json")
            .task("a")
            .owns(["src/a/"])
            .to_toml();
        let plan = repo.plan(&toml);
        let out = repo.plait(&["run", plan.to_str().unwrap()]);
        let status = repo.status_json(&[]);
        let a = task_json(&status, "a");
        assert_eq!(a["review"]["verdict"], verdict, "{a}\n{}", stderr(&out));
        assert_eq!(a["review"]["by"], "cli sh", "{a}");
        match note {
            Some(note) => {
                let said = a["review"]["note"].as_str().unwrap();
                assert!(
                    said.contains(note) && said.contains("counted as request_changes"),
                    "{said}"
                );
            }
            None => assert!(a["review"]["note"].is_null(), "{a}"),
        }
    }
}

#[test]
fn a_cli_reviewer_without_answer_json_is_a_plan_error() {
    let repo = TestRepo::with_files(&[("src/a/x.txt", "hi\n")]);
    let plan = repo.plan(
        "[defaults]\nagent = { exec = \"true\" }\n[review]\nagent = { cli = [\"sh\", \"-c\", \"true\"] }\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"src/a/\"]\n",
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("[review]") && err.contains("answer = \"json\""),
        "{err}"
    );
}

#[test]
fn claude_code_plans_on_a_login_and_its_overlapping_plan_is_corrected() {
    let Some(claude) = real_claude() else { return };
    let repo = TestRepo::with_files(&[
        ("src/a.py", "A = 1\n"),
        ("src/b.py", "B = 1\n"),
        ("README.md", "readme\n"),
    ]);
    let mock = MockModel::start_claude_code(KEY);
    let plan_of = |tasks: Value| {
        Turn::Tools(vec![ToolCall::new(
            "StructuredOutput",
            json!({ "tasks": tasks }),
        )])
    };
    mock.script(
        "manager",
        vec![
            plan_of(json!([
                {"id": "a", "owns": ["src/"], "prompt": "Set A to 2 in src/a.py"},
                {"id": "b", "owns": ["/src/b.py"], "prompt": "Set B to 2 in src/b.py"},
            ])),
            plan_of(json!([
                {"id": "a", "owns": ["/src/a.py"], "prompt": "Set A to 2 in src/a.py"},
                {"id": "b", "owns": ["/src/b.py"], "prompt": "Set B to 2 in src/b.py"},
            ])),
        ],
    );
    let home = login_home();
    let bin = claude.parent().unwrap().display().to_string();
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
    let out_path = repo.scratch.join("plan.toml");
    // No --manager and no key: Claude Code, found on PATH, plans.
    let out = plait_on_login(
        &repo,
        &[
            "plan",
            "--goal",
            "Set every constant to 2",
            "-o",
            out_path.to_str().unwrap(),
        ],
        home.path(),
        &mock.url(),
        &[("PATH", &path)],
    );
    assert!(
        out.status.success(),
        "{}\n{:#?}",
        stderr(&out),
        mock.problems()
    );
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let err = stderr(&out);
    assert!(
        err.contains("claude-code") && err.contains("in 2 answer(s)"),
        "{err}"
    );
    // The second question held what was wrong with the first answer.
    let asked: Vec<String> = mock
        .requests()
        .into_iter()
        .filter(|r| r.task.as_deref() == Some("manager"))
        .map(|r| r.body.to_string())
        .collect();
    assert!(
        asked
            .iter()
            .any(|b| b.contains("both own 1 file: src/b.py")),
        "{asked:#?}"
    );
    let plan = plait_plan::load(&out_path).unwrap();
    assert_eq!(plan.tasks.len(), 2);
    assert_eq!(plan.tasks[0].owns, vec!["/src/a.py".to_string()]);
    assert!(matches!(
        plan.defaults.agent,
        Some(plait_plan::AgentSpec::Named(ref n)) if n == "claude-code"
    ));
}

#[test]
fn supervisors_can_be_claude_code() {
    let Some(claude) = real_claude() else { return };
    let mock = MockModel::start_claude_code(KEY);
    mock.script(
        "review:group-1",
        vec![verdict("approve", "consistent", json!([]))],
    );
    mock.script(
        "review:group-2",
        vec![verdict("reject", "t04 is wrong", json!([]))],
    );
    let (repo, plan) = wide(4);
    let toml = plan
        .set("defaults", "timeout", "60s")
        .set("groups", "count", 2)
        .set("groups", "review", "claude-code")
        .set("groups", "rounds", 0)
        .set("agents.claude-code", "bin", claude.display().to_string())
        .set("agents.claude-code", "provider", "mock")
        .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
        .to_toml();
    let out = run_real(&repo, &toml);
    assert!(
        mock.problems().is_empty(),
        "{:#?}\n{}",
        mock.problems(),
        stderr(&out)
    );
    let status = repo.status_json(&[]);
    let groups = status["groups"].as_array().unwrap();
    assert_eq!(groups[0]["review"]["verdict"], "approve", "{status}");
    assert!(groups[0]["review"]["by"]
        .as_str()
        .unwrap()
        .starts_with("claude-code"));
    assert_eq!(groups[1]["review"]["verdict"], "reject", "{status}");
    let run = status["id"].as_str().unwrap();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["d01/f.txt"], "file 1\ntouched\n");
    assert_eq!(
        merged["d04/f.txt"], "file 4\n",
        "the rejected group stays out"
    );
}

#[test]
fn claude_code_judges_the_attempts_of_claude_code_workers() {
    let Some(claude) = real_claude() else { return };
    let repo = TestRepo::with_files(&[("src/a/x.txt", "hi\n")]);
    let mock = MockModel::start_claude_code(KEY);
    for (n, word) in [(1, "hello"), (2, "hello there")] {
        mock.script(
            &format!("a~{n}"),
            claude_tools::read_and_edit("src/a/x.txt", "hi", word, "Greeted."),
        );
        mock.script(
            &format!("review:a~{n}"),
            vec![verdict("approve", "Greets.", json!([]))],
        );
    }
    mock.script(
        "pick:a",
        vec![Turn::Tools(vec![ToolCall::new(
            "StructuredOutput",
            json!({"attempt": 2, "why": "The warmer greeting."}),
        )])],
    );
    let toml = Plan::new()
        .goal("Greet properly")
        .set("defaults", "agent", "claude-code")
        .set("defaults", "timeout", "60s")
        .set("agents.claude-code", "bin", claude.display().to_string())
        .set("agents.claude-code", "provider", "mock")
        .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
        .task("a")
        .prompt("Say hello in src/a/x.txt")
        .owns(["src/a/"])
        .with("attempts", 2)
        .to_toml();
    let out = run_real(&repo, &toml);
    assert!(out.status.success(), "plait run failed: {}", stderr(&out));
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["pick"]["attempt"], 2, "{a}");
    assert_eq!(a["pick"]["why"], "The warmer greeting.", "{a}");
    assert!(
        a["pick"]["by"].as_str().unwrap().starts_with("claude-code"),
        "{a}"
    );
    let run = status["id"].as_str().unwrap();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a/x.txt"], "hello there\n");
    assert_eq!(mock.count("pick:a"), 1);
}
