//! Tests of the mock model server, so that the model-agent tests can trust what it plays and
//! what it reports. They talk to it with plain reqwest, as a client would.

use std::future::Future;

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::mock::{claude_tools, edit, MockModel, Provider, ToolResult, Turn};

const KEY: &str = "sk-test";

fn block_on<F: Future>(future: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    runtime.expect("test runtime").block_on(future)
}

/// Posts `body` to the mock's endpoint with `key`, as a client of `provider` does.
async fn post(mock: &MockModel, provider: Provider, key: &str, body: &Value) -> reqwest::Response {
    let client = reqwest::Client::new();
    let request = match provider {
        Provider::Anthropic => client
            .post(format!("{}/v1/messages", mock.url()))
            .header("x-api-key", key)
            .header("anthropic-version", "2023-06-01"),
        Provider::OpenAi => client
            .post(format!("{}/chat/completions", mock.url()))
            .bearer_auth(key),
    };
    request.json(body).send().await.expect("the mock answers")
}

fn system_prompt(task: &str) -> String {
    format!("You edit files.\nTask id: {task}\n")
}

fn anthropic_body(task: &str, messages: Value, stream: bool) -> Value {
    let schema = json!({"type": "object", "properties": {}});
    json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "stream": stream,
        "system": [{
            "type": "text",
            "text": system_prompt(task),
            "cache_control": {"type": "ephemeral"},
        }],
        "messages": messages,
        "tools": [
            {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
            {"name": "list_files", "description": "List files", "input_schema": schema},
            {"name": "search", "description": "Search files", "input_schema": schema},
        ],
    })
}

fn openai_body(task: &str, messages: Value, stream: bool) -> Value {
    let mut all = vec![json!({"role": "system", "content": system_prompt(task)})];
    all.extend(messages.as_array().expect("messages").iter().cloned());
    let function = |name: &str| {
        let parameters = json!({"type": "object", "properties": {}});
        let function = json!({"name": name, "description": name, "parameters": parameters});
        json!({"type": "function", "function": function})
    };
    let tools = ["str_replace_based_edit_tool", "list_files", "search"].map(function);
    let mut body = json!({
        "model": "gpt-test",
        "max_completion_tokens": 1024,
        "messages": all,
        "tools": tools,
    });
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn body(provider: Provider, task: &str, messages: Value, stream: bool) -> Value {
    match provider {
        Provider::Anthropic => anthropic_body(task, messages, stream),
        Provider::OpenAi => openai_body(task, messages, stream),
    }
}

/// The conversation after the model called the editor as `id` and the client answered it.
fn answered(provider: Provider, id: &str, input: &Value) -> Value {
    const EDITOR: &str = "str_replace_based_edit_tool";
    let ask = json!({"role": "user", "content": "Do it."});
    match provider {
        Provider::Anthropic => {
            let text = json!({"type": "text", "text": "I'll use the tools."});
            let call = json!({"type": "tool_use", "id": id, "name": EDITOR, "input": input});
            let result = json!({"type": "tool_result", "tool_use_id": id, "content": "ok"});
            json!([
                ask,
                {"role": "assistant", "content": [text, call]},
                {"role": "user", "content": [result]},
            ])
        }
        Provider::OpenAi => {
            let function = json!({"name": EDITOR, "arguments": input.to_string()});
            let call = json!({"id": id, "type": "function", "function": function});
            json!([
                ask,
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": id, "content": "ok"},
            ])
        }
    }
}

fn first_turn() -> Value {
    json!([{"role": "user", "content": "Do it."}])
}

/// A streamed body as it arrived: the pieces, then the events (comment lines dropped) as
/// (event name, data) pairs.
async fn read_stream(response: reqwest::Response) -> (Vec<Vec<u8>>, Vec<(String, String)>) {
    let mut pieces = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(piece) = stream.next().await {
        pieces.push(piece.expect("stream piece").to_vec());
    }
    let text = String::from_utf8(pieces.concat()).expect("utf-8 stream");
    let mut events = Vec::new();
    for frame in text.split("\n\n").filter(|f| !f.is_empty()) {
        let (mut name, mut data) = (String::new(), String::new());
        for line in frame.lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = n.to_string();
            } else if let Some(d) = line.strip_prefix("data: ") {
                data = d.to_string();
            }
        }
        if !data.is_empty() {
            events.push((name, data));
        }
    }
    (pieces, events)
}

