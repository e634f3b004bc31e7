//! Model agents against the mock model server: the edit loop on both providers, streamed
//! and not; ownership, path confinement, loops, broken answers and bad keys.

use std::fs;
use std::time::Duration;

use plait_core::state::{RunState, TaskState};
use serde_json::json;

use crate::mock::{edit, MockModel, Provider, ToolCall, Turn};
use crate::support::plan::Raw;
use crate::support::{Plan, TestRepo};

const KEY: &str = "sk-test-secret-0123456789";

fn sample() -> TestRepo {
    let repo = TestRepo::with_files(&[
        ("lib/a.py", "def f():\n    return 1\n"),
        ("lib/b.py", "b = 1\n"),
        ("docs/notes.md", "notes\n"),
        ("lib/new/keep.txt", "\n"),
    ]);
    fs::write(repo.path.join("lib/blob.bin"), [0u8, 1, 2, 3, 0, 255]).unwrap();
    std::os::unix::fs::symlink("../..", repo.path.join("lib/escape")).unwrap();
    repo.commit_all("binary and symlink");
    repo
}

fn plan(mock: &MockModel, provider: Provider, stream: bool) -> Plan {
    let (kind, model) = match provider {
        Provider::Anthropic => ("anthropic", "claude-sonnet-4-5"),
        Provider::OpenAi => ("openai", "gpt-4.1"),
    };
    Plan::new()
        .goal("Make f return 2")
        .mock(kind, &mock.url(), model)
        .set("providers.mock", "max_tokens", 1024)
        .set("providers.mock", "stream", stream)
        .review_off()
        .set("defaults", "agent", "mock")
        .set("defaults", "timeout", "60s")
        .task("a")
        .prompt("Make f in lib/a.py return 2")
        .owns(["/lib/a.py", "/lib/blob.bin", "/lib/escape", "/lib/new/"])
        .task("b")
        .prompt("Leave lib/b.py alone")
        .owns(["/lib/b.py"])
}

/// A repository of `n` files `m/tNN.txt` and a plan [`Plan::on_mock`] of a task `tNN` for each,
/// whose model pauses its turn once and then is done.
fn paused_tasks(mock: &MockModel, n: usize) -> (TestRepo, Plan) {
    let files: Vec<(String, String)> = (0..n)
        .map(|k| (format!("m/t{k:02}.txt"), format!("{k}\n")))
        .collect();
    let repo = TestRepo::with_owned_files(&files);
    let mut plan = Plan::on_mock(&mock.url());
    for k in 0..n {
        let id = format!("t{k:02}");
        mock.script(&id, vec![Turn::PauseTurn, Turn::Text("done".into())]);
        plan = plan.task(&id).owns([format!("/m/{id}.txt")]);
    }
    (repo, plan)
}

fn env(name: &str) -> Option<String> {
    (name == "PLAIT_TEST_KEY").then(|| KEY.to_string())
}

fn run(repo: &TestRepo, mock: &MockModel, provider: Provider, stream: bool) -> RunState {
    repo.run_with_env(&plan(mock, provider, stream).to_toml(), 2, &env)
}

