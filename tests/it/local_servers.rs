//! Model agents against the mock bent the way local OpenAI-compatible servers bend the wire
//! (llama.cpp's server, older vLLM, some proxies): no usage in streams, answers that never
//! finish, tool calls in the shapes they send them. And what a run says of a task whose agent
//! changed nothing.

use std::fs;

use plait_core::state::{RunState, TaskState};
use serde_json::Value;

use crate::mock::{edit, MockModel, Provider, ToolCalls, Turn, Wire};
use crate::support::TestRepo;

const KEY: &str = "sk-test-local-0123456789";

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("lib/a.py", "def f():\n    return 1\n"),
        ("lib/b.py", "b = 1\n"),
        ("run.sh", "true\n"),
    ])
}

/// A plan of one model task `a` asked to edit lib/a.py, over `provider`, `stream`ed or not;
/// `extra` goes into `[defaults]`, `tasks` after task `a`.
fn plan(mock: &MockModel, provider: Provider, stream: bool, extra: &str, tasks: &str) -> String {
    let (kind, model) = match provider {
        Provider::Anthropic => ("anthropic", "claude-sonnet-4-5"),
        Provider::OpenAi => ("openai", "local-model"),
    };
    format!(
        "goal = \"Make f return 2\"\n\
         [providers.local]\nkind = \"{kind}\"\nbase_url = \"{}\"\napi_key_env = \"PLAIT_TEST_KEY\"\nmodel = \"{model}\"\n\
         max_tokens = 512\nstream = {stream}\nprices = {{ input = 1.0, output = 2.0 }}\n\
         [review]\nagent = \"off\"\n\
         [defaults]\nagent = \"local\"\ntimeout = \"60s\"\n{extra}\n\
         [[task]]\nid = \"a\"\nprompt = \"Make f in lib/a.py return 2\"\nowns = [\"/lib/a.py\"]\n{tasks}",
        mock.url()
    )
}

fn env(name: &str) -> Option<String> {
    (name == "PLAIT_TEST_KEY").then(|| KEY.to_string())
}

fn task<'a>(state: &'a RunState, id: &str) -> &'a plait_core::state::TaskRecord {
    state.tasks.iter().find(|t| t.id == id).unwrap()
}

fn edit_turns() -> Vec<Turn> {
    vec![
        Turn::Tools(vec![edit::str_replace("lib/a.py", "return 1", "return 2")]),
        Turn::Text("Done.".into()),
    ]
}

#[test]
fn a_stream_without_usage_is_estimated_marked_and_priced() {
    for stream in [true, false] {
        let repo = sample();
        let mock = MockModel::start(Provider::OpenAi, KEY);
        mock.set_wire(Wire {
            no_stream_usage: true,
            ..Wire::default()
        });
        mock.set_usage(700, 30, 0, 0);
        mock.script("a", edit_turns());
        let state = repo.run_with_env(&plan(&mock, Provider::OpenAi, stream, "", ""), 1, &env);
        assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
        let a = task(&state, "a");
        assert_eq!(a.state, TaskState::Done, "{:?}", a.error);
        let usage = a.usage.as_ref().unwrap();
        if !stream {
            // Whole answers carry their usage: the server's count, as it gave it.
            assert!(!usage.estimated);
            assert_eq!((usage.input_tokens, usage.output_tokens), (1400, 60));
            continue;
        }
        assert!(usage.estimated, "{usage:?}");
        // The input: the text of each request the model read, estimated.
        let sent: u64 = mock
            .requests()
            .iter()
            .filter(|r| r.task.as_deref() == Some("a"))
            .map(|r| plait_llm::estimate::input_tokens(&r.body))
            .sum();
        assert_eq!(usage.input_tokens, sent);
        // Fewer than the JSON holds, and not nothing.
        let json: u64 = mock
            .requests()
            .iter()
            .map(|r| r.body.to_string().len() as u64 / 4)
            .sum();
        assert!(sent > json / 3 && sent < json, "{sent} of {json}");
        assert!(
            usage.output_tokens > 0 && usage.output_tokens < 100,
            "{usage:?}"
        );
        // Priced like any count, so --max-cost holds.
        assert!(usage.cost_usd.unwrap() > 0.0, "{usage:?}");
        // Marked wherever it shows.
        let status = repo.plait(&["status"]);
        let text = String::from_utf8_lossy(&status.stdout);
        assert!(text.contains('≈'), "{text}");
        assert!(text.contains("stream = false"), "{text}");
        let json = repo.status_json(&[]);
        assert_eq!(json["tasks"][0]["usage"]["estimated"], true, "{json}");
    }
}

