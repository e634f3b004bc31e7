//! A second day without surprises (issue 43), through the real binary: the caches build
//! tools write are build output, not violations, in a repository without a `.gitignore`; a
//! failure points at the log that holds its cause (a model agent's transcript, a failing
//! check's log); every `events.jsonl` line says when it happened.

use plait_core::state::TaskState;

use crate::mock::{MockModel, Provider, Turn};
use crate::support::{stderr, stdout, task_json, Plan, TestRepo};

/// A Python package and a crate side by side, without a `.gitignore`.
fn no_gitignore() -> TestRepo {
    TestRepo::with_files(&[
        ("Cargo.toml", "[package]\nname = \"x\"\n"),
        ("src/pkg/mod.py", "a = 1\n"),
        ("src/pkg/other.py", "b = 1\n"),
        ("tests/test_mod.py", "def test(): pass\n"),
    ])
}

/// A plan of one task `a` owning `owns`, whose agent runs `exec`.
fn owning(owns: &str, exec: &str) -> Plan {
    Plan::new().goal("g").exec_all(exec).task("a").owns([owns])
}

/// A plan of one exec task `a` owning `src/pkg/mod.py`.
fn one_task(exec: &str) -> String {
    owning("src/pkg/mod.py", exec).to_toml()
}

/// Runs `toml` with the real binary; the run's id.
fn run(repo: &TestRepo, toml: &str) -> String {
    let path = repo.plan(toml);
    let out = repo.plait(&["run", path.to_str().unwrap()]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "plait run: {}",
        stderr(&out)
    );
    stdout(&out).trim().to_string()
}

/// What pytest and cargo leave behind, as an agent's view would get it.
const CACHES: &str = "mkdir -p src/pkg/__pycache__ .pytest_cache/v tests/__pycache__ target/debug \
     && printf '\\0pyc' > src/pkg/__pycache__/mod.cpython-311.pyc \
     && printf '\\0pyc' > tests/__pycache__/test_mod.cpython-311-pytest-8.pyc \
     && echo x > .pytest_cache/v/x && echo elf > target/debug/foo";

#[test]
fn caches_build_tools_write_are_build_output_without_a_gitignore() {
    let repo = no_gitignore();
    let run = run(
        &repo,
        &one_task(&format!("{CACHES} && echo 'a = 2' > src/pkg/mod.py")),
    );
    let json = repo.status_json(&[&run]);
    let a = task_json(&json, "a");
    assert_eq!(a["state"], "done", "{json:#}");
    assert_eq!(a["violations"], serde_json::json!([]), "{json:#}");
    assert_eq!(a["changes"].as_array().unwrap().len(), 1, "{json:#}");
    let branch = a["branch"].as_str().unwrap();
    assert_eq!(
        repo.git(&["diff", "--name-only", "main", branch]),
        "src/pkg/mod.py"
    );

    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(repo.read("src/pkg/mod.py"), "a = 2\n");
    assert_eq!(
        repo.git(&["ls-tree", "-r", "--name-only", "main"]),
        "Cargo.toml\nsrc/pkg/mod.py\nsrc/pkg/other.py\ntests/test_mod.py"
    );
    // With no change left behind, the run's worktrees go without `--force`.
    let out = repo.plait(&["clean", &run]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn other_writes_beside_the_caches_are_still_violations() {
    let repo = TestRepo::with_files(&[
        ("src/pkg/mod.py", "a = 1\n"),
        // Committed by mistake: a tracked cache is a file like any other.
        ("src/pkg/__pycache__/old.cpython-311.pyc", "old\n"),
        // No Cargo.toml beside it: this `target/` is the project's own.
        ("lib/target/keep.txt", "k\n"),
    ]);
    let run = run(
        &repo,
        &one_task(&format!(
            "{CACHES} && echo 'a = 2' > src/pkg/mod.py && echo n > notes.txt \
             && echo new > src/pkg/__pycache__/old.cpython-311.pyc && mkdir -p lib/target && echo t > lib/target/new.txt"
        )),
    );
    let json = repo.status_json(&[&run]);
    let a = task_json(&json, "a");
    let violations: Vec<&str> = a["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        violations,
        [
            "lib/target/new.txt",
            "notes.txt",
            "src/pkg/__pycache__/old.cpython-311.pyc",
            "target/debug/foo",
        ],
        "{json:#}"
    );
}

/// Lib files `a` and `b`, each owned by its task.
fn two_files() -> TestRepo {
    TestRepo::with_files(&[("lib/a.txt", "a\n"), ("lib/b.txt", "b\n")])
}

#[test]
fn a_model_agent_s_failure_points_at_its_transcript_and_is_on_this_machine() {
    const KEY: &str = "sk-test-second-day-0123456789";
    let repo = two_files();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "a",
        (0..5)
            .map(|_| Turn::Tools(vec![crate::mock::edit::view("lib/a.txt")]))
            .collect(),
    );
    let toml = Plan::on_mock(&mock.url())
        .set("providers.mock", "stream", false)
        .set("defaults", "timeout", "60s")
        .set("defaults", "max_turns", 2)
        .task("a")
        .prompt("Look at lib/a.txt")
        .owns(["lib/a.txt"])
        .to_toml();
    let state = repo.run_with_env(&toml, 1, &|name| {
        (name == "PLAIT_TEST_KEY").then(|| KEY.to_string())
    });
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Failed);
    let run = state.id.clone();

    let json = repo.status_json(&[&run]);
    let failure = &json["failures"][0];
    assert_eq!(failure["step"], "agent", "{failure:#}");
    assert!(
        failure["log"]
            .as_str()
            .unwrap()
            .ends_with("/tasks/a/transcript.jsonl"),
        "{failure:#}"
    );
    assert_eq!(failure["show"], format!("plait log {run} a --transcript"));
    assert_eq!(failure["here"], true);
    assert!(
        failure["tail"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("lib/a.txt")),
        "the tail is the conversation's end: {failure:#}"
    );

    let status = stdout(&repo.plait(&["status", &run]));
    assert!(
        status.contains(&format!("plait log {run} a --transcript")),
        "{status}"
    );
    assert!(!status.contains("not on this machine"), "{status}");

    // As on another machine: the record alone, nothing the task wrote.
    let task_dir = a.log.parent().unwrap();
    std::fs::remove_file(task_dir.join("transcript.jsonl")).unwrap();
    let _ = std::fs::remove_dir_all(task_dir.join("scratch"));
    let _ = std::fs::remove_dir_all(task_dir.join("runs"));
    let _ = std::fs::remove_file(&a.log);
    std::fs::remove_dir_all(&a.worktree).unwrap();
    let status = stdout(&repo.plait(&["status", &run]));
    assert!(status.contains("is not on this machine"), "{status}");
    assert_eq!(repo.status_json(&[&run])["failures"][0]["here"], false);
}