#[test]
fn a_full_edit_loop_works_on_both_providers_streamed_and_not() {
    for provider in [Provider::Anthropic, Provider::OpenAi] {
        for stream in [true, false] {
            let repo = sample();
            let mock = MockModel::start(provider, KEY);
            mock.script(
                "a",
                vec![
                    Turn::Tools(vec![edit::view("lib/a.py")]),
                    Turn::Tools(vec![
                        edit::str_replace("lib/a.py", "return 1", "return 2"),
                        ToolCall::new("search", json!({"pattern": "def f", "glob": "lib/*.py"})),
                    ]),
                    Turn::Text("f now returns 2".into()),
                ],
            );
            mock.script("b", vec![Turn::Text("nothing to do".into())]);
            let state = run(&repo, &mock, provider, stream);
            let label = format!("{provider:?} stream={stream}");
            assert_eq!(mock.problems(), Vec::<String>::new(), "{label}");
            let a = state.task("a").unwrap();
            assert_eq!(a.state, TaskState::Done, "{label}: {:?}", a.error);
            assert_eq!(
                repo.tree_files(&a.branch)["lib/a.py"],
                "def f():\n    return 2\n",
                "{label}"
            );
            assert_eq!(a.summary.as_deref(), Some("f now returns 2"), "{label}");
            let usage = a.usage.as_ref().unwrap();
            assert_eq!(
                (
                    usage.requests,
                    usage.turns,
                    usage.input_tokens,
                    usage.output_tokens
                ),
                (3, 3, 300, 60),
                "{label}"
            );
            let expected = match provider {
                Provider::Anthropic => 3.0 * (100.0 * 3.0 + 20.0 * 15.0) / 1e6,
                Provider::OpenAi => 3.0 * (100.0 * 2.0 + 20.0 * 8.0) / 1e6,
            };
            assert!(
                (usage.cost_usd.unwrap() - expected).abs() < 1e-9,
                "{label}: {usage:?}"
            );
            assert!(usage.first_token_ms.is_some());
            let results = mock.tool_texts("a");
            assert!(
                results[0].0.contains("     2\t    return 1"),
                "{label}: {results:?}"
            );
            assert!(
                results[2].0.contains("lib/a.py:1: def f():"),
                "{label}: {results:?}"
            );
            assert_eq!(mock.count("a"), 3);
            assert_eq!(state.task("b").unwrap().commit, None);
            // Every request and response is kept, and the key is nowhere on disk.
            let transcript = fs::read_to_string(a.log.with_file_name("transcript.jsonl")).unwrap();
            assert_eq!(transcript.lines().count(), 3, "{label}");
            repo.assert_not_written(KEY);
            let merged = repo.tree_files(&state.merged_branch());
            assert_eq!(merged["lib/a.py"], "def f():\n    return 2\n");
        }
    }
}

#[test]
fn writes_outside_ownership_are_refused_and_counted() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![
                edit::create("lib/b.py", "stolen = True\n"),
                edit::str_replace("docs/notes.md", "notes", "mine"),
                edit::create("lib/new/mod.py", "fresh = 1\n"),
            ]),
            Turn::Text("done".into()),
        ],
    );
    let state = run(&repo, &mock, Provider::Anthropic, true);
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Done);
    assert_eq!(a.usage.as_ref().unwrap().refused_writes, 2);
    let results = mock.tool_texts("a");
    assert!(
        results[0].1 && results[0].0.contains("not owned by this task"),
        "{results:?}"
    );
    assert!(
        results[0]
            .0
            .contains("/lib/a.py, /lib/blob.bin, /lib/escape, /lib/new/"),
        "{results:?}"
    );
    assert!(results[1].1);
    assert!(!results[2].1, "{results:?}");
    assert!(
        a.violations.is_empty(),
        "refused writes never reach the disk"
    );
    let files = repo.tree_files(&a.branch);
    assert_eq!(files["lib/b.py"], "b = 1\n");
    assert_eq!(files["lib/new/mod.py"], "fresh = 1\n");
}

#[test]
fn paths_that_escape_and_binary_files_are_refused() {
    let repo = sample();
    let mock = MockModel::start(Provider::OpenAi, KEY);
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![
                edit::view("../outside.txt"),
                edit::view("/etc/passwd"),
                edit::create("lib/escape/pwned.txt", "x"),
                edit::view(".git/config"),
                edit::str_replace("lib/blob.bin", "a", "b"),
                edit::view("docs/notes.md"),
                ToolCall::new("no_such_tool", json!({})),
            ]),
            Turn::Text("done".into()),
        ],
    );
    let state = run(&repo, &mock, Provider::OpenAi, false);
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
    let results = mock.tool_texts("a");
    let errors: Vec<bool> = results.iter().map(|r| r.1).collect();
    assert_eq!(
        errors,
        [true, true, true, true, true, false, true],
        "{results:?}"
    );
    assert!(results[0].0.contains("`..` may not leave the repository"));
    assert!(results[1].0.contains("absolute path"));
    assert!(
        results[2]
            .0
            .contains("passes through a symlink in the worktree"),
        "{results:?}"
    );
    assert!(results[3].0.contains("`.git` is off limits"));
    assert!(results[4].0.contains("binary file"));
    assert!(
        results[5].0.contains("notes"),
        "non-owned files are read from the base"
    );
    assert!(!repo.path.parent().unwrap().join("pwned.txt").exists());
    assert_eq!(state.task("a").unwrap().state, TaskState::Done);
}

