//! A model agent's `run` tool against the mock model server: a test command that imports
//! a module the task does not own passes in the whole-tree view and its output comes back
//! in the next request; `ls` lists the whole package; `[tools] run` limits the commands
//! (a refused one is told the patterns) or, empty, takes the tool away; a command that
//! times out or prints megabytes ends with a result saying so and the task goes on; writes
//! into a neighbour's worktree or the user's checkout change nothing, and a write of a file
//! the task does not own in its view is a violation on no branch.

use std::fs;

use plait_core::state::{RunState, TaskState};
use serde_json::json;

use crate::mock::{edit, MockModel, Provider, ToolCall, Turn};
use crate::support::{skip, stderr, stdout, Plan, TestRepo};

const KEY: &str = "sk-test-secret-0123456789";

const CORE: &str = "from pkg.util import double\n\n\ndef quadruple(x):\n    return double(x) + x\n";
const UTIL: &str = "def double(x):\n    return 2 * x\n";
const TEST: &str = "import unittest\n\nfrom pkg.core import quadruple\n\n\nclass T(unittest.TestCase):\n    def test_quadruple(self):\n        self.assertEqual(quadruple(3), 12)\n";
const UNITTEST: &str = "python3 -m unittest tests.test_core";

/// A Python package whose test imports `pkg.util`, which task `a` (owning `pkg/core.py`)
/// does not own: task `b` does.
fn sample() -> TestRepo {
    TestRepo::with_files(&[
        (".gitignore", "__pycache__/\n"),
        ("pkg/__init__.py", ""),
        ("pkg/core.py", CORE),
        ("pkg/util.py", UTIL),
        ("tests/__init__.py", ""),
        ("tests/test_core.py", TEST),
    ])
}

fn plan(mock: &MockModel) -> Plan {
    let (kind, model) = match mock.provider() {
        Provider::Anthropic => ("anthropic", "claude-sonnet-4-5"),
        Provider::OpenAi => ("openai", "gpt-4.1"),
    };
    Plan::new()
        .goal("Make quadruple right")
        .mock(kind, &mock.url(), model)
        .set("providers.mock", "max_tokens", 1024)
        .review_off()
        .set("defaults", "agent", "mock")
        .set("defaults", "timeout", "60s")
        .task("a")
        .prompt("Fix quadruple in pkg/core.py")
        .owns(["/pkg/core.py"])
        .task("b")
        .prompt("Leave pkg/util.py alone")
        .owns(["/pkg/util.py"])
        .with("expect_changes", false)
}

fn env(name: &str) -> Option<String> {
    (name == "PLAIT_TEST_KEY").then(|| KEY.to_string())
}

fn run(command: &str) -> ToolCall {
    ToolCall::new("run", json!({"command": command}))
}

fn run_for(command: &str, timeout_s: f64) -> ToolCall {
    ToolCall::new("run", json!({"command": command, "timeout_s": timeout_s}))
}

/// The names of the tools the first request of `task` offered.
fn offered(mock: &MockModel, task: &str) -> Vec<String> {
    let request = mock
        .requests()
        .into_iter()
        .find(|r| r.task.as_deref() == Some(task))
        .expect("a request of the task");
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().or(t["function"]["name"].as_str()))
        .map(str::to_string)
        .collect()
}

/// The fix: the test fails, the model edits its file, the test passes, `ls` looks around.
fn fix_script() -> Vec<Turn> {
    vec![
        Turn::Tools(vec![run(UNITTEST)]),
        Turn::Tools(vec![edit::str_replace(
            "pkg/core.py",
            "return double(x) + x",
            "return double(double(x))",
        )]),
        Turn::Tools(vec![run(UNITTEST), run("ls pkg")]),
        Turn::Text("quadruple fixed; the test passes".into()),
    ]
}