/// Proves the stream arrived in more pieces than events, some of them ending mid-event.
fn assert_split(pieces: &[Vec<u8>], events: &[(String, String)]) {
    assert!(pieces.len() > events.len() * 2, "{} pieces", pieces.len());
    assert!(pieces.iter().any(|p| !p.ends_with(b"\n\n")));
}

/// The text of an Anthropic stream's text deltas.
fn streamed_text(events: &[(String, String)]) -> String {
    let data = events.iter().map(|(_, d)| parse(d));
    let deltas = data.filter(|d| d["delta"]["type"] == "text_delta");
    deltas
        .map(|d| d["delta"]["text"].as_str().unwrap().to_string())
        .collect()
}

fn parse(data: &str) -> Value {
    serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"))
}

#[test]
fn anthropic_plays_a_tool_turn_then_text() {
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let call = edit::create("src/a.rs", "fn a() {}\n");
    mock.script(
        "t1",
        vec![
            Turn::Tools(vec![call.clone()]),
            Turn::Text("All done.".into()),
        ],
    );
    mock.set_usage(7, 3, 2, 1);
    block_on(async {
        let first = post(
            &mock,
            Provider::Anthropic,
            KEY,
            &anthropic_body("t1", first_turn(), false),
        )
        .await;
        assert_eq!(first.status(), 200);
        assert!(first.headers().contains_key("request-id"));
        let first: Value = first.json().await.unwrap();
        assert_eq!(first["type"], "message");
        assert_eq!(first["model"], "claude-test");
        assert_eq!(first["stop_reason"], "tool_use");
        assert_eq!(first["stop_sequence"], Value::Null);
        let usage = json!({
            "input_tokens": 7,
            "output_tokens": 3,
            "cache_creation_input_tokens": 2,
            "cache_read_input_tokens": 1,
        });
        assert_eq!(first["usage"], usage);
        let tool = &first["content"][1];
        assert_eq!(tool["id"], "toolu_t1_1");
        assert_eq!(tool["name"], "str_replace_based_edit_tool");
        assert_eq!(tool["input"], call.input);

        let messages = answered(Provider::Anthropic, "toolu_t1_1", &call.input);
        let second = post(
            &mock,
            Provider::Anthropic,
            KEY,
            &anthropic_body("t1", messages, false),
        )
        .await;
        let second: Value = second.json().await.unwrap();
        assert_eq!(second["stop_reason"], "end_turn");
        assert_eq!(
            second["content"],
            json!([{"type": "text", "text": "All done."}])
        );
    });
    assert_eq!(mock.problems(), Vec::<String>::new());
    assert_eq!(mock.count("t1"), 2);
}

#[test]
fn anthropic_streams_events_split_anywhere() {
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let call = edit::str_replace("a.txt", "say \"hi\"\n", "say \"bye\"\n");
    mock.script(
        "s",
        vec![
            Turn::Tools(vec![call.clone()]),
            Turn::Text("Finished the edit.".into()),
        ],
    );
    block_on(async {
        let response = post(
            &mock,
            Provider::Anthropic,
            KEY,
            &anthropic_body("s", first_turn(), true),
        )
        .await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let (pieces, events) = read_stream(response).await;
        assert_split(&pieces, &events);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[..2], ["message_start", "ping"]);
        assert!(names.contains(&"future_event"));
        assert_eq!(names.last(), Some(&"message_stop"));
        let data: Vec<Value> = events.iter().map(|(_, d)| parse(d)).collect();
        let start = data
            .iter()
            .find(|d| d["type"] == "content_block_start" && d["index"] == 1)
            .unwrap();
        assert_eq!(start["content_block"]["id"], "toolu_s_1");
        assert_eq!(start["content_block"]["input"], json!({}));
        let partial: Vec<&str> = data
            .iter()
            .filter(|d| d["delta"]["type"] == "input_json_delta")
            .map(|d| d["delta"]["partial_json"].as_str().unwrap())
            .collect();
        assert!(partial.len() > 3);
        assert!(
            partial.iter().any(|p| p.ends_with('\\')),
            "a piece ends inside an escape: {partial:?}"
        );
        assert_eq!(parse(&partial.concat()), call.input);
        let delta = data.iter().find(|d| d["type"] == "message_delta").unwrap();
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(delta["usage"]["output_tokens"], 20);

        let messages = answered(Provider::Anthropic, "toolu_s_1", &call.input);
        let response = post(
            &mock,
            Provider::Anthropic,
            KEY,
            &anthropic_body("s", messages, true),
        )
        .await;
        let (_, events) = read_stream(response).await;
        assert_eq!(streamed_text(&events), "Finished the edit.");
    });
    assert_eq!(mock.problems(), Vec::<String>::new());
}