#[test]
fn a_looping_agent_is_stopped_by_max_turns() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "a",
        (0..10)
            .map(|_| Turn::Tools(vec![edit::view("lib/a.py")]))
            .collect(),
    );
    let toml = plan(&mock, Provider::Anthropic, true)
        .set("defaults", "max_turns", 3)
        .to_toml();
    let state = repo.run_with_env(&toml, 2, &env);
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Failed);
    assert_eq!(
        a.error.as_deref(),
        Some("max_turns (3) reached before the agent finished")
    );
    assert_eq!(mock.count("a"), 3);
    assert_eq!(a.usage.as_ref().unwrap().turns, 3);
}

#[test]
fn malformed_and_truncated_answers_are_retried() {
    for provider in [Provider::Anthropic, Provider::OpenAi] {
        for stream in [true, false] {
            let repo = sample();
            let mock = MockModel::start(provider, KEY);
            mock.script(
                "a",
                vec![
                    Turn::Malformed,
                    Turn::Truncated,
                    Turn::ErrorEvent,
                    Turn::Tools(vec![edit::str_replace("lib/a.py", "return 1", "return 2")]),
                    Turn::Text("done".into()),
                ],
            );
            let state = run(&repo, &mock, provider, stream);
            let label = format!("{provider:?} stream={stream}");
            let a = state.task("a").unwrap();
            assert_eq!(a.state, TaskState::Done, "{label}: {:?}", a.error);
            let usage = a.usage.as_ref().unwrap();
            assert_eq!(
                (usage.retries, usage.turns, usage.requests),
                (3, 2, 5),
                "{label}"
            );
            assert_eq!(
                repo.tree_files(&a.branch)["lib/a.py"],
                "def f():\n    return 2\n"
            );
            let transcript = fs::read_to_string(a.log.with_file_name("transcript.jsonl")).unwrap();
            assert_eq!(transcript.lines().count(), 5, "{label}");
            assert!(transcript.contains("\"error\""), "{label}");
        }
    }
}

#[test]
fn a_bad_key_fails_with_a_message_naming_the_variable() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, "sk-the-right-key");
    let state = run(&repo, &mock, Provider::Anthropic, true);
    for task in &state.tasks {
        assert_eq!(task.state, TaskState::Failed);
        assert_eq!(
            task.error.as_deref(),
            Some("mock rejected the API key (401): check PLAIT_TEST_KEY")
        );
    }
    // A 401 is not retried, and once the key is rejected the other task does not try it.
    assert!(mock.count("a") <= 1 && mock.count("b") <= 1);
    assert!((1..=2).contains(&mock.requests().len()));
    repo.assert_not_written(KEY);
}

#[test]
fn a_missing_key_is_refused_before_anything_is_created() {
    let repo = sample();
    let mock = MockModel::start(Provider::OpenAi, KEY);
    let toml = plan(&mock, Provider::OpenAi, true).to_toml();
    let path = repo.plan(&toml);
    let git = plait_core::git::open(&repo.path).unwrap();
    let err = plait_plan::resolve_with_env(
        &git,
        plait_plan::parse(&toml, &path).unwrap(),
        &path,
        &|_| None,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains(
            "provider `mock` needs an API key: set the environment variable PLAIT_TEST_KEY"
        ),
        "{err}"
    );
    let out = repo.plait(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(crate::support::stderr(&out).contains("PLAIT_TEST_KEY"));
    assert_eq!(repo.branches(), ["main"]);
    assert_eq!(mock.requests().len(), 0);
}

#[test]
fn refusals_fail_the_task_and_limits_continue_it() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "a",
        vec![
            Turn::MaxTokens("I will now".into()),
            Turn::PauseTurn,
            Turn::Tools(vec![edit::insert("lib/a.py", 0, "# top")]),
            Turn::Text("done".into()),
        ],
    );
    mock.script("b", vec![Turn::Refusal]);
    let state = run(&repo, &mock, Provider::Anthropic, true);
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Done, "{:?}", a.error);
    assert_eq!(
        repo.tree_files(&a.branch)["lib/a.py"],
        "# top\ndef f():\n    return 1\n"
    );
    assert_eq!(mock.count("a"), 4);
    let b = state.task("b").unwrap();
    assert_eq!(
        (b.state, b.error.as_deref()),
        (TaskState::Failed, Some("the model refused the task"))
    );
}

