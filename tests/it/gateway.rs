//! plait's gateway: the one way an agent CLI reaches its model, through the real binary
//! with the real Claude Code and a `{ cli }` program against the mock model server.

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::mock::{claude_tools, MockModel, Turn};
use crate::support::agents::{
    assert_gateway_url, claude_on_its_own, claude_on_mock, login_home, plait_on_login, real_claude,
    run_real, sample, KEY,
};
use crate::support::plan::{Raw, Toml as _};
use crate::support::{stderr, stdout, task_json, wait_until, Plan, TestRepo};

/// A plan of Claude Code tasks against `mock`, with `extra` TOML after it.
/// `plait run` started in the background, as a user would from another terminal.
fn spawn_run(
    repo: &TestRepo,
    plan: &std::path::Path,
    args: &[&str],
    home: &std::path::Path,
) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plait"));
    cmd.arg("run")
        .arg(plan)
        .args(args)
        .current_dir(&repo.path)
        .env("NO_COLOR", "1")
        .env("PLAIT_TEST_KEY", KEY)
        .env("HOME", home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("start plait run")
}

#[test]
fn claude_code_reaches_its_model_through_the_gateway_its_tokens_live_and_its_transcript_kept() {
    let Some(claude) = real_claude() else { return };
    let repo = sample();
    let mock = MockModel::start_claude_code(KEY);
    mock.set_usage(1000, 40, 0, 0);
    // Task a's command takes a while: its first answers are counted while it runs.
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![claude_tools::bash("sleep 4")]),
            Turn::Tools(vec![claude_tools::read("src/a/x.txt")]),
            Turn::Tools(vec![claude_tools::edit("src/a/x.txt", "hi", "hello")]),
            Turn::Text("Said hello.".into()),
        ],
    );
    mock.script(
        "b",
        claude_tools::read_and_edit("src/b/y.txt", "yo", "hey", "Said hey."),
    );
    let home = tempfile::tempdir().unwrap();
    let plan_path = repo.plan(&claude_on_mock(&claude, &mock.url()).to_toml());
    let mut child = spawn_run(&repo, &plan_path, &["-j", "2"], home.path());
    let started = Instant::now();
    let mut live = None;
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(120) {
        let out = repo.plait(&["status", "--json"]);
        if let Ok(status) = serde_json::from_slice::<Value>(&out.stdout) {
            let a = task_json(&status, "a");
            if a["state"] == "running" && a["usage"]["input_tokens"].as_u64().unwrap_or(0) > 0 {
                live = Some(a.clone());
            }
        }
        if live.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "plait run failed: {}", stderr(&out));
    let live = live.expect("task a's tokens showed in plait status while it ran");
    assert_eq!(
        live["usage"]["input_tokens"].as_u64().unwrap() % 1000,
        0,
        "{live}"
    );
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());

    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    let run = status["id"].as_str().unwrap();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(
        (
            merged["src/a/x.txt"].as_str(),
            merged["src/b/y.txt"].as_str()
        ),
        ("hello\n", "hey\n")
    );
    // Every answer the model gave task a, counted once, by the gateway.
    let requests = a["usage"]["requests"].as_u64().unwrap();
    assert!(requests >= 3, "{a}");
    assert_eq!(
        a["usage"]["input_tokens"].as_u64().unwrap(),
        requests * 1000,
        "{a}"
    );
    assert_eq!(
        a["usage"]["output_tokens"].as_u64().unwrap(),
        requests * 40,
        "{a}"
    );
    assert!(a["usage"]["cost_usd"].as_f64().unwrap() > 0.0, "{a}");
    if a["sandbox"]["confined"] == true {
        let how = a["sandbox"]["how"].as_str().unwrap();
        assert!(how.contains("gateway only"), "{how}");
        // Claude Code needs nothing but its model: no connection of its was refused.
        let refused = a["sandbox"]["refused"].to_string();
        assert!(!refused.contains("connect"), "{refused}");
    }
    // Its requests and answers, readable as a model agent's are.
    let transcript = repo.plait(&["log", "a", "--transcript"]);
    let text = stdout(&transcript);
    assert!(transcript.status.success(), "{}", stderr(&transcript));
    assert!(
        text.contains("Said hello.") && text.contains("sleep 4"),
        "{text}"
    );
    // The key reached the mock (it checked every request's), never a file of plait's.
    repo.assert_not_written(KEY);
}