#[test]
fn openai_plays_a_tool_turn_then_text() {
    let mock = MockModel::start(Provider::OpenAi, KEY);
    let call = edit::insert("b.py", 2, "x = 1\n");
    mock.script(
        "o",
        vec![
            Turn::Tools(vec![call.clone()]),
            Turn::MaxTokens("Cut".into()),
        ],
    );
    block_on(async {
        let first = post(
            &mock,
            Provider::OpenAi,
            KEY,
            &openai_body("o", first_turn(), false),
        )
        .await;
        assert_eq!(first.status(), 200);
        let first: Value = first.json().await.unwrap();
        assert_eq!(first["object"], "chat.completion");
        assert_eq!(first["model"], "gpt-test");
        let choice = &first["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert_eq!(choice["message"]["content"], Value::Null);
        let tool = &choice["message"]["tool_calls"][0];
        assert_eq!(tool["id"], "call_o_1");
        assert_eq!(
            parse(tool["function"]["arguments"].as_str().unwrap()),
            call.input
        );
        assert_eq!(first["usage"]["prompt_tokens"], 100);
        assert_eq!(first["usage"]["total_tokens"], 120);

        let messages = answered(Provider::OpenAi, "call_o_1", &call.input);
        let second = post(
            &mock,
            Provider::OpenAi,
            KEY,
            &openai_body("o", messages, false),
        )
        .await;
        let second: Value = second.json().await.unwrap();
        assert_eq!(second["choices"][0]["finish_reason"], "length");
        assert_eq!(second["choices"][0]["message"]["content"], "Cut");
    });
    assert_eq!(mock.problems(), Vec::<String>::new());
    assert_eq!(mock.count("o"), 2);
}

#[test]
fn openai_streams_chunks_split_anywhere() {
    let mock = MockModel::start(Provider::OpenAi, KEY);
    let calls = vec![edit::view("a\\b.txt"), edit::create("c.txt", "one\ntwo\n")];
    mock.script("so", vec![Turn::Tools(calls.clone())]);
    block_on(async {
        let response = post(
            &mock,
            Provider::OpenAi,
            KEY,
            &openai_body("so", first_turn(), true),
        )
        .await;
        assert_eq!(response.status(), 200);
        let (pieces, events) = read_stream(response).await;
        assert_split(&pieces, &events);
        let raw = String::from_utf8(pieces.concat()).unwrap();
        assert!(raw.contains("\n\n: OPENROUTER PROCESSING\n\n"));
        assert!(raw.ends_with("data: [DONE]\n\n"));
        let chunks: Vec<Value> = events
            .iter()
            .filter(|(_, d)| d != "[DONE]")
            .map(|(_, d)| parse(d))
            .collect();
        let mut arguments = [String::new(), String::new()];
        for chunk in &chunks {
            for call in chunk["choices"][0]["delta"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let index = call["index"].as_u64().unwrap() as usize;
                arguments[index].push_str(call["function"]["arguments"].as_str().unwrap());
            }
        }
        assert_eq!(parse(&arguments[0]), calls[0].input);
        assert_eq!(parse(&arguments[1]), calls[1].input);
        let ids: Vec<&Value> = chunks
            .iter()
            .flat_map(|c| c["choices"][0]["delta"]["tool_calls"][0].get("id"))
            .collect();
        assert_eq!(ids, [&json!("call_so_1"), &json!("call_so_2")]);
        let finish = &chunks[chunks.len() - 2];
        assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
        let usage = chunks.last().unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["completion_tokens"], 20);
    });
    assert_eq!(mock.problems(), Vec::<String>::new());
}

