//! `plait send-back` and `plait serve`: the real binary serving a real run on 127.0.0.1,
//! spoken to over plain HTTP (any `Host` header can be sent), and in a real browser
//! (`browser`).

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fixtures::three_tasks;
use crate::support::serve::{run, sample, Served, AGENT};
use crate::support::{stderr, stdout, wait_until, TestRepo};

/// A task run as several attempts: its candidates in the status, the review and the page.
mod attempts;
/// The page and its API after a landing.
mod landed;
/// The run page at scale and in depth: summaries, branches, rounds, thousands of tasks.
mod scale;
/// A running run steered from the page: a message told, a task stopped.
mod steer;

#[test]
fn send_back_gives_a_task_one_more_round_told_the_comment_and_merges_again() {
    let repo = sample();
    let run = run(&repo, &three_tasks(AGENT, ""));
    // A person's decision is dropped by the send-back: the new round is judged afresh.
    assert!(repo.plait(&["reject", &run, "b"]).status.success());
    let out = repo.plait(&["send-back", &run, "b", "--comment", "SHOUT it"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), run);
    let status = repo.status_json(&[&run]);
    let b = &status["tasks"][1];
    assert_eq!(
        (b["id"].as_str(), b["state"].as_str()),
        (Some("b"), Some("done"))
    );
    assert_eq!(b["rounds"], 1);
    assert!(b.get("decision").is_none(), "{b}");
    // The comment is kept in the record, with the round it started, and review shows it.
    assert_eq!(b["sent_back"][0]["comment"], "SHOUT it", "{b}");
    assert_eq!(b["sent_back"][0]["round"], 1, "{b}");
    let review = stdout(&repo.plait(&["review", &run, "--task", "b"]));
    assert!(
        review.contains("sent back by a person (for round 1): SHOUT it"),
        "{review}"
    );
    assert_eq!(
        repo.tree_files(&format!("plait/{run}/b"))["lib/b.txt"],
        "V2\n"
    );
    assert_eq!(
        repo.git(&["rev-list", "--count", &format!("main..plait/{run}/b")]),
        "2",
        "the round's work is a second commit on the branch"
    );
    let log = std::fs::read_to_string(b["log"].as_str().unwrap()).unwrap();
    assert!(log.contains("SHOUT it"), "{log}");
    // The run merged again with the new work, and the others are as they were.
    assert_eq!(status["phase"], "finished");
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(
        (merged["lib/a.txt"].as_str(), merged["lib/b.txt"].as_str()),
        ("v1\n", "V2\n")
    );
    assert_eq!(status["tasks"][0]["rounds"], 0);
    // The events of the round are in the run's events file, as --json prints them.
    let events = std::fs::read_to_string(
        repo.path
            .join(format!(".git/plait/runs/{run}/events.jsonl")),
    )
    .unwrap();
    let last: Value = serde_json::from_str(events.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "task");
    assert_eq!(last["task"]["task"], "b");
    assert_eq!(last["task"]["state"], "done");
}