#[test]
fn two_claude_codes_on_one_key_are_held_by_the_limiter_and_a_429_is_waited_out() {
    let Some(claude) = real_claude() else { return };
    for (limits, expect_429) in [(Some("{ concurrency = 1 }"), false), (None, true)] {
        let repo = sample();
        let mock = MockModel::start_claude_code(KEY);
        // One request at a time, as an account's concurrency limit.
        mock.set_limits(1, 0, 1);
        for (id, file, old, new) in [
            ("a", "src/a/x.txt", "hi", "hello"),
            ("b", "src/b/y.txt", "yo", "hey"),
        ] {
            mock.script(
                id,
                // Claude Code edits only a file it has read.
                claude_tools::read_and_edit(file, old, new, "Done."),
            );
        }
        let mut plan = claude_on_mock(&claude, &mock.url());
        if let Some(limits) = limits {
            plan = plan.set("providers.mock", "limits", Raw(limits));
        }
        let toml = plan.to_toml();
        let out = run_real(&repo, &toml);
        assert!(out.status.success(), "plait run failed: {}", stderr(&out));
        let stats = mock.load_stats();
        let status = repo.status_json(&[]);
        for id in ["a", "b"] {
            assert_eq!(
                task_json(&status, id)["state"],
                "done",
                "{}",
                task_json(&status, id)
            );
            assert_eq!(
                task_json(&status, id)["changes"].as_array().unwrap().len(),
                1
            );
        }
        if expect_429 {
            // The provider said 429; the gateway waited and asked again, so neither CLI
            // saw it (each finished its turns), and the retries are counted.
            let retries: u64 = ["a", "b"]
                .iter()
                .map(|id| {
                    task_json(&status, id)["usage"]["retries"]
                        .as_u64()
                        .unwrap_or(0)
                })
                .sum();
            assert_eq!(retries, stats.limited, "{stats:?}");
        } else {
            // The plan's limit held the second CLI's requests: the provider never refused.
            assert_eq!(stats.limited, 0, "{stats:?}");
        }
        assert_eq!(stats.peak_in_flight, 1, "{stats:?}");
    }
}

#[test]
fn max_cost_stops_a_claude_code_task_mid_round() {
    let Some(claude) = real_claude() else { return };
    let repo = sample();
    let mock = MockModel::start_claude_code(KEY);
    // $0.60 of input and $0.015 of output a request at claude-sonnet-4-5's prices.
    mock.set_usage(200_000, 1000, 0, 0);
    let turns = (0..6)
        .map(|k| Turn::Tools(vec![claude_tools::bash(&format!("echo {k}"))]))
        .chain([Turn::Text("Done.".into())])
        .collect();
    mock.script("a", turns);
    mock.script("b", vec![Turn::Text("Done.".into())]);
    let home = tempfile::tempdir().unwrap();
    let plan_path = repo.plan(&claude_on_mock(&claude, &mock.url()).to_toml());
    let out = repo.plait_env(
        &[
            "run",
            plan_path.to_str().unwrap(),
            "-j",
            "1",
            "--max-cost",
            "1.00",
        ],
        &[
            ("PLAIT_TEST_KEY", KEY),
            ("HOME", home.path().to_str().unwrap()),
        ],
    );
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "stopped", "{a}\n{}", stderr(&out));
    assert!(a["error"].as_str().unwrap().contains("budget"), "{a}");
    // Two answers spent the budget; the third request was refused before the provider.
    assert_eq!(mock.count("a"), 2, "{a}");
    assert_eq!(a["usage"]["requests"], 2, "{a}");
}

