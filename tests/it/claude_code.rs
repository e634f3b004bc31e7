//! Claude Code, an agent CLI plait drives itself: a scripted fake that calls the PreToolUse
//! hook as the real CLI does, and the real CLI against the mock model server. aider's
//! tests are in `aider.rs`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

use crate::mock::{claude_tools, MockModel, Turn};
use crate::support::agents::{
    after, argv_of, assert_confined, assert_gateway_url, claude_on_mock, fake, plan, real_claude,
    record, record_of_run, run_real, sample, script, KEY,
};
use crate::support::{stderr, task_json, Plan, TestRepo};

/// Runs [`plan`] on the fake Claude Code playing `entries`, `extra` changing the plan.
fn run_fake_claude(repo: &TestRepo, entries: Value, extra: impl FnOnce(Plan) -> Plan) -> Output {
    run_fake_claude_for(repo, entries, extra, "60s")
}

fn run_fake_claude_for(
    repo: &TestRepo,
    entries: Value,
    extra: impl FnOnce(Plan) -> Plan,
    timeout: &str,
) -> Output {
    let fake = script(repo, "claude", entries);
    let plan = plan("claude-code")
        .set("defaults", "timeout", timeout)
        .set("agents.claude-code", "bin", fake.bin.as_str())
        .set("agents.claude-code", "model", "claude-test-model");
    let plan_path = repo.plan(&extra(plan).to_toml());
    let out = repo.plait_env(
        &["run", plan_path.to_str().unwrap(), "-j", "2"],
        &[
            ("FAKE_CLAUDE_SCRIPT", &fake.script),
            ("FAKE_CLAUDE_RECORD", &fake.records),
            ("PLAIT_TEST_KEY", KEY),
            // The fake needs no login; this stands for one.
            ("CLAUDE_CODE_OAUTH_TOKEN", "fake-login"),
        ],
    );
    out
}