#[test]
fn a_missing_tool_result_is_a_problem() {
    for provider in [Provider::Anthropic, Provider::OpenAi] {
        let mock = MockModel::start(provider, KEY);
        mock.script("m", vec![Turn::Tools(vec![edit::view("a.txt")])]);
        block_on(async {
            let first = post(
                &mock,
                provider,
                KEY,
                &body(provider, "m", first_turn(), false),
            )
            .await;
            assert_eq!(first.status(), 200);
            // The history holds the tool call, but no answer to it follows.
            let call = match provider {
                Provider::Anthropic => json!({"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_m_1", "name": "str_replace_based_edit_tool",
                     "input": {"command": "view", "path": "a.txt"}}]}),
                Provider::OpenAi => json!({"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_m_1", "type": "function", "function": {
                        "name": "str_replace_based_edit_tool",
                        "arguments": "{\"command\":\"view\",\"path\":\"a.txt\"}"}}]}),
            };
            let again = json!([{"role": "user", "content": "Look."}, call, {"role": "user", "content": "Do it."}]);
            let second = post(&mock, provider, KEY, &body(provider, "m", again, false)).await;
            assert_eq!(second.status(), 400);
        });
        let problems = mock.problems();
        assert_eq!(problems.len(), 1, "{provider:?}: {problems:?}");
        assert!(problems[0].contains("_m_1"), "{problems:?}");
        assert_eq!(mock.requests()[1].status, 400);
    }
}

#[test]
fn a_wrong_key_gets_401_and_is_not_a_problem() {
    for provider in [Provider::Anthropic, Provider::OpenAi] {
        let mock = MockModel::start(provider, KEY);
        block_on(async {
            let response = post(
                &mock,
                provider,
                "sk-wrong",
                &body(provider, "k", first_turn(), false),
            )
            .await;
            assert_eq!(response.status(), 401);
            let error: Value = response.json().await.unwrap();
            match provider {
                Provider::Anthropic => assert_eq!(error["error"]["type"], "authentication_error"),
                Provider::OpenAi => assert_eq!(error["error"]["code"], "invalid_api_key"),
            }
        });
        assert_eq!(mock.problems(), Vec::<String>::new());
        assert_eq!(mock.count("k"), 1);
    }
}

#[test]
fn interleaved_tasks_are_scripted_and_counted_apart() {
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script("a", vec![Turn::Text("a1".into()), Turn::Text("a2".into())]);
    mock.script("b", vec![Turn::Text("b1".into())]);
    let texts = block_on(async {
        let mut texts = Vec::new();
        for task in ["a", "b", "a", "b", "a"] {
            let response = post(
                &mock,
                Provider::Anthropic,
                KEY,
                &anthropic_body(task, first_turn(), false),
            )
            .await;
            let answer: Value = response.json().await.unwrap();
            texts.push(answer["content"][0]["text"].as_str().unwrap().to_string());
        }
        texts
    });
    assert_eq!(texts, ["a1", "b1", "a2", "done", "done"]);
    assert_eq!(
        (mock.count("a"), mock.count("b"), mock.count("c")),
        (3, 2, 0)
    );
    assert_eq!(mock.problems(), Vec::<String>::new());
}