#[test]
fn a_cli_program_given_a_gateway_reaches_its_model_there_and_nothing_else() {
    let repo = sample();
    // An OpenAI-compatible server that, as for aider, takes a plain chat request.
    let mock = MockModel::start_aider(KEY);
    mock.set_usage(500, 25, 0, 0);
    mock.script("a", vec![Turn::Text("hello".into())]);
    // A program that asks its model through the variables plait sets, writes the answer,
    // then tries the provider directly and prints what it found in its environment.
    let program = repo.scratch.join("agent.py");
    fs::write(
        &program,
        format!(
            r#"
import json, os, sys, urllib.error, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ.get("OPENAI_API_KEY", "")
body = {{"model": "qwen-coder", "messages": [{{"role": "user", "content": "Task id: a\\nSay hello."}}]}}
req = urllib.request.Request(base + "/chat/completions", json.dumps(body).encode(),
    {{"content-type": "application/json", "authorization": "Bearer " + key}})
try:
    answer = json.load(urllib.request.urlopen(req, timeout=30))
except urllib.error.HTTPError as e:
    sys.exit("the model answered %s: %s" % (e.code, e.read().decode()))
open("src/a/x.txt", "w").write(answer["choices"][0]["message"]["content"] + "\n")
try:
    urllib.request.urlopen("{direct}/models", timeout=5)
    direct = "reached"
except urllib.error.HTTPError:
    direct = "reached"
except Exception:
    direct = "refused"
report = {{"base": base, "key": key, "direct": direct,
          "leaked": any("{KEY}" in v for v in os.environ.values())}}
print("REPORT " + json.dumps(report), flush=True)
"#,
            direct = mock.url()
        ),
    )
    .unwrap();
    let toml = cli_tasks(&mock, &[("a", "src/a/x.txt", &program)]);
    let plan_path = repo.plan(&toml.to_toml());
    let out = repo.plait_env(
        &["run", plan_path.to_str().unwrap()],
        &[("PLAIT_TEST_KEY", KEY)],
    );
    assert!(
        out.status.success(),
        "{}\n{:#?}",
        stderr(&out),
        mock.problems()
    );
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(a["usage"]["input_tokens"], 500, "{a}");
    assert_eq!(a["usage"]["output_tokens"], 25, "{a}");
    let run = status["id"].as_str().unwrap();
    assert_eq!(
        repo.tree_files(&format!("plait/{run}/merged"))["src/a/x.txt"],
        "hello\n"
    );
    let printed = repo.printed_in(run, "REPORT ");
    assert_eq!(printed.len(), 1, "{printed:?}");
    let report: Value = serde_json::from_str(&printed[0]["REPORT ".len()..]).unwrap();
    assert_gateway_url(report["base"].as_str().unwrap());
    assert_eq!(report["leaked"], false, "{report}");
    assert!(
        report["key"].as_str().unwrap().starts_with("plait-"),
        "{report}"
    );
    if a["sandbox"]["confined"] == true {
        assert_eq!(report["direct"], "refused", "{report}");
        let refused = a["sandbox"]["refused"].to_string();
        assert!(refused.contains("connect to 127.0.0.1:"), "{refused}");
    }
    let request = mock.requests().into_iter().next().unwrap();
    assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
}

#[test]
fn a_gateway_with_the_network_off_or_for_what_has_no_model_is_a_plan_error() {
    let repo = sample();
    let plan = repo.plan(
        "[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/src/a/\"]\n\
         agent = { cli = [\"true\"], gateway = \"anthropic\" }\nsandbox = { network = \"off\" }\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"/README.md\"]\nagent = { exec = 'true' }\n\
         sandbox = { network = \"gateway\" }\n\
         [checks]\nnetwork = \"gateway\"\n",
    );
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap()],
        &[("ANTHROPIC_API_KEY", "sk-test")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("task `a`") && err.contains("through plait's gateway"),
        "{err}"
    );
    assert!(
        err.contains("task `b`") && err.contains("network = \"gateway\" opens"),
        "{err}"
    );
    assert!(err.contains("[checks]: network = \"gateway\""), "{err}");
    assert!(repo.branches().iter().all(|b| !b.starts_with("plait/")));
}