#[test]
fn an_answer_that_never_finishes_is_retried_then_fails_naming_it() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        for stream in [true, false] {
            let repo = sample();
            let mock = MockModel::start(provider, KEY);
            // Once: retried, and the task goes on to its edit.
            let mut turns = vec![Turn::Unfinished];
            turns.extend(edit_turns());
            mock.script("a", turns);
            // Always: the task fails, saying what the server sent.
            mock.script("b", vec![Turn::Unfinished; 6]);
            let b = "[[task]]\nid = \"b\"\nprompt = \"Make b 2\"\nowns = [\"/lib/b.py\"]\n";
            let state = repo.run_with_env(&plan(&mock, provider, stream, "", b), 2, &env);
            let label = format!("{provider:?}, stream {stream}");
            assert!(
                mock.problems().is_empty(),
                "{label}: {:#?}",
                mock.problems()
            );
            let a = task(&state, "a");
            assert_eq!(a.state, TaskState::Done, "{label}: {:?}", a.error);
            assert_eq!(a.usage.as_ref().unwrap().retries, 1, "{label}");
            assert_eq!(
                fs::read_to_string(a.worktree.join("lib/a.py")).unwrap(),
                "def f():\n    return 2\n"
            );
            let b = task(&state, "b");
            assert_eq!(b.state, TaskState::Failed, "{label}");
            let error = b.error.as_deref().unwrap_or_default();
            let reason = match provider {
                Provider::OpenAi => "finish_reason",
                Provider::Anthropic => "stop_reason",
            };
            assert!(error.contains(reason), "{label}: {error}");
            assert!(
                error.contains("gave up after 5 attempts"),
                "{label}: {error}"
            );
            assert_eq!(mock.count("b"), 5, "{label}");
        }
    }
}

#[test]
fn tool_calls_are_read_in_every_shape_local_servers_send() {
    let shapes = [
        ToolCalls::Unindexed,
        ToolCalls::ObjectArguments,
        ToolCalls::StopWithCalls,
        ToolCalls::FinalMessage,
    ];
    for tool_calls in shapes {
        for stream in [true, false] {
            let repo = sample();
            let mock = MockModel::start(Provider::OpenAi, KEY);
            mock.set_wire(Wire {
                tool_calls,
                ..Wire::default()
            });
            // Two calls in one answer, so the calls must be told apart.
            mock.script(
                "a",
                vec![
                    Turn::Tools(vec![
                        edit::view("lib/a.py"),
                        edit::str_replace("lib/a.py", "return 1", "return 2"),
                    ]),
                    Turn::Text("Done.".into()),
                ],
            );
            let state = repo.run_with_env(&plan(&mock, Provider::OpenAi, stream, "", ""), 1, &env);
            let label = format!("{tool_calls:?}, stream {stream}");
            assert!(
                mock.problems().is_empty(),
                "{label}: {:#?}",
                mock.problems()
            );
            let a = task(&state, "a");
            assert_eq!(a.state, TaskState::Done, "{label}: {:?}", a.error);
            assert_eq!(a.changes.len(), 1, "{label}");
            let results = mock.tool_results("a");
            assert_eq!(results.len(), 2, "{label}: {results:?}");
            assert!(results[0].text.contains("return 1"), "{label}: {results:?}");
            assert!(
                !results[1].text.starts_with("Error"),
                "{label}: {results:?}"
            );
        }
    }
}