#[test]
fn a_test_importing_a_module_not_owned_runs_in_the_whole_tree_through_the_binary() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script("a", fix_script());
    mock.script("b", vec![Turn::Text("nothing to do".into())]);
    let plan_path = repo.plan(&plan(&mock).to_toml());
    let out = repo.plait_env(
        &["run", plan_path.to_str().unwrap(), "-j", "2"],
        &[("PLAIT_TEST_KEY", KEY)],
    );
    assert_eq!(mock.problems(), Vec::<String>::new());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(offered(&mock, "a").contains(&"run".to_string()));

    let results = mock.tool_texts("a");
    let (failing, passing, listing) = (&results[0], &results[2], &results[3]);
    assert!(failing.0.contains("exit status 1"), "{failing:?}");
    assert!(failing.0.contains("AssertionError: 9 != 12"), "{failing:?}");
    assert!(
        !failing.1,
        "a failing command is a result, not a tool error"
    );
    assert!(
        passing
            .0
            .starts_with(&format!("$ {UNITTEST}\nexit status 0")),
        "{passing:?}"
    );
    assert!(passing.0.contains("\nOK\n"), "{passing:?}");
    for file in ["__init__.py", "core.py", "util.py"] {
        assert!(listing.0.lines().any(|l| l == file), "{listing:?}");
    }

    let json = repo.status_json(&[]);
    let a = json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "a")
        .unwrap();
    assert_eq!(a["state"], "done");
    assert_eq!(a["usage"]["runs"], 3, "{}", a["usage"]);
    assert!(a["usage"]["run_ms"].as_u64().is_some());
    assert!(a["violations"].as_array().unwrap().is_empty(), "{a}");
    let status = stdout(&repo.plait(&["status"]));
    assert!(status.contains("RUNS"), "{status}");
    assert!(
        status.contains("commands: 3 run by model agents"),
        "{status}"
    );
    // Each command's whole output is kept where the agent cannot write.
    let runs = repo.path.join(".git/plait");
    let logs: Vec<_> = walkdir::WalkDir::new(&runs)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_type().is_file() && e.path().parent().is_some_and(|p| p.ends_with("runs"))
        })
        .collect();
    assert_eq!(logs.len(), 3, "{logs:?}");
    // The transcript holds the calls and their results.
    let transcript = fs::read_to_string(
        a["log"]
            .as_str()
            .unwrap()
            .replace("agent.log", "transcript.jsonl"),
    )
    .unwrap();
    assert!(transcript.contains("AssertionError: 9 != 12"));
    let branch = a["branch"].as_str().unwrap();
    assert!(repo.tree_files(branch)["pkg/core.py"].contains("double(double(x))"));
}

#[test]
fn the_run_tool_works_on_openai_too() {
    let repo = sample();
    let mock = MockModel::start(Provider::OpenAi, KEY);
    mock.script("a", fix_script());
    mock.script("b", vec![Turn::Text("nothing to do".into())]);
    let state = repo.run_with_env(&plan(&mock).to_toml(), 2, &env);
    assert_eq!(mock.problems(), Vec::<String>::new());
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Done, "{:?}", a.error);
    let results = mock.tool_texts("a");
    assert!(results[2].0.contains("\nOK\n"), "{results:?}");
    assert_eq!(a.usage.as_ref().unwrap().runs, 3);
}

