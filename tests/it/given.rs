//! What plait writes for a process to read (Claude Code's settings and its guard's rules, the
//! owned list) is that process's: the real Claude Code, as a worker in a view over the run's
//! base layer and as its reviewer, starts and is judged by its hook with a new user's
//! config (no `[sandbox] readable`), on a repository's first run and on its second, when
//! plait's store exists already; the store stays unreadable to it all the same.

use std::fs;

use serde_json::json;

use crate::mock::{claude_tools, MockModel, ToolCall, Turn};
use crate::support::agents::{real_claude, KEY};
use crate::support::sandbox::{landlock, namespaces};
use crate::support::{stderr, task_json, Plan, TestRepo};

/// A config directory with nothing in it, as a new user has: the suite's own config (which
/// makes the tests' directories readable) would widen the wall this tries.
fn new_users_config(repo: &TestRepo) -> String {
    let config = repo.scratch.join("xdg-config");
    fs::create_dir_all(&config).unwrap();
    config.display().to_string()
}

/// What the worker's `Bash` tries of plait's store and of what plait wrote for it.
fn probe(repo: &TestRepo) -> String {
    let store = repo.path.join(".git/plait");
    format!(
        "cat {s}/runs/*/state.json; ls {s}/runs; echo OWNED; cat \"$PLAIT_OWNED\"; \
         echo CONFIG; ls \"$CLAUDE_CONFIG_DIR\" >/dev/null && echo config-listed",
        s = store.display()
    )
}

#[test]
fn claude_code_in_a_view_and_as_its_reviewer_reads_its_own_files_on_a_first_and_second_run() {
    let Some(claude) = real_claude() else { return };
    if !landlock() || !namespaces() {
        return;
    }
    let repo = TestRepo::with_files(&[
        ("src/a/x.txt", "hi\n"),
        ("src/b/y.txt", "yo\n"),
        ("check.sh", "grep -q hello src/a/x.txt\n"),
    ]);
    for round in ["first", "second"] {
        assert_eq!(
            repo.path.join(".git/plait").exists(),
            round == "second",
            "{round} run"
        );
        let mock = MockModel::start_claude_code(KEY);
        mock.script(
            "a",
            vec![
                Turn::Tools(vec![claude_tools::bash(&probe(&repo))]),
                Turn::Tools(vec![claude_tools::read("src/a/x.txt")]),
                Turn::Tools(vec![claude_tools::edit("src/a/x.txt", "hi", "hello")]),
                Turn::Tools(vec![claude_tools::read("src/b/y.txt")]),
                Turn::Tools(vec![claude_tools::edit("src/b/y.txt", "yo", "mine")]),
                Turn::Text("Said hello.".into()),
            ],
        );
        mock.script(
            "review:a",
            vec![Turn::Tools(vec![ToolCall::new(
                "StructuredOutput",
                json!({"verdict": "approve", "summary": "Greets.", "comments": []}),
            )])],
        );
        // No [review]: Claude Code workers are reviewed by Claude Code. A task check gives
        // the run a base layer, and so each task a view over it.
        let toml = Plan::new()
            .goal("Greet")
            .set("defaults", "agent", "claude-code")
            .set("defaults", "timeout", "60s")
            .set("agents.claude-code", "bin", claude.display().to_string())
            .set("agents.claude-code", "provider", "mock")
            .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
            .set("checks", "task", ["sh check.sh"])
            .task("a")
            .prompt("Say hello in src/a/x.txt")
            .owns(["src/a/"])
            .to_toml();
        let plan = repo.plan(&toml);
        let home = tempfile::tempdir().unwrap();
        let config = new_users_config(&repo);
        let out = repo.plait_env(
            &["run", plan.to_str().unwrap()],
            &[
                ("PLAIT_TEST_KEY", KEY),
                ("HOME", home.path().to_str().unwrap()),
                ("XDG_CONFIG_HOME", &config),
            ],
        );
        let status = repo.status_json(&[]);
        assert!(
            mock.problems().is_empty(),
            "{round}: {:#?}",
            mock.problems()
        );
        let a = task_json(&status, "a");
        assert_eq!(a["state"], "done", "{round}: {}\n{a}", stderr(&out));
        assert_eq!(a["checks"][0]["passed"], true, "{round}: {a}");
        // The reviewer, Claude Code in its role, read its settings and answered.
        assert_eq!(a["review"]["verdict"], "approve", "{round}: {a}");
        let results = mock.tool_results("a");
        let texts: Vec<&str> = results.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(results.len(), 5, "{round}: {texts:#?}\n{a}");
        // The store is closed; what plait wrote for the agent, and its own config, are not.
        assert!(!texts[0].contains("Greet"), "{round}: {}", texts[0]);
        assert!(
            texts[0].contains("Permission denied"),
            "{round}: {}",
            texts[0]
        );
        assert!(
            texts[0].contains("OWNED\nsrc/a/x.txt") && texts[0].contains("config-listed"),
            "{round}: {}",
            texts[0]
        );
        // The hook read its rules: the owned edit went through, the other was refused.
        assert!(!results[2].is_error, "{round}: {}", texts[2]);
        assert!(
            results[4].is_error && texts[4].contains("does not own `src/b/y.txt`"),
            "{round}: {}",
            texts[4]
        );
        let run = status["id"].as_str().unwrap();
        let branch = repo.tree_files(&format!("plait/{run}/a"));
        assert_eq!(branch["src/a/x.txt"], "hello\n", "{round}");
        assert_eq!(branch["src/b/y.txt"], "yo\n", "{round}");
        assert!(
            !a["sandbox"]["refused"].to_string().contains("claude-code"),
            "{round}: {a}"
        );
    }
}