#[test]
fn status_turns_pass_their_headers_through() {
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let limited = Turn::Status {
        status: 429,
        body: String::new(),
        headers: vec![("retry-after".into(), "3".into())],
    };
    mock.script("r", vec![limited]);
    block_on(async {
        let response = post(
            &mock,
            Provider::Anthropic,
            KEY,
            &anthropic_body("r", first_turn(), false),
        )
        .await;
        assert_eq!(response.status(), 429);
        assert_eq!(response.headers()["retry-after"], "3");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["type"], "rate_limit_error");
    });
    assert_eq!(mock.requests()[0].status, 429);
    assert_eq!(mock.problems(), Vec::<String>::new());
}

#[test]
fn broken_answers_break_as_scripted() {
    let mock = MockModel::start(Provider::OpenAi, KEY);
    mock.script(
        "x",
        vec![
            Turn::Malformed,
            Turn::Truncated,
            Turn::Truncated,
            Turn::ErrorEvent,
        ],
    );
    block_on(async {
        let request = openai_body("x", first_turn(), false);
        let malformed = post(&mock, Provider::OpenAi, KEY, &request).await;
        assert_eq!(malformed.status(), 200);
        assert!(malformed.json::<Value>().await.is_err());
        let cut = post(&mock, Provider::OpenAi, KEY, &request).await;
        assert!(
            cut.bytes().await.is_err(),
            "a truncated body is a read error"
        );
        let streamed = openai_body("x", first_turn(), true);
        let (_, events) = read_stream(post(&mock, Provider::OpenAi, KEY, &streamed).await).await;
        assert!(events.iter().all(|(_, d)| d != "[DONE]"));
        let (_, events) = read_stream(post(&mock, Provider::OpenAi, KEY, &streamed).await).await;
        assert_eq!(
            parse(&events.last().unwrap().1)["error"]["type"],
            "server_error"
        );
    });
    assert_eq!(mock.problems(), Vec::<String>::new());
}

#[test]
fn an_unknown_path_is_a_problem() {
    let mock = MockModel::start(Provider::Anthropic, KEY);
    block_on(async {
        let url = format!("{}/v1/complete", mock.url());
        let response = reqwest::Client::new()
            .post(url)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404);
    });
    assert_eq!(mock.problems().len(), 1);
}

#[test]
fn a_request_without_task_id_plays_the_empty_script() {
    let mock = MockModel::start(Provider::OpenAi, KEY);
    mock.script("", vec![Turn::Refusal]);
    let mut request = openai_body("x", first_turn(), false);
    request["messages"][0]["content"] = json!([{"type": "text", "text": "No id here."}]);
    let answer: Value = block_on(async {
        post(&mock, Provider::OpenAi, KEY, &request)
            .await
            .json()
            .await
            .unwrap()
    });
    assert_eq!(answer["choices"][0]["finish_reason"], "content_filter");
    assert_eq!(mock.requests()[0].task, None);
    assert_eq!(mock.count(""), 1);
    assert_eq!(mock.problems(), Vec::<String>::new());
}

#[test]
fn a_paused_turn_continues_and_requests_are_recorded() {
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script("p", vec![Turn::PauseTurn]);
    block_on(async {
        let request = anthropic_body("p", first_turn(), true);
        let (_, events) = read_stream(post(&mock, Provider::Anthropic, KEY, &request).await).await;
        let delta = events
            .iter()
            .map(|(_, d)| parse(d))
            .find(|d| d["type"] == "message_delta");
        assert_eq!(delta.unwrap()["delta"]["stop_reason"], "pause_turn");
        let text = json!({"type": "text", "text": streamed_text(&events)});
        let paused = json!({"role": "assistant", "content": [text]});
        let messages = json!([{"role": "user", "content": "Do it."}, paused]);
        let response = post(
            &mock,
            Provider::Anthropic,
            KEY,
            &anthropic_body("p", messages, false),
        )
        .await;
        assert_eq!(response.status(), 200);
    });
    let first = &mock.requests()[0];
    assert_eq!(
        (first.method.as_str(), first.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(first.headers["x-api-key"], KEY);
    assert_eq!(first.body["stream"], true);
    assert_eq!(first.task.as_deref(), Some("p"));
    assert_eq!(first.status, 200);
    assert_eq!(mock.problems(), Vec::<String>::new());
}

#[test]
fn the_mock_starts_and_stops_inside_another_runtime() {
    block_on(async {
        let mock = MockModel::start(Provider::OpenAi, KEY);
        let response = post(
            &mock,
            Provider::OpenAi,
            KEY,
            &openai_body("r", first_turn(), false),
        )
        .await;
        assert_eq!(response.status(), 200);
        drop(mock);
    });
}

/// Posts `body` to `path` as the Claude Code CLI does: `?beta=true`, its headers.
async fn post_as_cli(mock: &MockModel, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}?beta=true", mock.url()))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .header(
            "anthropic-beta",
            "claude-code-20250219,context-management-2025-06-27",
        )
        .json(body)
        .send()
        .await
        .expect("the mock answers")
}