#[test]
fn the_system_prompt_carries_goal_task_and_ownership_and_is_cached() {
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    run(&repo, &mock, Provider::Anthropic, false);
    let requests = mock.requests();
    let a = requests
        .iter()
        .find(|r| r.task.as_deref() == Some("a"))
        .unwrap();
    let b = requests
        .iter()
        .find(|r| r.task.as_deref() == Some("b"))
        .unwrap();
    let system = &a.body["system"];
    assert_eq!(system[0]["cache_control"]["type"], "ephemeral");
    assert_eq!(
        system[0], b.body["system"][0],
        "the cached part is the same for every task"
    );
    assert!(system[0]["text"]
        .as_str()
        .unwrap()
        .contains("Make f return 2"));
    let task = system[1]["text"].as_str().unwrap();
    assert!(
        task.contains("Task id: a") && task.contains("Make f in lib/a.py return 2"),
        "{task}"
    );
    assert!(
        task.contains("/lib/a.py") && task.contains("lib/blob.bin"),
        "{task}"
    );
    assert_eq!(a.headers["anthropic-version"], "2023-06-01");
    assert_eq!(a.body["max_tokens"], 1024);
}

#[test]
fn an_unknown_model_has_an_unknown_cost_never_a_made_up_one() {
    assert!(plait_llm::provider::default_prices("my-local-llama").is_none());
    let known =
        plait_llm::provider::default_prices("anthropic/claude-sonnet-4-5-20250929").unwrap();
    assert_eq!((known.input, known.output), (3.0, 15.0));
    let repo = sample();
    let mock = MockModel::start(Provider::OpenAi, KEY);
    let toml = plan(&mock, Provider::OpenAi, true)
        .set("providers.mock", "model", "my-local-llama")
        .to_toml();
    let state = repo.run_with_env(&toml, 2, &env);
    let usage = state.task("a").unwrap().usage.clone().unwrap();
    assert_eq!(usage.cost_usd, None);
    assert_eq!(usage.input_tokens, 100);
    let text = plait_stages::report::status_text(&state, false);
    assert!(
        text.contains("cost unknown (no prices for the model)"),
        "{text}"
    );
}

#[test]
fn budgets_stop_tasks_at_a_turn_boundary() {
    // The run's budget: one turn of task a ($0.0006) spends it; nothing else starts.
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![edit::view("lib/a.py")]),
            Turn::Text("done".into()),
        ],
    );
    // Whichever task goes first is stopped after its first turn; the other never starts.
    mock.script(
        "b",
        vec![
            Turn::Tools(vec![edit::view("lib/b.py")]),
            Turn::Text("done".into()),
        ],
    );
    repo.max_cost.set(Some(0.0001));
    let state = repo.run_with_env(&plan(&mock, Provider::Anthropic, true).to_toml(), 1, &env);
    let states: Vec<TaskState> = state.tasks.iter().map(|t| t.state).collect();
    assert_eq!(states, [TaskState::Stopped, TaskState::Stopped]);
    for t in &state.tasks {
        let error = t.error.as_deref().unwrap();
        assert!(
            error.starts_with("stopped by budget: the run spent $0.0006 of its $0.00"),
            "{error}"
        );
    }
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(state.max_cost, Some(0.0001));
    let attention = plait_stages::report::attention(&state);
    assert!(
        attention
            .iter()
            .any(|a| a == "2 task(s) stopped by a budget: a, b"),
        "{attention:?}"
    );

    // A task's token budget: 120 tokens a turn, 150 allowed: a second turn, no third.
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "a",
        (0..5)
            .map(|_| Turn::Tools(vec![edit::view("lib/a.py")]))
            .collect(),
    );
    let toml = plan(&mock, Provider::Anthropic, true)
        .set("defaults", "token_budget", 150)
        .to_toml();
    let state = repo.run_with_env(&toml, 2, &env);
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Stopped);
    assert_eq!(
        a.error.as_deref(),
        Some("stopped by budget: the task used 240 of its 150 tokens")
    );
    assert_eq!(mock.count("a"), 2);
}