#[test]
fn fake_claude_edits_owned_files_and_the_hook_refuses_the_rest() {
    let repo = sample();
    let entries = json!({
        "a": {
            "actions": [
                {"edit": "src/a/x.txt", "old": "hi", "new": "hello"},
                {"write": "src/b/y.txt", "content": "taken over\n"},
                {"write": "../../../../../../outside.txt", "content": "escape\n"},
                {"write": ".git/config", "content": "broken\n"},
                {"write": "src/a/new.txt", "content": "new\n"},
            ],
            "result": {"result": "Greeted in x.txt.", "total_cost_usd": 0.25,
                       "usage": {"input_tokens": 1000, "output_tokens": 200}},
        },
        "b": {"actions": [{"edit": "src/b/y.txt", "old": "yo", "new": "hey"}]},
    });
    let out = run_fake_claude(&repo, entries, |plan| {
        plan.set("agents.claude-code", "provider", "mock")
            .set("providers.mock", "kind", "anthropic")
            .set("providers.mock", "base_url", "http://127.0.0.1:9")
            .set("providers.mock", "api_key_env", "PLAIT_TEST_KEY")
    });
    assert!(out.status.success(), "plait run failed: {}", stderr(&out));

    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["violations"].as_array().unwrap().len(), 0, "{a}");
    assert_eq!(a["usage"]["refused_writes"], 3, "{a}");
    assert_eq!(a["usage"]["cost_usd"], 0.25, "{a}");
    assert_eq!(a["usage"]["input_tokens"], 1000, "{a}");
    assert_eq!(a["summary"], "Greeted in x.txt.", "{a}");
    let run = status["id"].as_str().unwrap();
    let branch_a = repo.tree_files(&format!("plait/{run}/a"));
    assert_eq!(branch_a["src/a/x.txt"], "hello\n");
    assert_eq!(branch_a["src/a/new.txt"], "new\n");
    assert_eq!(
        branch_a["src/b/y.txt"], "yo\n",
        "the refused write must not land"
    );
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/b/y.txt"], "hey\n");
    assert!(!repo.path.join("../outside.txt").exists());

    // What the hook said, as the CLI hands it to the model.
    let rec = record(&repo, "a");
    let denials = rec["denials"].as_array().unwrap();
    assert_eq!(denials.len(), 3, "{rec}");
    let first = denials[0]["reason"].as_str().unwrap();
    assert!(
        first.contains("does not own `src/b/y.txt`") && first.contains("src/a/"),
        "the refusal must name the file and the owned globs: {first}"
    );
    assert!(denials[1]["reason"].as_str().unwrap().contains("outside"));
    assert!(denials[2]["reason"].as_str().unwrap().contains("git"));

    // How plait ran the CLI.
    let argv = argv_of(&rec);
    let after = |flag: &str| after(&argv, flag);
    // The message comes on its input, as stream-json, so it can be told more while it runs.
    assert_eq!(rec["prompt"], "Say hello in src/a/x.txt");
    assert_eq!(after("--input-format"), "stream-json");
    assert_eq!(after("--output-format"), "stream-json");
    assert!(
        argv.contains(&"--verbose"),
        "stream-json needs --verbose: {argv:?}"
    );
    // Only plait's settings: none a process of the agent could write switch its hook off.
    assert_eq!(after("--setting-sources"), "");
    assert_eq!(after("--max-turns"), "7");
    assert_eq!(after("--model"), "claude-test-model");
    let rules = after("--append-system-prompt");
    assert!(
        rules.contains("Task id: a")
            && rules.contains("Greet properly")
            && rules.contains("src/a/"),
        "{rules}"
    );
    let env = &rec["env"];
    // The provider's key stays in plait: the CLI is given its way through the gateway and
    // a stand-in for the key, which the gateway swaps for the real one.
    assert_gateway_url(env["ANTHROPIC_BASE_URL"].as_str().unwrap());
    let stand_in = env["ANTHROPIC_API_KEY"].as_str().unwrap();
    assert!(
        stand_in.starts_with("plait-") && !stand_in.contains(KEY),
        "{stand_in}"
    );
    assert_eq!(env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"], "1");
    assert_eq!(env["PLAIT_TASK"], "a");
    let config = env["CLAUDE_CONFIG_DIR"].as_str().unwrap();
    assert!(
        config.contains("/tasks/a/"),
        "one config dir per task: {config}"
    );
    assert_ne!(
        record(&repo, "b")["env"]["CLAUDE_CONFIG_DIR"],
        env["CLAUDE_CONFIG_DIR"]
    );

    // The key is never written into plait's own files.
    repo.assert_not_written(KEY);
}

#[test]
fn is_error_fails_the_task_even_on_exit_0() {
    let repo = sample();
    let entries = json!({
        "a": {
            "actions": [{"edit": "src/a/x.txt", "old": "hi", "new": "half"}],
            "result": {"is_error": true, "subtype": "error_during_execution", "result": "API Error: 500 overloaded"},
            "exit": 0,
        },
    });
    let out = run_fake_claude(&repo, entries, |plan| plan);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "failed", "{a}");
    let error = a["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("error_during_execution") && error.contains("API Error: 500"),
        "{a}"
    );
    assert_eq!(task_json(&status, "b")["state"], "done");
}

#[test]
fn a_crash_fails_the_task_and_its_stderr_is_in_the_log() {
    let repo = sample();
    let entries = json!({"a": {"actions": [{"crash": 3}]}});
    let out = run_fake_claude(&repo, entries, |plan| plan);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "failed", "{a}");
    assert_eq!(a["exit_code"], 3, "{a}");
    assert!(
        a["error"]
            .as_str()
            .unwrap()
            .contains("without a JSON result"),
        "{a}"
    );
    let log = fs::read_to_string(a["log"].as_str().unwrap()).unwrap();
    assert!(log.contains("Traceback") || log.contains("Error"), "{log}");
}