/// A request shaped like the CLI's: its system blocks, the last one holding the task line that
/// `--append-system-prompt` adds (none when `task` is empty), its own tools without a type.
fn cli_body(task: &str, messages: Value) -> Value {
    let tool = |name: &str| {
        let schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
        json!({"name": name, "description": format!("The {name} tool"), "input_schema": schema})
    };
    let tools = ["Agent", "Bash", "Edit", "Read", "Write", "NotebookEdit"].map(tool);
    let mut system = vec![json!({"type": "text", "text": "You are Claude Code."})];
    if !task.is_empty() {
        let text = system_prompt(task);
        system.push(json!({"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}));
    }
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 64000,
        "stream": true,
        "system": system,
        "messages": messages,
        "tools": tools,
        "metadata": {"user_id": "user_0"},
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "context_management": {"edits": []},
        "output_config": {"effort": "medium"},
    })
}

/// The ids of the tool_use blocks a stream started.
fn streamed_tool_ids(events: &[(String, String)]) -> Vec<String> {
    let data = events.iter().map(|(_, d)| parse(d));
    let starts = data.filter(|d| d["content_block"]["type"] == "tool_use");
    starts
        .map(|d| d["content_block"]["id"].as_str().unwrap().to_string())
        .collect()
}

/// What the CLI tells the model after an Edit.
const EDITED: &str = "The file src/a.rs has been updated.";

#[test]
fn claude_code_mode_serves_the_cli_and_reads_back_its_tool_results() {
    let mock = MockModel::start_claude_code(KEY);
    let calls = vec![
        claude_tools::read("src/a.rs"),
        claude_tools::edit("src/a.rs", "fn a() {}", "fn a() -> u8 { 1 }"),
        claude_tools::write("src/b.rs", "fn b() {}\n"),
    ];
    let done = Turn::Text("Done.".into());
    mock.script("cc", vec![Turn::Tools(calls.clone()), done]);
    let refusal = "PreToolUse:Write hook error: [plait guard]: src/b.rs is not owned by task cc";
    block_on(async {
        let ask = json!({"role": "user", "content": [
            {"type": "text", "text": "Do it.", "cache_control": {"type": "ephemeral"}}]});
        let note = json!({"role": "system", "content": "The user opened the file src/a.rs."});
        let first = cli_body("cc", json!([ask, note]));
        let response = post_as_cli(&mock, "/v1/messages", &first).await;
        assert_eq!(response.status(), 200);
        let (_, events) = read_stream(response).await;
        let ids = streamed_tool_ids(&events);
        assert_eq!(ids, ["toolu_cc_1", "toolu_cc_2", "toolu_cc_3"]);

        let uses = ids.iter().zip(&calls).map(|(id, call)| {
            json!({"type": "tool_use", "id": id, "name": call.name, "input": call.input})
        });
        let text = json!({"type": "text", "text": "I'll use the tools."});
        let content: Vec<Value> = std::iter::once(text).chain(uses).collect();
        let assistant = json!({"role": "assistant", "content": content});
        let results = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": ids[0], "content": "     1\tfn a() {}\n"},
            {"type": "tool_result", "tool_use_id": ids[1], "content": [{"type": "text", "text": EDITED}]},
            {"type": "tool_result", "tool_use_id": ids[2], "content": refusal, "is_error": true,
             "cache_control": {"type": "ephemeral"}},
        ]});
        let second = cli_body("cc", json!([ask, note, assistant, note, results]));
        let response = post_as_cli(&mock, "/v1/messages", &second).await;
        assert_eq!(response.status(), 200);
        let (_, events) = read_stream(response).await;
        assert_eq!(streamed_text(&events), "Done.");
    });
    assert_eq!(mock.problems(), Vec::<String>::new());
    assert_eq!(mock.count("cc"), 2);
    let result = |id: &str, text: &str, is_error| ToolResult {
        id: id.into(),
        text: text.into(),
        is_error,
    };
    let want = [
        result("toolu_cc_1", "     1\tfn a() {}\n", false),
        result("toolu_cc_2", EDITED, false),
        result("toolu_cc_3", refusal, true),
    ];
    assert_eq!(mock.tool_results("cc"), want);
}