#[test]
fn each_retry_rule_and_each_final_error_is_honoured() {
    // (status, body, headers, retried?)
    type Case = (u16, &'static str, Vec<(&'static str, &'static str)>, bool);
    let cases: Vec<Case> = vec![
        (408, "", vec![], true),
        (409, "", vec![], true),
        (429, "", vec![("retry-after", "0")], true),
        (429, "", vec![("retry-after-ms", "20")], true),
        (500, "", vec![], true),
        (503, "", vec![], true),
        (529, "", vec![], true),
        (400, "", vec![("x-should-retry", "true")], true),
        (503, "", vec![("x-should-retry", "false")], false),
        (400, "", vec![], false),
        (403, "", vec![], false),
        (404, "", vec![], false),
        (413, "", vec![], false),
        // Anthropic: a 429 without retry-after is a spend cap.
        (429, "", vec![], false),
    ];
    for (status, body, headers, retried) in cases {
        let repo = sample();
        let mock = MockModel::start(Provider::Anthropic, KEY);
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        mock.script(
            "a",
            vec![
                Turn::Status {
                    status,
                    body: body.to_string(),
                    headers: headers.clone(),
                },
                Turn::Text("done".into()),
            ],
        );
        mock.script("b", vec![Turn::Text("done".into())]);
        let state = run(&repo, &mock, Provider::Anthropic, false);
        let a = state.task("a").unwrap();
        let label = format!("{status} {headers:?}");
        if retried {
            assert_eq!(a.state, TaskState::Done, "{label}: {:?}", a.error);
            assert_eq!(a.usage.as_ref().unwrap().retries, 1, "{label}");
            assert_eq!(mock.count("a"), 2, "{label}");
        } else {
            assert_eq!(a.state, TaskState::Failed, "{label}");
            assert!(
                a.error
                    .as_deref()
                    .unwrap()
                    .contains(&format!("answered {status}")),
                "{label}: {:?}",
                a.error
            );
            assert_eq!(mock.count("a"), 1, "{label}: not retried");
        }
    }
    // OpenAI: 429 insufficient_quota is final; 429 rate_limit_exceeded is retried.
    for (code, retried) in [("insufficient_quota", false), ("rate_limit_exceeded", true)] {
        let repo = sample();
        let mock = MockModel::start(Provider::OpenAi, KEY);
        let body = format!(
            "{{\"error\":{{\"message\":\"limit\",\"type\":\"requests\",\"code\":\"{code}\"}}}}"
        );
        mock.script(
            "a",
            vec![
                Turn::Status {
                    status: 429,
                    body,
                    headers: vec![],
                },
                Turn::Text("done".into()),
            ],
        );
        let state = run(&repo, &mock, Provider::OpenAi, false);
        let a = state.task("a").unwrap();
        assert_eq!(a.state == TaskState::Done, retried, "{code}: {:?}", a.error);
        assert_eq!(mock.count("a"), if retried { 2 } else { 1 }, "{code}");
    }
}

#[test]
fn the_conversation_is_cached_at_breakpoints_that_move_with_it() {
    // A file of ~8 KB: once its view is in the history, the prefix passes Sonnet 4.5's
    // 1,024-token minimum and every later turn marks its newest message and the turn before.
    let repo = TestRepo::with_files(&[
        ("lib/a.py", &"x = 1  # a line of the file\n".repeat(300)),
        ("lib/b.py", "b = 1\n"),
    ]);
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.set_caching(true);
    let mut turns: Vec<Turn> = (0..6)
        .map(|_| Turn::Tools(vec![edit::view("lib/a.py")]))
        .collect();
    turns.push(Turn::Text("done".into()));
    mock.script("a", turns);
    let toml = Plan::on_mock(&mock.url())
        .set("providers.mock", "stream", false)
        .set("defaults", "timeout", "60s")
        .task("a")
        .prompt("Look at lib/a.py")
        .owns(["/lib/a.py"])
        .to_toml();
    let state = repo.run_with_env(&toml, 1, &env);
    assert_eq!(
        state.tasks[0].state,
        TaskState::Done,
        "{:?}",
        state.tasks[0].error
    );
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let requests: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|r| r.task.as_deref() == Some("a"))
        .collect();
    assert_eq!(requests.len(), 7);
    let marked = |body: &serde_json::Value| -> Vec<usize> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                m["content"]
                    .as_array()
                    .is_some_and(|b| b.last().is_some_and(|b| b.get("cache_control").is_some()))
            })
            .map(|(k, _)| k)
            .collect()
    };
    // The first request is one short user message: nothing worth caching.
    assert!(marked(&requests[0].body).is_empty());
    for r in &requests[2..] {
        let n = r.body["messages"].as_array().unwrap().len();
        assert_eq!(marked(&r.body), [n - 3, n - 1], "turn of {n} messages");
    }
    // The mock caches as the API does: each turn reads the history the turn before wrote.
    let usage = state.tasks[0].usage.clone().unwrap();
    let all =
        usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens;
    assert!(
        usage.cache_read_input_tokens * 10 >= all * 6,
        "only {} of {all} input tokens read from the cache: {usage:?}",
        usage.cache_read_input_tokens
    );
    // At Sonnet 4.5's prices reads cost a tenth of input: the saving is known and shown.
    assert!(usage.cache_saved_usd > 0.0, "{usage:?}");
    let text = plait_stages::report::status_text(&state, false);
    assert!(text.contains("(the cache saved $"), "{text}");
    // The task's row says what share of its input came from the cache.
    let header = text
        .lines()
        .find(|l| l.starts_with("TASK"))
        .expect("header");
    assert!(header.contains("CACHED"), "{text}");
    let input =
        usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens;
    let share = format!("{}%", usage.cache_read_input_tokens * 100 / input);
    let row = text
        .lines()
        .find(|l| l.starts_with(&state.tasks[0].id))
        .expect("row");
    assert!(row.contains(&share), "{row} lacks {share}");
}