#[test]
fn a_claude_that_hangs_is_killed_at_its_timeout() {
    let repo = sample();
    let entries = json!({"a": {"actions": [{"sleep": 60}]}});
    let started = std::time::Instant::now();
    let out = run_fake_claude_for(&repo, entries, |plan| plan, "2s");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the timeout must stop it"
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "failed", "{a}");
    assert!(a["error"].as_str().unwrap().contains("timed out"), "{a}");
}

#[test]
fn a_missing_claude_binary_is_a_plan_error_before_anything_is_created() {
    let repo = sample();
    let toml = plan("claude-code").set("agents.claude-code", "bin", "/nonexistent/bin/claude");
    let plan_path = repo.plan(&toml.to_toml());
    let before = repo.branches();
    let out = repo.plait_env(&["run", plan_path.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("claude-code") && err.contains("/nonexistent/bin/claude"),
        "{err}"
    );
    assert_eq!(repo.branches(), before);
    assert!(
        !repo.path.join(".git/plait/runs").exists()
            || fs::read_dir(repo.path.join(".git/plait/runs"))
                .unwrap()
                .next()
                .is_none()
    );

    // On PATH by default: an empty PATH finds no `claude`.
    let plan_path = repo.plan(&plan("claude-code").to_toml());
    let out = repo.plait_env(
        &["run", plan_path.to_str().unwrap()],
        &[("PATH", "/nonexistent")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("`claude`"), "{}", stderr(&out));
}

#[test]
fn real_claude_code_edits_owned_files_and_its_hook_refuses_the_rest() {
    let Some(claude) = real_claude() else { return };
    let repo = sample();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt").display().to_string();
    fs::write(&secret, "not for the model\n").unwrap();
    let mock = MockModel::start_claude_code(KEY);
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![claude_tools::read("src/a/x.txt")]),
            Turn::Tools(vec![claude_tools::edit("src/a/x.txt", "hi", "hello")]),
            // The whole tree is in view: the CLI makes its agent read a file before it
            // overwrites it, and the hook refuses the write.
            Turn::Tools(vec![claude_tools::read("src/b/y.txt")]),
            Turn::Tools(vec![claude_tools::write("src/b/y.txt", "taken over\n")]),
            Turn::Tools(vec![claude_tools::read(&secret)]),
            Turn::Text("Said hello; src/b/y.txt belongs to another task.".into()),
        ],
    );
    mock.script(
        "b",
        claude_tools::read_and_edit("src/b/y.txt", "yo", "hey", "Said hey."),
    );
    let toml = claude_on_mock(&claude, &mock.url()).to_toml();
    let out = run_real(&repo, &toml);
    assert!(out.status.success(), "plait run failed: {}", stderr(&out));
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());

    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["usage"]["refused_writes"], 1, "{a}");
    assert_confined(a);
    assert_eq!(a["violations"].as_array().unwrap().len(), 0, "{a}");
    let run = status["id"].as_str().unwrap();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a/x.txt"], "hello\n");
    assert_eq!(merged["src/b/y.txt"], "hey\n");

    let refused: Vec<_> = mock
        .tool_results("a")
        .into_iter()
        .filter(|r| r.is_error)
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0].text.contains("does not own `src/b/y.txt`")
            && refused[0].text.contains("src/a/"),
        "the model must hear why: {}",
        refused[0].text
    );
    assert!(
        refused[1].text.contains("outside the repository"),
        "a read outside the repository is refused: {}",
        refused[1].text
    );
    let results = mock.tool_results("a");
    assert!(!results.iter().any(|r| r.text.contains("not for the model")));
}