#[test]
fn a_claude_code_login_without_a_key_works_through_the_gateway() {
    let Some(claude) = real_claude() else { return };
    let repo = sample();
    // The mock takes the login's OAuth access token as its bearer.
    let mock = MockModel::start_claude_code(KEY);
    for (id, file, old, new) in [
        ("a", "src/a/x.txt", "hi", "hello"),
        ("b", "src/b/y.txt", "yo", "hey"),
    ] {
        mock.script(id, claude_tools::read_and_edit(file, old, new, "Done."));
    }
    let home = login_home();
    // No provider in the plan and no key: the base URL is the environment's.
    let plan_path = repo.plan(&claude_on_its_own(&claude).to_toml());
    let out = plait_on_login(
        &repo,
        &["run", plan_path.to_str().unwrap(), "-j", "2"],
        home.path(),
        &mock.url(),
        &[],
    );
    assert!(
        out.status.success(),
        "{}\n{:#?}",
        stderr(&out),
        mock.problems()
    );
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert!(a["usage"]["requests"].as_u64().unwrap() >= 2, "{a}");
    // The login's own bearer reached the model through the gateway.
    let request = mock
        .requests()
        .into_iter()
        .find(|r| r.task.as_deref() == Some("a"))
        .unwrap();
    assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
    assert!(
        !request.headers.contains_key("x-api-key"),
        "{:?}",
        request.headers
    );
}

#[test]
fn thirty_claude_codes_on_a_bucketed_account_meet_almost_no_429() {
    let Some(claude) = real_claude() else { return };
    const AGENTS: usize = 30;
    let files: Vec<(String, String)> = (0..AGENTS)
        .map(|k| (format!("src/f{k}.txt"), "hi\n".to_string()))
        .collect();
    let repo = TestRepo::with_owned_files(&files);
    let mock = MockModel::start_claude_code(KEY);
    // The account: 60 requests a minute as a token bucket, 10 in flight.
    mock.set_limits(10, 60, 1);
    let mut plan = Plan::new()
        .goal("Greet")
        .set("defaults", "agent", "claude-code")
        .set("defaults", "timeout", "300s")
        .review_off()
        .set("agents.claude-code", "bin", claude.display().to_string())
        .set("agents.claude-code", "provider", "mock")
        .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
        .set("providers.mock", "limits", Raw("{ concurrency = 10 }"));
    for k in 0..AGENTS {
        let (id, file) = (format!("t{k}"), format!("src/f{k}.txt"));
        mock.script(
            &id,
            claude_tools::read_and_edit(&file, "hi", "hello", "Done."),
        );
        plan = plan
            .task(&id)
            .prompt(&format!("Say hello in {file}"))
            .owns([&file]);
    }
    let plan_path = repo.plan(&plan.to_toml());
    let home = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = repo.plait_env(
        &[
            "run",
            plan_path.to_str().unwrap(),
            "-j",
            &AGENTS.to_string(),
        ],
        &[
            ("PLAIT_TEST_KEY", KEY),
            ("HOME", home.path().to_str().unwrap()),
        ],
    );
    let took = started.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    let stats = mock.load_stats();
    let answered = stats.ok + stats.limited;
    eprintln!("{AGENTS} Claude Codes: {stats:?} in {took:?}");
    assert!(stats.ok >= 3 * AGENTS as u64, "{stats:?}");
    assert!(
        (stats.limited as f64) < 0.05 * answered as f64,
        "{} of {answered} requests answered 429: {stats:?}",
        stats.limited
    );
    assert!(stats.peak_in_flight <= 10, "{stats:?}");
    let status = repo.status_json(&[]);
    let done = status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["state"] == "done")
        .count();
    assert_eq!(done, AGENTS, "{}", stdout(&out));
    let run = status["id"].as_str().unwrap();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    for k in 0..AGENTS {
        assert_eq!(merged[&format!("src/f{k}.txt")], "hello\n");
    }
}

/// `[[task]]`s of `{ cli }` programs reaching `mock` (OpenAI's API) through the gateway:
/// each `(id, owned file, program)`, with the walls as they are (a program says what it
/// found on its output, which the task's log keeps).
fn cli_tasks(mock: &MockModel, tasks: &[(&str, &str, &std::path::Path)]) -> Plan {
    let mut plan = Plan::new()
        .set("defaults", "timeout", "120s")
        .review_off()
        .mock("openai", &mock.url(), "qwen-coder");
    for (id, file, program) in tasks {
        let cli = ["python3".to_string(), program.display().to_string()];
        plan = plan.task(id).prompt("Say hello").owns([*file]).with(
            "agent",
            Raw(&format!("{{ cli = {}, gateway = \"mock\" }}", cli.toml())),
        );
    }
    plan
}