#[test]
fn a_task_whose_agent_changed_nothing_is_said_unless_it_was_not_asked_to() {
    let repo = sample();
    let mock = MockModel::start(Provider::OpenAi, KEY);
    mock.script("a", vec![Turn::Text("Nothing to do.".into())]);
    mock.script("c", vec![Turn::Text("Nothing to do.".into())]);
    let tasks = "[[task]]\nid = \"quiet\"\nprompt = \"Tidy run.sh\"\nowns = [\"/run.sh\"]\nagent = { exec = \"true\" }\n\
                 [[task]]\nid = \"c\"\nprompt = \"Check lib/b.py\"\nowns = [\"/lib/b.py\"]\nexpect_changes = false\n";
    let state = repo.run_with_env(&plan(&mock, Provider::OpenAi, true, "", tasks), 2, &env);
    for id in ["a", "quiet", "c"] {
        assert_eq!(task(&state, id).state, TaskState::Done, "{id}");
    }
    assert!(task(&state, "a").unchanged());
    assert!(!task(&state, "quiet").unchanged() && !task(&state, "c").unchanged());
    let json = repo.status_json(&[]);
    let attention: Vec<&str> = json["attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(attention.len(), 1, "{attention:?}");
    assert!(attention[0].contains("changed nothing"), "{attention:?}");
    assert!(attention[0].ends_with(": a"), "{attention:?}");
    let status = repo.plait(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("the agent changed nothing"), "{text}");
    // What `plait review --attention` and the page's filter list.
    assert_eq!(plait_stages::report::needing_attention(&state), ["a"]);
}

#[test]
fn an_agent_cli_that_exits_0_without_asking_its_model_failed_its_round() {
    let repo = sample();
    let mock = MockModel::start(Provider::OpenAi, KEY);
    // As aider does when its client refuses to start: an error, then exit 0.
    let said = "litellm.AuthenticationError: The api_key client option must be set";
    let quiet = format!(
        "[[task]]\nid = \"quiet\"\nprompt = \"Tidy run.sh\"\nowns = [\"/run.sh\"]\n\
         agent = {{ cli = [\"sh\", \"-c\", \"echo '{said}' >&2; exit 0\"], gateway = \"local\" }}\n"
    );
    mock.script("a", edit_turns());
    // The plan finds `sh` on the PATH.
    let env = |name: &str| env(name).or_else(|| std::env::var(name).ok());
    let state = repo.run_with_env(&plan(&mock, Provider::OpenAi, true, "", &quiet), 2, &env);
    assert_eq!(task(&state, "a").state, TaskState::Done);
    let quiet = task(&state, "quiet");
    assert_eq!(quiet.state, TaskState::Failed);
    let error = quiet.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("sh exited 0 without a single request to its model") && error.contains(said),
        "{error}"
    );
}

/// A server that cannot stream an answer to a request with tools (llama-cpp-python's
/// `chatml-function-calling`: a 200, then the stream ends before its first event) is asked
/// without streaming after two such answers, and the task goes on to its edit; the run says
/// so once, naming `stream = false`.
#[test]
fn a_server_that_cannot_stream_tool_answers_is_asked_without_streaming() {
    let repo = sample();
    let mock = MockModel::start(Provider::OpenAi, KEY);
    mock.set_wire(Wire {
        no_streamed_tools: true,
        ..Wire::default()
    });
    mock.script("a", edit_turns());
    let plan = repo.plan(&plan(&mock, Provider::OpenAi, true, "", ""));
    let out = repo.plait_env(&["run", plan.to_str().unwrap()], &[("PLAIT_TEST_KEY", KEY)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("asking it without streaming"), "{err}");
    assert_eq!(
        err.matches("asking it without streaming").count(),
        1,
        "{err}"
    );
    let streamed: Vec<bool> = mock
        .requests()
        .iter()
        .filter(|r| r.task.as_deref() == Some("a"))
        .map(|r| r.body["stream"] == true)
        .collect();
    assert_eq!(streamed, [true, true, false, false], "{streamed:?}");
    let run = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(repo.tree_files(&format!("plait/{run}/a"))["lib/a.py"].contains("return 2"));
}