/// A task check that passes on the base and fails once the agent wrote `bad`.
const CHECK: &str =
    "! grep -q bad lib/$PLAIT_TASK.txt || { echo \"lib/$PLAIT_TASK.txt is bad\"; exit 1; }";

fn checked(agent: &str, rounds: u32) -> String {
    owning("lib/a.txt", agent)
        .set("checks", "task", ["true", CHECK])
        .set("review", "rounds", rounds)
        .to_toml()
}

#[test]
fn a_check_failed_task_names_the_check_and_its_log() {
    let repo = two_files();
    let run = run(&repo, &checked("echo bad > lib/a.txt", 0));
    let json = repo.status_json(&[&run]);
    assert_eq!(task_json(&json, "a")["state"], "failed", "{json:#}");
    let failure = &json["failures"][0];
    assert_eq!(
        failure["step"],
        format!("check 2: `{CHECK}`"),
        "{failure:#}"
    );
    let log = failure["log"].as_str().unwrap();
    assert!(log.ends_with("/tasks/a/checks-0/check-2.log"), "{log}");
    assert_eq!(failure["show"], format!("plait log {run} a --checks"));
    // The log opens with the command, then its output.
    assert_eq!(
        failure["tail"],
        serde_json::json!([format!("$ {CHECK}"), "lib/a.txt is bad"])
    );

    let status = stdout(&repo.plait(&["status", &run]));
    assert!(
        status.contains(&format!("  check 2: `{CHECK}` failed; its log {log}")),
        "{status}"
    );
    assert!(status.contains("      lib/a.txt is bad\n"), "{status}");
}

#[test]
fn an_agent_failing_after_a_round_of_failed_checks_is_the_agent_s_failure() {
    let repo = two_files();
    let agent = "if [ \"$PLAIT_ROUND\" = 0 ]; then echo bad > lib/a.txt; else echo 'gave up' >&2; exit 3; fi";
    let run = run(&repo, &checked(agent, 1));
    let failure = &repo.status_json(&[&run])["failures"][0];
    assert_eq!(failure["step"], "agent", "{failure:#}");
    assert!(
        failure["log"]
            .as_str()
            .unwrap()
            .ends_with("/tasks/a/agent.log"),
        "{failure:#}"
    );
    assert_eq!(failure["tail"], serde_json::json!(["gave up"]));
}

#[test]
fn every_events_line_says_when_in_rfc_3339() {
    let repo = two_files();
    let run = run(&repo, &one_task_of("echo v1 > lib/a.txt"));
    let events = std::fs::read_to_string(
        repo.path
            .join(format!(".git/plait/runs/{run}/events.jsonl")),
    )
    .unwrap();
    assert!(events.lines().count() >= 2, "{events}");
    for line in events.lines() {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        let at = event["at"]
            .as_str()
            .unwrap_or_else(|| panic!("no at: {line}"));
        assert!(at.ends_with('Z'), "{at}");
        humantime::parse_rfc3339(at).unwrap_or_else(|e| panic!("{at}: {e}"));
    }
}

fn one_task_of(agent: &str) -> String {
    owning("lib/a.txt", agent).to_toml()
}

/// A task owning a whole directory does not commit the caches its tests leave there.
#[test]
fn a_directory_owned_whole_keeps_its_caches_out_of_the_branch() {
    let repo = no_gitignore();
    let exec = "mkdir -p src/pkg/__pycache__ && printf '\\0pyc' > src/pkg/__pycache__/mod.cpython-311.pyc \
                && echo 'a = 2' > src/pkg/mod.py";
    let whole = owning("src/pkg/**", exec).to_toml();
    let run = run(&repo, &whole);
    let json = repo.status_json(&[&run]);
    let a = task_json(&json, "a");
    assert_eq!(a["state"], "done", "{json:#}");
    assert_eq!(a["violations"], serde_json::json!([]), "{json:#}");
    let files = repo.tree_files(&format!("plait/{run}/a"));
    assert!(
        !files.keys().any(|p| p.contains("__pycache__")),
        "{files:?}"
    );
    assert_eq!(files["src/pkg/mod.py"], "a = 2\n");
}