/// What the programs below share: a chat completion through the gateway as `task`, its
/// status (or the error that kept it from an answer).
const ASK: &str = r#"
import json, os, threading, urllib.error, urllib.request
def ask(base, key, task, max_tokens=1000):
    body = {"model": "qwen-coder", "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "Task id: %s\nSay hello." % task}]}
    req = urllib.request.Request(base + "/chat/completions", json.dumps(body).encode(),
        {"content-type": "application/json", "authorization": "Bearer " + key})
    try:
        urllib.request.urlopen(req, timeout=60).read()
        return 200
    except urllib.error.HTTPError as e:
        return e.code
    except Exception as e:
        return "unreachable: %s" % e
base, key = os.environ["OPENAI_BASE_URL"], os.environ.get("OPENAI_API_KEY", "")
"#;

#[test]
fn twenty_requests_at_once_spend_at_most_the_budget_and_one_request() {
    let repo = sample();
    let mock = MockModel::start_aider(KEY);
    // $1.01 an answer at the plan's prices ($1,000 a million either way); each may cost
    // $1.015 at most (1,000 tokens of output and its short input), and takes 700 ms.
    mock.set_usage(10, 1000, 0, 0);
    mock.set_latency(Duration::from_millis(700));
    mock.script("a", vec![Turn::Text("hello".into()); 30]);
    let program = repo.scratch.join("twenty.py");
    let twenty = r#"
statuses = []
def one():
    statuses.append(ask(base, key, "a"))
threads = [threading.Thread(target=one) for _ in range(20)]
for t in threads: t.start()
for t in threads: t.join()
open("src/a/x.txt", "w").write("hello\n")
print("STATUSES " + json.dumps(statuses), flush=True)
"#;
    fs::write(&program, format!("{ASK}{twenty}")).unwrap();
    let plan = cli_tasks(&mock, &[("a", "src/a/x.txt", &program)]).set(
        "providers.mock",
        "prices",
        Raw("{ input = 1000.0, output = 1000.0 }"),
    );
    let plan_path = repo.plan(&plan.to_toml());
    let out = repo.plait_env(
        &["run", plan_path.to_str().unwrap(), "--max-cost", "5"],
        &[("PLAIT_TEST_KEY", KEY)],
    );
    let printed = repo.printed("STATUSES ");
    let statuses = printed
        .first()
        .map(|line| &line["STATUSES ".len()..])
        .unwrap_or_else(|| panic!("no statuses printed: {}", stderr(&out)));
    let statuses: Vec<Value> = serde_json::from_str(statuses).unwrap();
    let answered = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 400).count();
    assert_eq!(answered + refused, 20, "{statuses:?}");
    // What reached the provider is what was answered: the rest never left plait.
    assert_eq!(mock.count("a"), answered, "{statuses:?}");
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    let spent = a["usage"]["cost_usd"].as_f64().unwrap();
    eprintln!("20 requests against $5: {answered} answered, ${spent:.3} spent");
    assert!(spent <= 5.0 + 1.015, "${spent} spent of $5: {a}");
    // The budget was used, by requests in flight together.
    assert!(spent >= 5.0, "${spent} spent of $5: {a}");
    assert!(
        mock.load_stats().peak_in_flight >= 2,
        "{:?}",
        mock.load_stats()
    );
}

