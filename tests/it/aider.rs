//! aider, an agent CLI plait drives itself: a scripted fake, and the real aider against
//! the mock model server.

use std::fs;
use std::path::Path;

use serde_json::json;

use crate::mock::{MockModel, Turn};
use crate::support::agents::{
    after, argv_of, assert_confined, assert_gateway_url, plan, real_aider, record, run_real,
    sample, script, KEY,
};
use crate::support::{stderr, task_json, Plan};

#[test]
fn fake_aider_gets_the_owned_files_and_the_providers_model_base_url_and_key() {
    let repo = sample();
    let fake = script(
        &repo,
        "aider",
        json!({
            "a": {
                "actions": [{"edit": "src/a/x.txt", "old": "hi", "new": "hello"}],
                "tokens_sent": "1.5k", "tokens_received": "300",
                "cost_message": "0.0100", "cost_session": "0.0100",
            },
            "b": {"actions": [{"edit": "src/b/y.txt", "old": "yo", "new": "hey"}]},
        }),
    );
    let toml = plan("aider")
        .set("agents.aider", "bin", fake.bin.as_str())
        .set("agents.aider", "provider", "local")
        .provider(
            "local",
            "openai",
            "http://127.0.0.1:9/v1",
            "PLAIT_TEST_KEY",
            "qwen-coder",
        );
    let plan_path = repo.plan(&toml.to_toml());
    let out = repo.plait_env(
        &["run", plan_path.to_str().unwrap()],
        &[
            ("FAKE_AIDER_SCRIPT", &fake.script),
            ("FAKE_AIDER_RECORD", &fake.records),
            ("PLAIT_TEST_KEY", KEY),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["usage"]["input_tokens"], 1500, "{a}");
    assert_eq!(a["usage"]["output_tokens"], 300, "{a}");
    assert_eq!(a["usage"]["cost_usd"], 0.01, "{a}");
    let run = status["id"].as_str().unwrap();
    assert_eq!(
        repo.tree_files(&format!("plait/{run}/merged"))["src/a/x.txt"],
        "hello\n"
    );

    let rec = record(&repo, "a");
    let argv = argv_of(&rec);
    let after = |flag: &str| after(&argv, flag);
    assert_eq!(after("--model"), "openai/qwen-coder");
    // The base URL, which holds the lease's token, is in the environment only: never on
    // the command line, which other processes could read.
    let base = rec["env"]["AIDER_OPENAI_API_BASE"].as_str().unwrap();
    assert_gateway_url(base);
    assert_eq!(rec["env"]["OPENAI_API_BASE"], base);
    let token = base.rsplit('/').next().unwrap();
    assert!(
        !argv.iter().any(|a| a.contains(token)),
        "the lease's token is on the command line: {argv:?}"
    );
    let message = after("--message");
    assert!(
        message.contains("Say hello in src/a/x.txt") && message.contains("Task id: a"),
        "{message}"
    );
    for flag in ["--yes-always", "--no-auto-commits", "--no-stream"] {
        assert!(argv.contains(&flag), "{flag} missing: {argv:?}");
    }
    assert!(
        argv.ends_with(&["src/a/other.txt", "src/a/x.txt"]),
        "owned files last: {argv:?}"
    );
    assert!(
        !argv.iter().any(|a| a.contains(KEY)),
        "the key must not be on the command line"
    );
    let stand_in = rec["env"]["OPENAI_API_KEY"].as_str().unwrap();
    assert!(
        stand_in.starts_with("plait-") && !stand_in.contains(KEY),
        "{stand_in}"
    );
    // aider's history files stay out of the worktree: nothing but the edit was collected.
    assert_eq!(a["violations"].as_array().unwrap().len(), 0, "{a}");
}

/// [`plan`] on the real aider at `aider` in its `whole` edit format, its model the mock
/// model server (`[providers.mock]`, OpenAI's API).
fn aider_on_mock(aider: &Path, mock: &MockModel) -> Plan {
    plan("aider")
        .set("agents.aider", "bin", aider.display().to_string())
        .set("agents.aider", "provider", "mock")
        .set("agents.aider", "args", ["--edit-format", "whole"])
        .mock("openai", &mock.url(), "qwen-coder")
}

#[test]
fn real_aider_edits_the_owned_files_with_the_providers_model() {
    let Some(aider) = real_aider() else { return };
    let repo = sample();
    let config_before = fs::read_to_string(repo.path.join(".git/config")).unwrap();
    let mock = MockModel::start_aider(KEY);
    mock.script(
        "a",
        vec![Turn::Text("src/a/x.txt\n```\nhello\n```\n".into())],
    );
    // A file the task creates: aider would `git add` it, which the sandbox refuses.
    mock.script(
        "b",
        vec![Turn::Text(
            "src/b/y.txt\n```\nhey\n```\n\nsrc/b/new.txt\n```\nfresh\n```\n".into(),
        )],
    );
    let toml = aider_on_mock(&aider, &mock).to_toml();
    mock.set_usage(300, 20, 0, 0);
    let out = run_real(&repo, &toml);
    let status = repo.status_json(&[]);
    let logs: Vec<String> = ["a", "b"]
        .iter()
        .map(|id| {
            fs::read_to_string(task_json(&status, id)["log"].as_str().unwrap()).unwrap_or_default()
        })
        .collect();
    assert!(
        out.status.success(),
        "plait run failed: {}\n{logs:#?}",
        stderr(&out)
    );
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    assert_eq!(mock.count("a"), 1);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["violations"].as_array().unwrap().len(), 0, "{a}");
    assert_eq!(a["usage"]["turns"], 1, "{a}");
    // Counted by plait's gateway, through which aider reached the model.
    assert_eq!(a["usage"]["requests"], 1, "{a}");
    assert_eq!(a["usage"]["input_tokens"], 300, "{a}");
    assert_eq!(a["usage"]["output_tokens"], 20, "{a}");
    if a["sandbox"]["confined"] == true {
        assert!(
            a["sandbox"]["how"].as_str().unwrap().contains("gateway"),
            "{a}"
        );
    }
    let transcript = repo.plait(&["log", "a", "--transcript"]);
    assert!(
        String::from_utf8_lossy(&transcript.stdout).contains("hello"),
        "{}",
        String::from_utf8_lossy(&transcript.stdout)
    );
    assert_confined(a);
    let request = mock
        .requests()
        .into_iter()
        .find(|r| r.task.as_deref() == Some("a"))
        .unwrap();
    assert_eq!(request.body["model"], "qwen-coder");
    assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
    let run = status["id"].as_str().unwrap();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a/x.txt"], "hello\n");
    assert_eq!(merged["src/b/y.txt"], "hey\n");
    assert_eq!(merged["src/b/new.txt"], "fresh\n");
    assert_eq!(merged["src/a/other.txt"], "keep\n");
    let b = task_json(&status, "b");
    assert_confined(b);
    // The only write aider is refused is its first-run marker in `~/.aider`, which it
    // shrugs off; its `git add` of the new file went to a git state of its own.
    for refused in b["sandbox"]["refused"].as_array().into_iter().flatten() {
        assert!(
            refused.as_str().unwrap().contains("/.aider"),
            "{refused}\n{logs:#?}"
        );
    }
    assert_eq!(
        repo.git(&["status", "--porcelain"]).trim(),
        "",
        "the checkout is untouched"
    );
    // aider writes a placeholder identity into a repository without one; not here.
    let config_after = fs::read_to_string(repo.path.join(".git/config")).unwrap();
    assert_eq!(
        config_before,
        crate::support::without_worktree_config(&config_after)
    );
}