#[test]
fn a_run_keeps_to_a_token_bucket_it_learns_from_the_headers() {
    // 35 tasks of two requests against a server of 60 requests a minute as a bucket: the
    // first 60 go at once, the other 10 at one a second. plait knows no limit from the
    // plan; it learns the bucket from the answers' headers and keeps to it.
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.keep_bodies(false);
    mock.set_limits(60, 60, 1);
    let (repo, plan) = paused_tasks(&mock, 35);
    let toml = plan.set("defaults", "timeout", "120s").to_toml();
    let state = repo.run_with_env(&toml, 35, &env);
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    for t in &state.tasks {
        assert_eq!(t.state, TaskState::Done, "{}: {:?}", t.id, t.error);
    }
    let s = mock.load_stats();
    assert_eq!(s.ok, 70);
    // Not a 429 storm: at most the odd one at the bucket's edge.
    assert!(s.limited <= 3, "{} requests answered 429", s.limited);
}

#[test]
fn output_tokens_are_reserved_from_max_tokens_and_what_is_unused_comes_back() {
    // 30 tasks of two requests, each reserving its max_tokens of 1024 from an output bucket
    // of 10,240 a minute: ten fit at once. The answers use 20 tokens each, and what they do
    // not use comes back, so the run goes at once; kept, the reservations would take six
    // minutes to refill and the tasks would run out of their ten seconds.
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.keep_bodies(false);
    mock.set_output_limit(10_240);
    mock.set_latency(Duration::from_millis(50));
    let (repo, plan) = paused_tasks(&mock, 30);
    let toml = plan
        .set("providers.mock", "limits", Raw("{ output_tpm = 10240 }"))
        .set("defaults", "timeout", "10s")
        .to_toml();
    let state = repo.run_with_env(&toml, 30, &env);
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    for t in &state.tasks {
        assert_eq!(t.state, TaskState::Done, "{}: {:?}", t.id, t.error);
    }
    let s = mock.load_stats();
    assert_eq!(s.ok, 60);
    assert_eq!(s.output_tokens, 60 * 20);
    assert!(s.limited <= 3, "{} requests answered 429", s.limited);
    // Ten at once at the most: plait kept to the bucket rather than the server refusing.
    assert!(s.peak_in_flight <= 10, "{} in flight", s.peak_in_flight);
}