#[test]
fn claude_code_without_a_login_or_a_key_is_a_plan_error_before_anything_is_created() {
    let repo = sample();
    let home = tempfile::tempdir().unwrap();
    let own = home.path().join(".claude");
    fs::create_dir_all(&own).unwrap();
    let toml = plan("claude-code").set(
        "agents.claude-code",
        "bin",
        fake("claude").display().to_string(),
    );
    let plan_path = repo.plan(&toml.to_toml());
    let home_dir = home.path().to_str().unwrap();
    let no_login = [
        ("HOME", home_dir),
        ("CLAUDE_CONFIG_DIR", ""),
        ("ANTHROPIC_API_KEY", ""),
        ("ANTHROPIC_AUTH_TOKEN", ""),
        ("CLAUDE_CODE_OAUTH_TOKEN", ""),
        ("CLAUDE_CODE_USE_BEDROCK", ""),
        ("CLAUDE_CODE_USE_VERTEX", ""),
    ];
    let before = repo.git(&["for-each-ref"]);
    for command in [
        &["run", plan_path.to_str().unwrap()][..],
        &["plan", "--check", plan_path.to_str().unwrap()],
    ] {
        let out = repo.plait_env(command, &no_login);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("agent `claude-code` has no way to sign in")
                && err.contains(&own.display().to_string())
                && err.contains("/login")
                && err.contains("ANTHROPIC_API_KEY"),
            "{err}"
        );
    }
    assert_eq!(repo.git(&["for-each-ref"]), before, "nothing was created");

    // Each way of signing in is enough: a login's credentials, an apiKeyHelper, a key.
    fs::write(own.join("settings.json"), "{\"apiKeyHelper\": \"echo k\"}").unwrap();
    let out = repo.plait_env(&["plan", "--check", plan_path.to_str().unwrap()], &no_login);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    fs::remove_file(own.join("settings.json")).unwrap();
    fs::write(own.join(".credentials.json"), "{}").unwrap();
    let out = repo.plait_env(&["plan", "--check", plan_path.to_str().unwrap()], &no_login);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    fs::remove_file(own.join(".credentials.json")).unwrap();
    let mut with_key = no_login.to_vec();
    with_key.push(("ANTHROPIC_API_KEY", "sk-test"));
    let out = repo.plait_env(&["plan", "--check", plan_path.to_str().unwrap()], &with_key);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A login stays in plait: the CLI's own config directory gets a credentials file whose