/// With task checks, real aider tests its own edits: `--test-cmd` runs the checks through
/// `plait run-in-view` in the task's whole-tree view after each edit, and a failure goes back
/// to the model, which fixes it within the same round of plait's.
#[test]
fn real_aider_runs_the_task_checks_after_its_edit_and_fixes_what_they_report() {
    let Some(aider) = real_aider() else { return };
    let repo = sample();
    let mock = MockModel::start_aider(KEY);
    mock.script(
        "a",
        vec![
            Turn::Text("src/a/x.txt\n```\nhallo\n```\n".into()),
            Turn::Text("src/a/x.txt\n```\nhello\n```\n".into()),
        ],
    );
    mock.script("b", vec![Turn::Text("src/b/y.txt\n```\nhey\n```\n".into())]);
    // Reads a file no task owns, as a project's tests read the rest of the tree.
    let check = "test -f README.md && ! grep -rq hallo src || { echo \"CHECK SAYS: $(cat src/a/x.txt) is not a greeting\"; exit 1; }";
    let toml = aider_on_mock(&aider, &mock)
        .set("checks", "task", [check])
        .to_toml();
    let out = run_real(&repo, &toml);
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    let log = fs::read_to_string(a["log"].as_str().unwrap()).unwrap_or_default();
    assert!(
        out.status.success(),
        "plait run failed: {}\n{log}",
        stderr(&out)
    );
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    assert_eq!(
        mock.count("a"),
        2,
        "aider asked again after the failed check\n{log}"
    );
    let second = mock
        .requests()
        .into_iter()
        .filter(|r| r.task.as_deref() == Some("a"))
        .nth(1)
        .unwrap();
    assert!(
        second
            .body
            .to_string()
            .contains("CHECK SAYS: hallo is not a greeting"),
        "the check's output went back to the model: {}",
        second.body
    );
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["rounds"], 0, "fixed within plait's first round: {a}");
    assert_confined(a);
    let run = status["id"].as_str().unwrap();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a/x.txt"], "hello\n");
    assert_eq!(merged["src/b/y.txt"], "hey\n");
    assert_eq!(mock.count("b"), 1, "b's edit passed its check at once");
}