#[test]
fn tools_run_limits_the_commands_and_an_empty_list_takes_the_tool_away() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![run("rm -rf pkg"), run(UNITTEST)]),
            Turn::Text("done".into()),
        ],
    );
    mock.script("b", vec![Turn::Text("nothing to do".into())]);
    let limited = plan(&mock).set("tools", "run", ["python3 -m unittest *", "ls"]);
    let state = repo.run_with_env(&limited.to_toml(), 2, &env);
    assert_eq!(mock.problems(), Vec::<String>::new());
    let results = mock.tool_texts("a");
    let (refused, allowed) = (&results[0], &results[1]);
    assert!(refused.1, "{refused:?}");
    assert!(
        refused.0.contains("`rm -rf pkg` may not run here")
            && refused.0.contains("`python3 -m unittest *`, `ls`"),
        "{refused:?}"
    );
    assert!(allowed.0.contains("exit status 1"), "{allowed:?}");
    assert!(repo.path.join("pkg/core.py").exists());
    let a = state.task("a").unwrap();
    assert_eq!(
        a.usage.as_ref().unwrap().runs,
        1,
        "a refused command does not run"
    );
    let request = mock
        .requests()
        .into_iter()
        .find(|r| r.task.as_deref() == Some("a"));
    let schema = request.unwrap().body["tools"].to_string();
    assert!(schema.contains("python3 -m unittest *"), "{schema}");

    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script("a", vec![Turn::Text("done".into())]);
    mock.script("b", vec![Turn::Text("done".into())]);
    let no_run = plan(&mock).set("tools", "run", Vec::<String>::new());
    repo.run_with_env(&no_run.to_toml(), 2, &env);
    assert_eq!(mock.problems(), Vec::<String>::new());
    let tools = offered(&mock, "a");
    assert!(!tools.contains(&"run".to_string()), "{tools:?}");
    assert!(tools.contains(&"list_files".to_string()), "{tools:?}");
}

#[test]
fn a_command_that_times_out_or_prints_megabytes_ends_cleanly_and_the_task_goes_on() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let flood = "head -c 5000000 /dev/zero | tr '\\0' x | fold -w 99; echo the end";
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![run_for("echo started; sleep 30", 1.0)]),
            Turn::Tools(vec![run(flood)]),
            Turn::Tools(vec![run("cat > /dev/null; echo read nothing")]),
            Turn::Tools(vec![edit::str_replace(
                "pkg/core.py",
                "return double(x) + x",
                "return double(double(x))",
            )]),
            Turn::Text("done".into()),
        ],
    );
    mock.script("b", vec![Turn::Text("nothing to do".into())]);
    let started = std::time::Instant::now();
    let state = repo.run_with_env(&plan(&mock).to_toml(), 2, &env);
    assert!(
        started.elapsed().as_secs() < 25,
        "the sleep was not cut short"
    );
    assert_eq!(mock.problems(), Vec::<String>::new());
    let results = mock.tool_texts("a");
    let (slow, flood, stdin) = (&results[0], &results[1], &results[2]);
    assert!(slow.1 && slow.0.contains("timed out after 1s"), "{slow:?}");
    assert!(slow.0.contains("started"), "{slow:?}");
    assert!(
        !flood.1 && flood.0.contains("exit status 0"),
        "{}",
        &flood.0[..200]
    );
    assert!(
        flood.0.contains("MB cut; the whole output is in "),
        "{}",
        &flood.0[..300]
    );
    assert!(flood.0.ends_with("the end\n"));
    assert!(flood.0.len() < 14_000, "{}", flood.0.len());
    assert!(
        stdin.0.contains("exit status 0 after") && stdin.0.contains("read nothing"),
        "{stdin:?}"
    );
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Done, "{:?}", a.error);
    assert_eq!(a.usage.as_ref().unwrap().runs, 3);
    assert!(repo.tree_files(&a.branch)["pkg/core.py"].contains("double(double(x))"));
}