#[test]
fn send_back_refuses_what_it_cannot_do_and_changes_nothing() {
    let repo = sample();
    let run = run(&repo, &three_tasks(AGENT, ""));
    let before = repo.status_json(&[&run]);
    for (args, says) in [
        (vec!["nope", "--comment", "x"], "has no task `nope`"),
        (vec!["a", "--comment", "  "], "the comment is empty"),
    ] {
        let mut all = vec!["send-back", run.as_str()];
        all.extend(args);
        let out = repo.plait(&all);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
    assert_eq!(repo.status_json(&[&run]), before);
    assert!(repo.plait(&["clean", &run, "--force"]).status.success());
    let out = repo.plait(&["send-back", &run, "a", "--comment", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("was cleaned"), "{}", stderr(&out));
}

#[test]
fn the_api_shows_runs_tasks_diffs_and_transcripts_as_json() {
    let repo = sample();
    let run = run(
        &repo,
        &three_tasks(
            "echo v1 > lib/$PLAIT_TASK.txt; if [ $PLAIT_TASK = c ]; then echo oops > README; fi",
            "[checks]\ntask = [\"grep -q v1 lib/$PLAIT_TASK.txt\"]\n",
        ),
    );
    let served = Served::start(&repo, &[]);
    let runs = served.get("/api/runs");
    assert_eq!(runs["runs"][0]["id"], run.as_str());
    assert_eq!(runs["runs"][0]["tasks"], 3);
    assert_eq!(runs["runs"][0]["states"]["done"], 3);
    assert_eq!(runs["runs"][0]["live"], false);

    // A unique prefix names the run, as on the command line.
    let shown = served.get(&format!("/api/runs/{}", &run[..4]));
    assert_eq!(shown["run"]["id"], run.as_str());
    assert_eq!(
        shown["run"],
        repo.status_json(&[&run])
            .as_object()
            .map(|o| {
                let mut o = o.clone();
                // What status --json adds beside the run's record.
                o.remove("attention");
                o.remove("failures");
                Value::Object(o)
            })
            .unwrap()
    );
    assert_eq!(shown["gate"]["green"], false);
    let blockers = shown["gate"]["blockers"].as_array().unwrap();
    assert!(
        blockers
            .iter()
            .any(|b| b.as_str().unwrap().contains("do not own: c")),
        "{blockers:?}"
    );
    assert_eq!(shown["totals"]["violations"], 1);
    assert_eq!(shown["totals"]["changed_files"], 3);

    let task = served.get(&format!("/api/runs/{run}/tasks/a"));
    assert_eq!(task["prompt"], "fix a");
    assert_eq!(task["owns"], json!(["lib/a.txt"]));
    assert!(task["agent"].as_str().unwrap().starts_with("exec: echo v1"));
    assert_eq!(task["checks"][0]["passed"], true);
    assert!(
        task["checks"][0]["output"]
            .as_str()
            .unwrap()
            .contains("grep -q v1"),
        "{}",
        task["checks"][0]
    );
    assert_eq!(task["transcript"], json!([]));

    let diff = served.get(&format!("/api/runs/{run}/tasks/a/diff"));
    let file = &diff["files"][0];
    assert_eq!(
        (file["path"].as_str(), file["kind"].as_str()),
        (Some("lib/a.txt"), Some("modified"))
    );
    assert_eq!(
        (file["added"].as_u64(), file["removed"].as_u64()),
        (Some(1), Some(1))
    );
    let lines = &file["hunks"][0]["lines"];
    assert_eq!(
        lines[0],
        json!({"op": "-", "old": 1, "new": null, "text": "a"})
    );
    assert_eq!(
        lines[1],
        json!({"op": "+", "old": null, "new": 1, "text": "v1"})
    );

    for missing in [
        format!("/api/runs/{run}/tasks/nope"),
        "/api/runs/zzzzzz".to_string(),
        format!("/api/runs/{run}/tasks/nope/diff"),
    ] {
        let (status, body) = served.request("GET", &missing, &[], None);
        assert_eq!(status, 404, "{missing}: {body}");
        assert!(body.contains("\"error\""), "{body}");
    }
}

#[test]
fn the_api_reads_a_model_agent_s_transcript_as_turns_and_tool_calls() {
    let repo = sample();
    let run = run(&repo, &three_tasks(AGENT, ""));
    // A transcript as a model agent writes it (each request and its answer).
    let transcript = repo
        .path
        .join(format!(".git/plait/runs/{run}/tasks/a/transcript.jsonl"));
    let lines = [
        json!({"turn": 1, "request": {"messages": [{"role": "user", "content": "fix a"}]},
               "response": {"content": [{"type": "tool_use", "id": "u1", "name": "write_file", "input": {"path": "lib/a.txt", "content": "v1\n"}}]}}),
        json!({"turn": 2, "request": {"messages": [
                {"role": "user", "content": "fix a"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "write_file", "input": {"path": "lib/a.txt", "content": "v1\n"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "wrote lib/a.txt"}]}]},
               "response": {"events": [
                {"event": "message_start", "data": {"type": "message_start", "message": {"usage": {"input_tokens": 5}}}},
                {"event": "content_block_start", "data": {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}},
                {"event": "content_block_delta", "data": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done: a is v1."}}},
                {"event": "content_block_stop", "data": {"type": "content_block_stop", "index": 0}},
                {"event": "message_delta", "data": {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 4}}},
                {"event": "message_stop", "data": {"type": "message_stop"}}]}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&transcript, text).unwrap();
    let served = Served::start(&repo, &[]);
    let task = served.get(&format!("/api/runs/{run}/tasks/a"));
    let turns: Vec<(String, String)> = task["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["role"].as_str().unwrap().into(),
                e["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        turns,
        [
            ("user".into(), "text".into()),
            ("assistant".into(), "tool_call".into()),
            ("tool".into(), "tool_result".into()),
            ("assistant".into(), "text".into()),
        ]
    );
    assert_eq!(task["transcript"][1]["input"]["path"], "lib/a.txt");
    assert_eq!(task["transcript"][2]["tool"], "write_file");
    assert_eq!(task["transcript"][3]["text"], "Done: a is v1.");
}

#[test]
fn decisions_through_the_api_do_what_the_commands_do() {
    let twin = sample();
    let repo = sample();
    let toml = three_tasks(AGENT, "");
    let twin_run = run(&twin, &toml);
    let run = run(&repo, &toml);
    let served = Served::start(&repo, &[&run]);

    // Reject b through the page and through the command: the same record.
    let (status, said) = served.post(&format!("/api/runs/{run}/tasks/b/reject"), json!({}));
    assert_eq!(status, 200, "{said}");
    assert!(
        said["message"].as_str().unwrap().contains("task b of run"),
        "{said}"
    );
    assert!(twin.plait(&["reject", &twin_run, "b"]).status.success());
    let decision = |r: &TestRepo, id: &str| {
        let s = r.status_json(&[id]);
        s["tasks"][1]["decision"]["verdict"].clone()
    };
    assert_eq!(decision(&repo, &run), "reject");
    assert_eq!(decision(&repo, &run), decision(&twin, &twin_run));

    // A person's reject is a decision: the landing goes ahead and lands the rest.
    let (status, said) = served.post(&format!("/api/runs/{run}/land"), json!({"into": "main"}));
    assert_eq!(status, 200, "{said}");
    assert!(
        said["message"].as_str().unwrap().contains("landed run"),
        "{said}"
    );
    assert_eq!(
        (repo.read("lib/a.txt"), repo.read("lib/b.txt")),
        ("v1\n".into(), "b\n".into())
    );

    // Accept puts b back; a send-back with a comment gives c another round.
    let (status, _) = served.post(&format!("/api/runs/{run}/tasks/b/accept"), json!({}));
    assert_eq!(status, 200);
    assert_eq!(decision(&repo, &run), "approve");
    let (status, said) = served.post(
        &format!("/api/runs/{run}/tasks/c/send-back"),
        json!({"comment": "SHOUT, please"}),
    );
    assert!(status == 200 || status == 202, "{status}: {said}");
    wait_until("c's second round ends", || {
        let s = repo.status_json(&[&run]);
        s["tasks"][2]["rounds"] == 1 && s["phase"] == "finished"
    });
    assert_eq!(
        repo.tree_files(&format!("plait/{run}/c"))["lib/c.txt"],
        "V2\n"
    );

    // What cannot be done is refused with the command's own words.
    let (status, said) = served.post(&format!("/api/runs/{run}/tasks/nope/accept"), json!({}));
    assert_eq!(status, 400, "{said}");
    assert!(
        said["error"].as_str().unwrap().contains("no task `nope`"),
        "{said}"
    );
    let (status, said) = served.post(
        &format!("/api/runs/{run}/tasks/a/send-back"),
        json!({"comment": ""}),
    );
    assert_eq!(status, 400, "{said}");
    let (status, _) = served.post(&format!("/api/runs/{run}/tasks/a/merge"), json!({}));
    assert_eq!(status, 404);
    // Nothing the page sends is read as a flag or reaches a path unchecked.
    for task in ["--help", "..%2F..%2F..%2Fx"] {
        let (status, said) = served.post(
            &format!("/api/runs/{run}/tasks/{task}/send-back"),
            json!({"comment": "x"}),
        );
        assert_eq!(status, 400, "{task}: {said}");
    }
    let (status, said) = served.post(
        &format!("/api/runs/{run}/land"),
        json!({"into": "--partial"}),
    );
    assert_eq!(status, 400, "{said}");
    assert!(
        said["error"].as_str().unwrap().contains("--partial"),
        "{said}"
    );
}

#[test]
fn requests_without_the_token_or_for_another_host_are_refused() {
    let repo = sample();
    let run = run(&repo, &three_tasks(AGENT, ""));
    let served = Served::start(&repo, &[]);
    let before = repo.status_json(&[&run]);
    let path = format!("/api/runs/{run}/tasks/a/reject");
    let body = json!({});
    let token = served.token.clone();
    let origin = format!("http://{}", served.addr);
    for (what, headers) in [
        ("no token", vec![]),
        (
            "a wrong token",
            vec![("X-Plait-Token", "0123456789abcdef0123456789abcdef")],
        ),
        (
            "another site",
            vec![
                ("X-Plait-Token", token.as_str()),
                ("Origin", "http://evil.example"),
            ],
        ),
        (
            "another host",
            vec![
                ("X-Plait-Token", token.as_str()),
                ("Host", "evil.example:80"),
            ],
        ),
    ] {
        let (status, text) = served.request("POST", &path, &headers, Some(&body));
        assert_eq!(status, 403, "{what}: {text}");
        assert!(text.contains("refused"), "{what}: {text}");
    }
    // Reads for another host are refused too (DNS rebinding), and the page as well.
    for path in ["/", "/api/runs"] {
        let (status, _) = served.request("GET", path, &[("Host", "evil.example")], None);
        assert_eq!(status, 403, "{path}");
    }
    assert_eq!(repo.status_json(&[&run]), before, "nothing changed");
    // The page's own origin and `localhost` are this server.
    let port = served.addr.split(':').nth(1).unwrap().to_string();
    let local = format!("localhost:{port}");
    let (status, text) = served.request(
        "POST",
        &path,
        &[
            ("X-Plait-Token", &token),
            ("Origin", &origin),
            ("Host", &local),
        ],
        Some(&body),
    );
    assert_eq!(status, 200, "{text}");
}

#[test]
fn the_events_stream_carries_a_run_s_changes_as_they_happen() {
    let repo = sample();
    let run = run(&repo, &three_tasks(AGENT, ""));
    let served = Served::start(&repo, &[]);
    let mut stream = TcpStream::connect(&served.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "GET /api/runs/{run}/events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
        served.addr
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut seen = Vec::new();
    let next_event = |reader: &mut BufReader<TcpStream>| -> (String, Value) {
        let mut kind = String::new();
        loop {
            let mut line = String::new();
            assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
            // Chunked framing puts sizes on lines of their own; the event lines are whole.
            if let Some(k) = line.trim_end().strip_prefix("event: ") {
                kind = k.to_string();
            } else if let Some(data) = line.trim_end().strip_prefix("data: ") {
                return (kind, serde_json::from_str(data).unwrap());
            }
        }
    };
    // First a `state` with the record's version, so the page knows whether it missed a
    // change.
    let (kind, first) = next_event(&mut reader);
    assert_eq!(kind, "state");
    let version = first["version"].as_str().unwrap().to_string();
    assert_eq!(
        served.get(&format!("/api/runs/{run}/summary"))["version"],
        version
    );
    // A decision from the command line shows as a change of the record: the rows that
    // changed, not the record.
    assert!(repo.plait(&["reject", &run, "a"]).status.success());
    let (kind, data) = next_event(&mut reader);
    assert_eq!((kind.as_str(), &data["run"]), ("state", &json!(run)));
    assert_eq!(data["since"], version.as_str(), "{data}");
    assert_ne!(data["version"], version.as_str(), "{data}");
    let rows = data["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "only a changed: {data}");
    assert_eq!(
        (&rows[0]["id"], &rows[0]["verdict"], &rows[0]["by"]),
        (&json!("a"), &json!("reject"), &json!("person"))
    );
    assert_eq!(data["head"]["gate"]["green"], true, "{data}");
    assert!(data["head"]["run"].get("tasks").is_none(), "{data}");
    // A send-back's round shows as task events, the same JSON --json prints.
    let worker = std::thread::spawn({
        let path = repo.path.clone();
        move || crate::support::plait_in(&path, &["send-back", &run, "b", "-m", "SHOUT"])
    });
    loop {
        let (kind, data) = next_event(&mut reader);
        if kind == "task" {
            assert_eq!(data["event"], "task");
            assert_eq!(data["task"]["task"], "b");
            seen.push(data["task"]["state"].as_str().unwrap().to_string());
            if seen.last().map(String::as_str) == Some("done") && seen.len() > 1 {
                break;
            }
        }
    }
    assert!(seen.iter().any(|s| s == "running"), "{seen:?}");
    // It exits 0: task a was rejected by a person, a decision that needs nobody.
    let out = worker.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// The page in headless Chromium, driven by `tests/browser/drive.mjs` (playwright-core).
/// The page in headless Chromium.
mod browser {
    use std::process::{Command, Stdio};

    use serde_json::{json, Value};

    use crate::support::browser::{artifacts, ready, Browser};
    use crate::support::fixtures::three_tasks;
    use crate::support::serve::{run, sample, Served, AGENT};
    use crate::support::wait_until;

    #[test]
    fn the_page_lists_tasks_shows_a_diff_and_decides_as_the_commands_do() {
        let Some(browser) = Browser::find() else {
            return;
        };
        let repo = sample();
        let run = run(
            &repo,
            &three_tasks(
                AGENT,
                "[checks]\ntask = [\"test -s lib/$PLAIT_TASK.txt\"]\n",
            ),
        );
        let served = Served::start(&repo, &[]);
        let url = format!("http://{}/", served.addr);
        let shot = artifacts().join("serve-task.png");
        let _ = std::fs::remove_file(&shot);
        let out = browser.run(
            json!({"timeout_ms": 15000, "steps": [
                {"goto": url},
                ready(),
                {"count": format!("#runs [data-run='{run}']")},
                {"goto": format!("{url}#/runs/{run}")},
                ready(),
                {"wait": format!("#run[data-run='{run}']")},
                {"count": "#tasks [data-task]"},
                {"attr": ["#tasks [data-task='a']", "data-state"]},
                {"attr": ["#gate", "data-green"]},
                {"goto": format!("{url}#/runs/{run}/tasks/a")},
                ready(),
                {"wait": "#diff .file[data-path='lib/a.txt']"},
                {"count": "#diff .file[data-path='lib/a.txt'] .add"},
                {"count": "#diff .file[data-path='lib/a.txt'] .del"},
                {"text": "#prompt"},
                {"click": "[data-diff-mode='split']"},
                {"wait": "#diff .file[data-path='lib/a.txt'] .add"},
                {"screenshot": shot.to_str().unwrap()},
                {"click": "button[data-action='accept']"},
                {"wait_attr": ["#outcome", "data-ok", "true"]},
                {"text": "#outcome"},
                {"goto": format!("{url}#/runs/{run}/tasks/b")},
                ready(),
                {"click": "button[data-action='reject']"},
                {"wait_attr": ["#outcome", "data-ok", "true"]},
                {"goto": format!("{url}#/runs/{run}/tasks/c")},
                ready(),
                {"fill": ["#comment", "SHOUT it, please"]},
                {"click": "button[data-action='send-back']"},
                {"wait_attr": ["#outcome", "data-ok", "true"]},
            ]}),
            &repo.scratch,
        );
        let value = |i: usize, key: &str| out[i][key].clone();
        assert_eq!(value(2, "count"), 1, "the run is listed: {out:?}");
        assert_eq!(value(6, "count"), 3, "every task is listed: {out:?}");
        assert_eq!(value(7, "attr"), "done");
        assert_eq!(value(8, "attr"), "true", "{out:?}");
        assert!(
            value(12, "count").as_u64() >= Some(1),
            "an added line: {out:?}"
        );
        assert!(
            value(13, "count").as_u64() >= Some(1),
            "a removed line: {out:?}"
        );
        assert!(
            value(14, "text").as_str().unwrap().contains("fix a"),
            "{out:?}"
        );
        assert!(
            value(20, "text").as_str().unwrap().contains("accepted"),
            "the command's own words: {out:?}"
        );
        assert!(shot.is_file(), "the task page's screenshot is kept");

        // The page did what the commands do.
        let status = repo.status_json(&[&run]);
        assert_eq!(status["tasks"][0]["decision"]["verdict"], "approve");
        assert_eq!(status["tasks"][1]["decision"]["verdict"], "reject");
        let log_of = |name: &str| {
            std::fs::read_to_string(
                repo.path
                    .join(format!(".git/plait/runs/{run}/tasks/c/{name}")),
            )
            .unwrap_or_default()
        };
        for _ in 0..1500 {
            let s = repo.status_json(&[&run]);
            if s["tasks"][2]["rounds"] == 1 && s["phase"] == "finished" {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(
            repo.tree_files(&format!("plait/{run}/c"))["lib/c.txt"],
            "V2\n",
            "{}\n{}",
            log_of("send-back.log"),
            repo.status_json(&[&run])["tasks"][2]
        );
        let log = std::fs::read_to_string(
            repo.path
                .join(format!(".git/plait/runs/{run}/tasks/c/agent.log")),
        )
        .unwrap();
        assert!(log.contains("SHOUT it, please"), "{log}");
    }

    #[test]
    fn a_live_run_s_task_changes_state_on_the_page_without_a_reload() {
        let Some(browser) = Browser::find() else {
            return;
        };
        let repo = sample();
        // Each task waits for its own go-ahead file, outside the repository.
        let go = repo.scratch.join("go");
        std::fs::create_dir_all(&go).unwrap();
        let agent = format!(
            "while [ ! -e {}/$PLAIT_TASK ]; do sleep 0.05; done; echo v1 > lib/$PLAIT_TASK.txt",
            go.display()
        );
        let plan_path = repo.plan(&three_tasks(&agent, ""));
        let mut plait_run = Command::new(env!("CARGO_BIN_EXE_plait"))
            .args(["run", plan_path.to_str().unwrap(), "-j", "3"])
            .current_dir(&repo.path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let runs = repo.path.join(".git/plait/runs");
        wait_until("the run has started its tasks", || {
            let Some(id) = std::fs::read_dir(&runs)
                .ok()
                .and_then(|mut d| d.next())
                .and_then(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
            else {
                return false;
            };
            // The record may not be written yet.
            let out = repo.plait(&["status", &id, "--json"]);
            serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|s| {
                s["tasks"]
                    .as_array()
                    .is_some_and(|t| t.iter().all(|t| t["state"] == "running"))
            })
        });
        let run = std::fs::read_dir(&runs)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .file_name()
            .to_string_lossy()
            .into_owned();
        let served = Served::start(&repo, &[&run]);
        let url = format!("http://{}/", served.addr);
        let mut drive = browser.start(
            json!({"timeout_ms": 30000, "steps": [
                // With RUN named, the page opens on it.
                {"goto": url},
                ready(),
                {"wait": format!("#run[data-run='{run}']")},
                {"wait_attr": ["#tasks [data-task='a']", "data-state", "running"]},
                {"wait_attr": ["#live", "data-connected", "true"]},
                {"eval": "window.__plaitSamePage = 1"},
                {"wait_attr": ["#tasks [data-task='a']", "data-state", "done"]},
                {"attr": ["#tasks [data-task='b']", "data-state"]},
                {"eval": "window.__plaitSamePage"},
            ]}),
            &repo.scratch,
        );
        let mut seen = Vec::new();
        while let Some(line) = drive.next() {
            let marked =
                line.get("eval").is_some() && seen.iter().all(|l: &Value| l.get("eval").is_none());
            seen.push(line);
            if marked {
                // The page is showing the run live: let task a finish.
                std::fs::write(go.join("a"), "").unwrap();
            }
        }
        drive.finish(&seen);
        let attr = seen.iter().filter_map(|l| l.get("attr")).next().unwrap();
        assert_eq!(attr, "running", "b is still going: {seen:?}");
        assert_eq!(seen.last().unwrap()["eval"], 1, "no reload: {seen:?}");
        for id in ["b", "c"] {
            std::fs::write(go.join(id), "").unwrap();
        }
        let out = plait_run.wait().unwrap();
        assert!(out.success());
    }

    #[test]
    fn the_page_s_requests_need_the_token_and_its_host() {
        let Some(browser) = Browser::find() else {
            return;
        };
        let repo = sample();
        let run = run(&repo, &three_tasks(AGENT, ""));
        let served = Served::start(&repo, &[]);
        let url = format!("http://{}/", served.addr);
        let port = served.addr.split(':').nth(1).unwrap().to_string();
        let before = repo.status_json(&[&run]);
        // Each answer is read whole before the next step: a navigation would abort a body
        // still on its way, which the page reports as a failed request.
        let post = |headers: &str| {
            format!(
                "fetch('/api/runs/{run}/tasks/a/reject', {{method: 'POST', headers: {{'Content-Type': 'application/json'{headers}}}, body: '{{}}'}}).then(r => r.text().then(() => r.status))"
            )
        };
        // `rebound.example` resolves to this machine, as a site's name does after DNS
        // rebinding: its pages then reach the server under a Host of their own.
        let rebound = format!("http://rebound.example:{port}/");
        let out = browser.run_allowing(
            json!({"steps": [
                {"goto": url},
                ready(),
                // From the page without the token, and with a wrong one: refused.
                {"eval": post("")},
                {"eval": post(", 'X-Plait-Token': 'not-the-token'")},
                // The page cannot reach another origin at all.
                {"eval": format!("fetch('{rebound}api/runs').then(r => r.status).catch(() => 'blocked')")},
                {"goto": rebound},
                {"eval": "document.body.innerText"},
                {"eval": format!("fetch('/api/runs/{run}/tasks/a/reject', {{method: 'POST', headers: {{'Content-Type': 'application/json', 'X-Plait-Token': 'x'}}, body: '{{}}'}}).then(r => r.text().then(() => r.status))")},
            ]}),
            &repo.scratch,
            &["--host-resolver-rules=MAP rebound.example 127.0.0.1"],
            &["403", "Content Security Policy"],
        );
        assert_eq!(out[2]["eval"], 403, "{out:?}");
        assert_eq!(out[3]["eval"], 403, "{out:?}");
        assert_eq!(out[4]["eval"], "blocked", "{out:?}");
        let page = out[6]["eval"].as_str().unwrap();
        assert!(
            page.contains("refused") && page.contains("rebound.example"),
            "the page for another host is refused: {page}"
        );
        assert!(!page.contains("plait-token"), "{page}");
        assert_eq!(out[7]["eval"], 403, "{out:?}");
        assert_eq!(repo.status_json(&[&run]), before, "nothing changed");
    }
}