/// tokens are the gateway's stand-in, removed after the run; the user's file is never
/// linked, copied or readable from inside the walls.
#[test]
fn a_claude_login_is_a_stand_in_for_the_run_and_not_left_behind() {
    let repo = sample();
    let home = tempfile::tempdir().unwrap();
    let own = home.path().join(".claude");
    fs::create_dir_all(&own).unwrap();
    fs::write(
        own.join(".credentials.json"),
        "{\"claudeAiOauth\": {\"accessToken\": \"secret-login\", \"refreshToken\": \"secret-refresh\", \"expiresAt\": 1, \"scopes\": [\"user:inference\"]}}",
    )
    .unwrap();
    let fake = script(&repo, "claude", json!({}));
    let toml = plan("claude-code")
        .set("agents.claude-code", "bin", fake.bin.as_str())
        // The fake edits nothing: what is judged here is the login's link.
        .set("defaults", "expect_changes", false);
    let plan_path = repo.plan(&toml.to_toml());
    let home_dir = home.path().to_str().unwrap();
    let out = repo.plait_env(
        &["run", plan_path.to_str().unwrap()],
        &[
            ("FAKE_CLAUDE_SCRIPT", &fake.script),
            ("FAKE_CLAUDE_RECORD", &fake.records),
            ("HOME", home_dir),
            ("CLAUDE_CONFIG_DIR", ""),
            ("ANTHROPIC_API_KEY", ""),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = record(&repo, "a");
    assert_eq!(rec["config_files"][".credentials.json"], "file", "{rec}");
    let config = rec["env"]["CLAUDE_CONFIG_DIR"].as_str().unwrap();
    repo.assert_not_written("secret-login");
    repo.assert_not_written("secret-refresh");
    assert!(!Path::new(config).join(".credentials.json").exists());
    assert!(
        own.join(".credentials.json").exists(),
        "the user's own login stays"
    );
}

#[test]
fn ctrl_c_interrupts_claude_and_resume_carries_on_from_its_work() {
    let repo = sample();
    let fake = script(
        &repo,
        "claude",
        json!({
            "a": {"actions": [{"edit": "src/a/x.txt", "old": "hi", "new": "partial"}, {"sleep": 30}]},
            "b": {"actions": [{"edit": "src/b/y.txt", "old": "yo", "new": "partial"}, {"sleep": 30}]},
        }),
    );
    let toml = plan("claude-code").set("agents.claude-code", "bin", fake.bin.as_str());
    let plan_path = repo.plan(&toml.to_toml());
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan_path.to_str().unwrap(), "-j", "2"])
        .current_dir(&repo.path)
        .env("FAKE_CLAUDE_SCRIPT", &fake.script)
        .env("FAKE_CLAUDE_RECORD", &fake.records)
        .env("CLAUDE_CODE_OAUTH_TOKEN", "fake-login")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = crate::support::wait_for_running(&repo, 2);
    let worktree = |id: &str| -> PathBuf {
        PathBuf::from(task_json(&status, id)["worktree"].as_str().unwrap())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while fs::read_to_string(worktree("a").join("src/a/x.txt")).unwrap_or_default() != "partial\n"
        || fs::read_to_string(worktree("b").join("src/b/y.txt")).unwrap_or_default() != "partial\n"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the fakes never wrote"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let run = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let status = repo.status_json(&[&run]);
    for id in ["a", "b"] {
        let t = task_json(&status, id);
        assert_eq!(t["state"], "interrupted", "{t}");
        let branch = t["branch"].as_str().unwrap();
        let file = if id == "a" {
            "src/a/x.txt"
        } else {
            "src/b/y.txt"
        };
        assert_eq!(repo.tree_files(branch)[file], "partial\n");
    }

    // The next run of the CLI finishes the work in the same worktree.
    let finish = json!({
        "a": {"actions": [{"edit": "src/a/x.txt", "old": "partial", "new": "hello"}]},
        "b": {"actions": [{"edit": "src/b/y.txt", "old": "partial", "new": "hey"}]},
    });
    fs::write(&fake.script, finish.to_string()).unwrap();
    let out = repo.plait_env(
        &["resume", &run],
        &[
            ("FAKE_CLAUDE_SCRIPT", &fake.script),
            ("FAKE_CLAUDE_RECORD", &fake.records),
            ("CLAUDE_CODE_OAUTH_TOKEN", "fake-login"),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a/x.txt"], "hello\n");
    assert_eq!(merged["src/b/y.txt"], "hey\n");
    // The second run was told its earlier work is there.
    let rec = record_of_run(&repo, "a", 2);
    let prompt = rec["prompt"].as_str().unwrap().to_string();
    assert!(
        prompt.contains("Say hello in src/a/x.txt") && prompt.contains("This task was interrupted"),
        "{prompt}"
    );
}

/// What the real CLI's `Bash` may do now: run the project's tests in the whole tree with the
/// task's edits in place (a module no task owns imported), learn from a failure and fix it,
/// all inside the walls; and what it may not: switch plait's hook off through settings it
/// can write (the worktree's `.claude/`, its own config directory), or rewrite plait's
/// control files.
#[test]
fn real_claude_code_runs_the_tests_in_the_whole_tree_and_cannot_switch_off_its_hook() {
    let Some(claude) = real_claude() else { return };
    let repo = TestRepo::with_files(&[
        (".gitignore", "__pycache__/\n"),
        ("lib/helper.py", "VALUE = 41\n"),
        (
            "src/a/app.py",
            "import helper\n\n\ndef answer():\n    return helper.VALUE\n",
        ),
        (
            "src/a/test_app.py",
            "import os\nimport sys\nimport unittest\n\n\
             sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'lib'))\n\
             import app  # noqa: E402\n\n\n\
             class T(unittest.TestCase):\n    def test_answer(self):\n        self.assertEqual(app.answer(), 42)\n",
        ),
        ("src/b/y.txt", "yo\n"),
    ]);
    let test = "(cd src/a && python3 -m unittest test_app 2>&1); echo \"exit=$?\"";
    let plait_files = repo.path.join(".git/plait/runs");
    let tamper = format!(
        "mkdir -p .claude && echo '{{\"disableAllHooks\": true}}' > .claude/settings.local.json; \
         echo '{{\"disableAllHooks\": true}}' > \"$CLAUDE_CONFIG_DIR/settings.json\" && echo config-written; \
         for f in {}/*/tasks/a/claude-code/*.json; do echo '{{}}' > \"$f\" && echo \"OVERWROTE $f\"; done; echo tampered",
        plait_files.display()
    );
    let mock = MockModel::start_claude_code(KEY);
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![claude_tools::bash(test)]),
            Turn::Tools(vec![claude_tools::read("src/a/app.py")]),
            Turn::Tools(vec![claude_tools::edit(
                "src/a/app.py",
                "return helper.VALUE",
                "return helper.VALUE + 1",
            )]),
            Turn::Tools(vec![claude_tools::bash(test)]),
            Turn::Tools(vec![claude_tools::bash(&tamper)]),
            Turn::Tools(vec![claude_tools::read("src/b/y.txt")]),
            Turn::Tools(vec![claude_tools::edit("src/b/y.txt", "yo", "mine")]),
            Turn::Text("The answer is 42 and the tests pass.".into()),
        ],
    );
    mock.script("b", vec![Turn::Text("Nothing to do.".into())]);
    let toml = claude_on_mock(&claude, &mock.url())
        .set("defaults", "max_turns", 12)
        .to_toml();
    let out = run_real(&repo, &toml);
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    let results = mock.tool_results("a");
    let texts: Vec<&str> = results.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(results.len(), 7, "{}\n{texts:#?}\n{a}", stderr(&out));

    // The tests ran in the whole tree: the module no task owns was there to import.
    assert!(
        texts[0].contains("41 != 42") && texts[0].contains("exit=1"),
        "the first run fails on the base's answer: {}",
        texts[0]
    );
    assert!(
        texts[3].contains("OK") && texts[3].contains("exit=0"),
        "the second run sees the edit: {}",
        texts[3]
    );
    // Writes the walls allow happened; none of them could undo plait's rules.
    assert!(texts[4].contains("tampered"), "{}", texts[4]);
    assert!(
        !texts[4].contains("OVERWROTE"),
        "plait's control files are read-only to the agent: {}",
        texts[4]
    );
    assert!(
        results[6].is_error && texts[6].contains("does not own `src/b/y.txt`"),
        "the hook still judges edits after the agent wrote settings of its own: {}",
        texts[6]
    );

    assert_eq!(a["usage"]["refused_writes"], 1, "{a}");
    assert_confined(a);
    let run = status["id"].as_str().unwrap();
    let branch = repo.tree_files(&format!("plait/{run}/a"));
    assert!(branch["src/a/app.py"].contains("helper.VALUE + 1"));
    assert_eq!(branch["src/b/y.txt"], "yo\n");
    assert_eq!(branch["lib/helper.py"], "VALUE = 41\n");
    assert!(
        !branch
            .keys()
            .any(|p| p.contains("__pycache__") || p.starts_with(".claude")),
        "build output and the agent's settings are never committed: {:?}",
        branch.keys()
    );
    // The settings file the agent wrote in the worktree is a file it does not own.
    let violations = a["violations"].to_string();
    assert!(violations.contains(".claude/settings.local.json"), "{a}");
    assert_eq!(
        repo.git(&["status", "--porcelain"]).trim(),
        "",
        "the checkout is untouched"
    );
}