#[test]
fn a_task_holding_another_s_gateway_url_and_key_cannot_use_them() {
    let repo = sample();
    let mock = MockModel::start_aider(KEY);
    mock.set_usage(10, 10, 0, 0);
    // Task b prints its base URL and key (as B's command line would show them); the test
    // hands them to task a as its model's answer (asked as `handoff`, through a's own
    // gateway, once they are there); b stays until a has tried them.
    let tried = repo.scratch.join("a-tried");
    let ready = repo.scratch.join("handoff-ready");
    let b = repo.scratch.join("b.py");
    fs::write(
        &b,
        format!(
            "{ASK}tried = {:?}\n{}",
            tried.display().to_string(),
            r#"
import time
assert ask(base, key, "b", 10) == 200
open("src/b/y.txt", "w").write("hey\n")
print("LEASE " + json.dumps({"base": base, "key": key}), flush=True)
for _ in range(1200):
    if os.path.exists(tried): break
    time.sleep(0.05)
"#
        ),
    )
    .unwrap();
    let a = repo.scratch.join("a.py");
    fs::write(
        &a,
        format!(
            "{ASK}ready = {:?}\n{}",
            ready.display().to_string(),
            r#"
import time
from urllib.parse import urlsplit
for _ in range(1200):
    if os.path.exists(ready): break
    time.sleep(0.05)
body = {"model": "qwen-coder", "max_tokens": 100,
        "messages": [{"role": "user", "content": "Task id: handoff\nWhat did b leave?"}]}
req = urllib.request.Request(base + "/chat/completions", json.dumps(body).encode(),
    {"content-type": "application/json", "authorization": "Bearer " + key})
answer = json.load(urllib.request.urlopen(req, timeout=60))
theirs = json.loads(answer["choices"][0]["message"]["content"])
mine = urlsplit(base)
their_token = urlsplit(theirs["base"]).path
report = {
    # B's URL and key as they are: B's own port.
    "their_port": ask(theirs["base"], theirs["key"], "a", 10),
    # B's token on A's own port, in the path and as the key.
    "their_path_here": ask("http://%s%s" % (mine.netloc, their_token), key, "a", 10),
    "their_key_here": ask("http://%s" % mine.netloc, theirs["key"], "a", 10),
    # A's own path with B's key beside it.
    "both": ask(base, theirs["key"], "a", 10),
    "mine": ask(base, key, "a", 10),
}
open("src/a/x.txt", "w").write("hello\n")
print("REPORT " + json.dumps(report), flush=True)
"#
        ),
    )
    .unwrap();
    let plan = cli_tasks(&mock, &[("a", "src/a/x.txt", &a), ("b", "src/b/y.txt", &b)]);
    let plan_path = repo.plan(&plan.to_toml());
    let child = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan_path.to_str().unwrap(), "-j", "2"])
        .current_dir(&repo.path)
        .env("NO_COLOR", "1")
        .env("PLAIT_TEST_KEY", KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start plait run");
    let printed = |mark: &str| -> Option<Value> {
        let line = repo.printed(mark).into_iter().next()?;
        serde_json::from_str(&line[mark.len()..]).ok()
    };
    wait_until("b printed its lease", || printed("LEASE ").is_some());
    let lease = printed("LEASE ").unwrap();
    mock.script("handoff", vec![Turn::Text(lease.to_string())]);
    fs::write(&ready, "").unwrap();
    // A refused connection may take the request's own time (60 s) to fail.
    let deadline = Instant::now() + Duration::from_secs(180);
    while printed("REPORT ").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    fs::write(&tried, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let status = repo.status_json(&[]);
    let log = fs::read_to_string(task_json(&status, "a")["log"].as_str().unwrap_or("-"));
    assert!(out.status.success(), "{}\na's log: {log:?}", stderr(&out));
    let report = printed("REPORT ").unwrap();
    assert_eq!(report["mine"], 200, "{report}");
    // On A's port B's token is no lease, however it is given.
    assert_eq!(report["their_path_here"], 403, "{report}");
    assert_eq!(report["their_key_here"], 403, "{report}");
    assert_eq!(report["both"], 403, "{report}");
    let status = repo.status_json(&[]);
    let task_a = task_json(&status, "a");
    let confined = task_a["sandbox"]["confined"] == true;
    if confined {
        // B's port is out of A's reach: A's walls open its own lease's port alone.
        let theirs = report["their_port"].as_str().unwrap_or("");
        assert!(theirs.starts_with("unreachable"), "{report}");
    }
    // What reached the provider: A's own request (and, with no walls, B's lease used on
    // B's port, which only the walls keep from A), and B's.
    assert_eq!(mock.count("a"), if confined { 1 } else { 2 }, "{report}");
    assert_eq!(mock.count("b"), 1, "{report}");
}