#[test]
fn a_command_changes_no_neighbour_nor_the_checkout_and_a_write_not_owned_is_a_violation() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let checkout = repo.path.join("pkg/util.py");
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![
                run("echo 'double = None' >> \"$PLAIT_WORKTREE/../b/pkg/util.py\""),
                run(&format!("echo 'double = None' >> '{}'", checkout.display())),
                run("echo 'double = None' >> pkg/util.py && echo wrote"),
            ]),
            Turn::Text("done".into()),
        ],
    );
    mock.script("b", vec![Turn::Text("nothing to do".into())]);
    let state: RunState = repo.run_with_env(&plan(&mock).to_toml(), 2, &env);
    assert_eq!(mock.problems(), Vec::<String>::new());
    let results = mock.tool_texts("a");
    assert!(results[2].0.contains("wrote"), "{results:?}");
    if confined() {
        assert!(!results[0].0.contains("exit status 0"), "{results:?}");
        assert!(!results[1].0.contains("exit status 0"), "{results:?}");
        assert_eq!(fs::read_to_string(&checkout).unwrap(), UTIL);
        let b = state.task("b").unwrap();
        let neighbour = b.worktree.join("pkg/util.py");
        assert_eq!(fs::read_to_string(neighbour).unwrap(), UTIL);
    }
    let a = state.task("a").unwrap();
    let violations: Vec<&str> = a.violations.iter().map(|v| v.path.as_str()).collect();
    assert_eq!(violations, ["pkg/util.py"], "{a:?}");
    assert_eq!(a.commit, None, "{a:?}");
    for branch in repo.branches() {
        assert_eq!(repo.tree_files(&branch)["pkg/util.py"], UTIL, "{branch}");
    }
}

/// Whether this kernel confines a task's processes; the assertions that need it say so
/// when it does not.
fn confined() -> bool {
    match plait_sandbox::sandbox::support() {
        plait_sandbox::sandbox::Support::Landlock(_) => true,
        plait_sandbox::sandbox::Support::Missing(why) => {
            eprintln!("not checked: this system cannot confine processes ({why})");
            false
        }
    }
}

#[test]
fn a_bad_run_glob_is_a_plan_error_and_a_dry_run_shows_the_commands() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let bad = repo.plan(&plan(&mock).set("tools", "run", ["cargo [test"]).to_toml());
    let out = repo.plait_env(
        &["plan", "--check", bad.to_str().unwrap()],
        &[("PLAIT_TEST_KEY", KEY)],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[tools] run: `cargo [test` is not a valid glob"),
        "{}",
        stderr(&out)
    );
    let good = repo.plan(&plan(&mock).set("tools", "run", ["cargo *"]).to_toml());
    let out = repo.plait_env(
        &["run", "--dry-run", good.to_str().unwrap()],
        &[("PLAIT_TEST_KEY", KEY)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("· run: `cargo *`"),
        "{}",
        stdout(&out)
    );
    assert_eq!(mock.count("a"), 0, "a dry run asks no model");
}

/// Under a terminal (plait started by `script`, as from a shell), a command that opens
/// `/dev/tty` to ask something is told there is none, at once: it never stops in the
/// background waiting for the terminal until its time runs out.
#[test]
fn a_command_asking_the_terminal_is_told_there_is_none_and_does_not_wait() {
    if !plait_sandbox::shell::findable("script", std::env::var("PATH").ok().as_deref()) {
        skip("no `script` to give plait a terminal");
        return;
    }
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![run_for(
                "read answer < /dev/tty; echo \"read status $?\"",
                60.0,
            )]),
            Turn::Text("done".into()),
        ],
    );
    mock.script("b", vec![Turn::Text("nothing to do".into())]);
    let plan_path = repo.plan(&plan(&mock).to_toml());
    crate::support::init();
    let command = format!(
        "'{}' run '{}' -j 2",
        env!("CARGO_BIN_EXE_plait"),
        plan_path.display()
    );
    let started = std::time::Instant::now();
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(&repo.path)
        .env("PLAIT_TEST_KEY", KEY)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(mock.problems(), Vec::<String>::new());
    let results = mock.tool_texts("a");
    let shown = stdout(&out);
    let tail: String = shown
        .chars()
        .skip(shown.chars().count().saturating_sub(2000))
        .collect();
    assert_eq!(results.len(), 1, "{tail}");
    let text = &results[0].0;
    assert!(text.contains("read status"), "{text}");
    assert!(!text.contains("read status 0"), "{text}");
    assert!(!text.contains("timed out"), "{text}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(50),
        "the command waited for the terminal: {text}"
    );
}