/// A process left behind swaps the owned file with a link to a key outside the repository
/// (`renameat2(RENAME_EXCHANGE)` in a loop) all through a model's 100 editor calls and the
/// collect after them: the key is never written, and is in no tool result, no file plait
/// keeps and no blob of the task's branch.
#[test]
fn a_flipper_never_turns_the_editor_nor_collect_in_a_run() {
    use crate::support::flipper;
    const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY----- the user's\n";
    let repo = TestRepo::with_files(&[("lib/a.py", "def f():\n    return 1\n")]);
    let home = tempfile::tempdir().unwrap();
    let key = home.path().join("id_rsa");
    fs::write(&key, SECRET).unwrap();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    // Time for the flipper to start on the worktree before the model's first answer.
    mock.set_latency(Duration::from_millis(1500));
    let calls: Vec<ToolCall> = (0..100)
        .map(|i| match i % 5 {
            0 => edit::str_replace("lib/a.py", "def f", "def f"),
            1 => edit::insert("lib/a.py", 0, &format!("# {i}")),
            2 => edit::create("lib/a.py", &format!("def f():\n    return {i}\n")),
            3 => edit::view("lib/a.py"),
            _ => ToolCall::new("search", json!({"pattern": "."})),
        })
        .collect();
    mock.script("a", vec![Turn::Tools(calls), Turn::Text("done".into())]);
    let toml = Plan::new()
        .goal("g")
        .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
        .set("providers.mock", "max_tokens", 1024)
        .review_off()
        .set("defaults", "agent", "mock")
        .set("defaults", "timeout", "60s")
        .task("a")
        .prompt("Edit lib/a.py")
        .owns(["/lib/"])
        .to_toml();
    // The flipper starts as soon as the task's worktree holds the file.
    let watcher = {
        let repo_path = repo.path.clone();
        let key = key.clone();
        std::thread::spawn(move || {
            let began = std::time::Instant::now();
            while began.elapsed() < Duration::from_secs(30) {
                let list = crate::support::git_in(&repo_path, &["worktree", "list", "--porcelain"]);
                let found = list
                    .lines()
                    .filter_map(|l| l.strip_prefix("worktree "))
                    .map(std::path::PathBuf::from)
                    .find(|p| *p != repo_path && p.join("lib/a.py").exists());
                if let Some(wt) = found {
                    let lib = wt.join("lib");
                    return Some((lib.clone(), flipper::start(&lib, &["a.py".into()], &key)));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            None
        })
    };
    let state = repo.run_with_env(&toml, 1, &env);
    let (lib, started) = watcher
        .join()
        .unwrap()
        .expect("the task's worktree appeared");
    flipper::stop(&lib, started);

    assert_eq!(fs::read_to_string(&key).unwrap(), SECRET);
    assert_eq!(fs::read_dir(home.path()).unwrap().count(), 1);
    let results = mock.tool_texts("a");
    assert_eq!(results.len(), 100, "{results:?}");
    let met_link = results.iter().filter(|r| r.0.contains("symlink")).count();
    for (text, _) in &results {
        assert!(
            !text.contains("OPENSSH"),
            "a tool result carries the key: {text}"
        );
    }
    for entry in walkdir::WalkDir::new(repo.path.join(".git"))
        .into_iter()
        .flatten()
    {
        if entry.file_type().is_file() {
            let bytes = fs::read(entry.path()).unwrap_or_default();
            assert!(
                !String::from_utf8_lossy(&bytes).contains("OPENSSH"),
                "{} carries the key",
                entry.path().display()
            );
        }
    }
    let a = state.task("a").unwrap();
    let blobs = repo.git(&["ls-tree", "-r", &a.branch]);
    for line in blobs.lines() {
        let (meta, path) = line.split_once('\t').unwrap();
        let oid = meta.split(' ').nth(2).unwrap();
        let content = repo.git(&["cat-file", "-p", oid]);
        assert!(
            !content.contains("OPENSSH"),
            "{path} on the branch carries the key"
        );
        if content == key.display().to_string() {
            assert!(
                meta.starts_with("120000"),
                "{path} names the key but is no link"
            );
        }
    }
    eprintln!("100 calls, {met_link} met a link; task {:?}", a.state);
    assert!(met_link > 0, "the flipper never won a swap: no race ran");
}