#[test]
fn claude_code_mode_answers_preflight_token_counts_and_side_requests() {
    let mock = MockModel::start_claude_code(KEY);
    block_on(async {
        let url = format!("{}/", mock.url());
        let preflight = reqwest::Client::new().head(url).send().await.unwrap();
        assert_eq!(preflight.status(), 200);
        let ask = json!([{"role": "user", "content": "Do it."}]);
        let response = post_as_cli(&mock, "/v1/messages/count_tokens", &cli_body("cc", ask)).await;
        assert_eq!(response.status(), 200);
        let count: Value = response.json().await.unwrap();
        assert!(count["input_tokens"].as_u64().unwrap() > 100, "{count}");

        let mut side = cli_body("", json!([{"role": "user", "content": "quota"}]));
        side.as_object_mut().unwrap().remove("tools");
        side["stream"] = json!(false);
        side["max_tokens"] = json!(1);
        let response = post_as_cli(&mock, "/v1/messages", &side).await;
        assert_eq!(response.status(), 200);
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["content"][0]["text"], "done");
    });
    assert_eq!(mock.problems(), Vec::<String>::new());
    assert_eq!((mock.count("cc"), mock.count("")), (0, 1));
    let counted = &mock.requests()[1];
    assert_eq!(counted.path, "/v1/messages/count_tokens");
    assert_eq!(counted.task.as_deref(), Some("cc"));
}

#[test]
fn claude_code_mode_keeps_the_other_checks() {
    let mock = MockModel::start_claude_code(KEY);
    mock.script("k", vec![Turn::Tools(vec![claude_tools::read("a.txt")])]);
    block_on(async {
        let ask = json!({"role": "user", "content": "Do it."});
        let response = post_as_cli(&mock, "/v1/messages", &cli_body("k", json!([ask]))).await;
        assert_eq!(response.status(), 200);
        let call = json!({"type": "tool_use", "id": "toolu_k_1", "name": "Read",
                          "input": {"file_path": "a.txt"}});
        let note = json!({"role": "system", "content": "A reminder."});
        let unanswered = json!([ask, note, {"role": "assistant", "content": [call]}, note,
                                {"role": "user", "content": "Go on."}]);
        let mut request = cli_body("k", unanswered);
        let broken = json!({"name": "Broken", "input_schema": {"type": "string"}});
        request["tools"].as_array_mut().unwrap().push(broken);
        let response = post_as_cli(&mock, "/v1/messages", &request).await;
        assert_eq!(response.status(), 400);
    });
    let problems = mock.problems();
    assert!(
        problems.iter().any(|p| p.contains("toolu_k_1")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("\"Broken\"")),
        "{problems:?}"
    );
}

#[test]
fn the_default_mode_refuses_count_tokens() {
    let mock = MockModel::start(Provider::Anthropic, KEY);
    block_on(async {
        let ask = json!([{"role": "user", "content": "Do it."}]);
        let body = anthropic_body("d", ask, false);
        let response = post_as_cli(&mock, "/v1/messages/count_tokens", &body).await;
        assert_eq!(response.status(), 404);
    });
    let problems = mock.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("count_tokens"), "{problems:?}");
}
