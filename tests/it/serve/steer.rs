//! Steering a running run from the page (`tell`, `stop`): the API, guarded by the server's
//! token, hands the request to the real `plait run` going beside it and answers with what
//! the run said; the task's page has the box and the Stop button while the task goes, and
//! shows what it was told and why it stopped; `plait status` and `plait review` say the
//! messages too.

use serde_json::{json, Value};

use crate::support::browser::{artifacts, ready, Browser};
use crate::support::serve::{sample, Going, Served};
use crate::support::{stdout, task_json, wait_until, TestRepo};

/// The run's id, from its status while it goes.
fn run_id(repo: &TestRepo) -> String {
    let status = repo.status_json(&[]);
    status["id"].as_str().expect("a run's id").to_string()
}

/// Waits until task `task` of `run` is in `state`.
fn wait_for_state(repo: &TestRepo, run: &str, task: &str, state: &str) {
    wait_until(&format!("task {task} became {state}"), || {
        task_json(&repo.status_json(&[run]), task)["state"] == state
    });
}

#[test]
fn tell_and_stop_need_the_token_and_a_task_that_goes() {
    let repo = sample();
    let mut going = Going::start(&repo);
    let run = run_id(&repo);
    let served = Served::start(&repo, &[]);
    let tell = format!("/api/runs/{run}/tasks/a/tell");
    let stop = format!("/api/runs/{run}/tasks/b/stop");
    let said = |answer: &Value| answer["message"].as_str().unwrap_or_default().to_string();
    let error = |answer: &Value| answer["error"].as_str().unwrap_or_default().to_string();

    // Without the server's token, or with another, nothing reaches the run.
    let body = json!({"message": "SHOUT it"});
    for headers in [vec![], vec![("X-Plait-Token", "0123")]] {
        let (status, _) = served.request("POST", &tell, &headers, Some(&body));
        assert_eq!(status, 403);
        let (status, _) = served.request("POST", &stop, &headers, Some(&json!({})));
        assert_eq!(status, 403);
    }
    let task = served.get(&format!("/api/runs/{run}/tasks/a"));
    assert_eq!(task["told"], json!([]), "{task}");
    assert_eq!(task["steerable"], true, "{task}");

    // An empty message and a task the run lacks are refused; a message is told.
    let (status, answer) = served.post(&tell, json!({"message": "  "}));
    assert_eq!(status, 400, "{answer}");
    assert!(error(&answer).contains("the message is empty"), "{answer}");
    let (status, answer) = served.post(&format!("/api/runs/{run}/tasks/z/tell"), body.clone());
    assert_eq!(status, 400, "{answer}");
    assert!(error(&answer).contains("has no task `z`"), "{answer}");
    let (status, answer) = served.post(&tell, body.clone());
    assert_eq!(status, 200, "{answer}");
    assert!(
        said(&answer).contains("hears this as its next round's comment"),
        "{answer}"
    );
    // The run saves its record a moment after it answers.
    let mut task = Value::Null;
    wait_until("the message was saved", || {
        task = served.get(&format!("/api/runs/{run}/tasks/a"));
        task["told"][0].is_object()
    });
    let told = &task["told"][0];
    assert_eq!(
        (&told["text"], &told["by"], &told["way"], &told["heard"]),
        (
            &json!("SHOUT it"),
            &json!("page"),
            &json!("next round"),
            &json!("waiting")
        ),
        "{task}"
    );

    // A stop ends the task at once; then it can be neither told nor stopped.
    let (status, answer) = served.post(&stop, json!({"keep": false}));
    assert_eq!(status, 200, "{answer}");
    assert!(said(&answer).starts_with("stopping b"), "{answer}");
    wait_for_state(&repo, &run, "b", "stopped");
    let (status, answer) = served.post(&format!("/api/runs/{run}/tasks/b/tell"), body.clone());
    assert_eq!(status, 400, "{answer}");
    assert!(error(&answer).contains("has ended (stopped)"), "{answer}");
    let (status, _) = served.post(&stop, json!({}));
    assert_eq!(status, 400);
    let b = served.get(&format!("/api/runs/{run}/tasks/b"));
    assert_eq!(b["steerable"], false, "{b}");
    assert_eq!(b["task"]["error"], "stopped by a person (page)", "{b}");
    assert_eq!(b["task"]["decision"]["verdict"], "reject", "{b}");

    // The run ends: its told task had one more round, told the message.
    let out = going.end();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    assert!(
        going.env_of("a").contains("PLAIT_FEEDBACK="),
        "{}",
        going.env_of("a")
    );
    assert!(going.env_of("a").contains("SHOUT it"));
    let a = served.get(&format!("/api/runs/{run}/tasks/a"));
    assert_eq!(a["steerable"], false, "{a}");
    assert!(
        a["told"][0]["heard"]
            .as_str()
            .is_some_and(|h| h.starts_with("heard ") && h.ends_with(" after")),
        "{a}"
    );
    assert_eq!(a["rounds"][1]["told"]["kind"], "steer", "{a}");
    assert_eq!(a["rounds"][1]["told"]["text"], "SHOUT it", "{a}");
    let (status, answer) = served.post(&tell, body);
    assert_eq!(status, 400, "{answer}");
    assert!(error(&answer).contains("is not going"), "{answer}");

    // The status says the message under its task, and why b stopped; review the message.
    let text = stdout(&repo.plait(&["status", &run]));
    let lines: Vec<&str> = text.lines().collect();
    let row = lines.iter().position(|l| l.starts_with("a ")).unwrap();
    assert!(
        lines[row + 1].starts_with("    told (page, next round, heard ")
            && lines[row + 1].ends_with(" after): SHOUT it"),
        "{text}"
    );
    let b_row = lines.iter().find(|l| l.starts_with("b ")).unwrap();
    assert!(
        b_row.contains("stopped") && b_row.ends_with("stopped by a person (page)"),
        "{text}"
    );
    let review = stdout(&repo.plait(&["review", &run, "--task", "a", "--no-pager"]));
    assert!(
        review
            .lines()
            .any(|l| l.starts_with("told (page, next round, heard ") && l.ends_with(": SHOUT it")),
        "{review}"
    );
}

#[test]
fn the_task_page_tells_a_running_task_and_stops_another() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let repo = sample();
    let mut going = Going::start(&repo);
    let run = run_id(&repo);
    let served = Served::start(&repo, &[]);
    let url = format!("http://{}/", served.addr);
    let (going_shot, shot) = (
        artifacts().join("serve-steer-going.png"),
        artifacts().join("serve-steer.png"),
    );
    let _ = std::fs::remove_file(&shot);
    let page = |task: &str| format!("{url}#/runs/{run}/tasks/{task}");
    // The box and the button go once the page has read that the task ended.
    let form_gone = json!({"wait": "#steer .steer-form[hidden]"});
    let steps = json!({"timeout_ms": 15000, "steps": [
        {"goto": page("a")},
        ready(),
        {"wait": "#task[data-task='a'] #steer #tell-text"},
        {"fill": ["#tell-text", "SHOUT from the page"]},
        {"click": "#tell"},
        {"wait_attr": ["#steer-outcome", "data-ok", "true"]},
        {"text": "#steer-outcome"},
        {"wait": "#steer .told[data-heard='false']"},
        {"text": "#steer .told"},
        {"screenshot": going_shot.to_str().unwrap()},
        {"goto": page("b")},
        {"wait": "#task[data-task='b'] #steer #stop"},
        ready(),
        {"click": "#stop"},
        {"wait_attr": ["#steer-outcome", "data-ok", "true"]},
        {"text": "#steer-outcome"},
        {"wait_attr": ["#task", "data-state", "stopped"]},
        {"text": "#stopped"},
        form_gone.clone(),
        // Here the test lets the agents go on: a's next round hears the message.
        {"goto": page("a")},
        {"wait": "#task[data-task='a'] #steer .told"},
        {"wait": "#steer .told[data-heard='true']", "timeout_ms": 30000},
        {"wait_attr": ["#task", "data-state", "done"], "timeout_ms": 30000},
        form_gone,
        {"text": "#steer .told"},
        {"text": "#rounds"},
        {"screenshot": shot.to_str().unwrap()},
    ]});
    const RELEASE_AFTER: usize = 19;
    let mut drive = browser.start(steps, &repo.scratch);
    let mut out = Vec::new();
    while let Some(line) = drive.next() {
        out.push(line);
        if out.len() == RELEASE_AFTER {
            going.release();
        }
    }
    drive.finish(&out);
    let value =
        |i: usize, key: &str| -> String { out[i][key].as_str().unwrap_or_default().to_string() };
    assert!(
        value(6, "text").contains("hears this as its next round's comment"),
        "the run's answer: {out:?}"
    );
    let told = value(8, "text");
    assert!(
        told.contains("SHOUT from the page")
            && told.contains("told from the page")
            && told.contains("next round")
            && told.contains("waiting"),
        "{told}"
    );
    assert!(value(15, "text").starts_with("stopping b"), "{out:?}");
    assert_eq!(value(17, "text"), "Stopped by a person (page)", "{out:?}");
    let heard = value(24, "text");
    assert!(
        heard.contains("heard ") && heard.contains(" after"),
        "{heard}"
    );
    let rounds = value(25, "text");
    assert!(
        rounds.contains("what a person said while first try ran")
            && rounds.contains("SHOUT from the page"),
        "its second round says what it was told: {rounds}"
    );
    assert!(shot.is_file());

    // The agent of a's next round was told the message as its comment.
    going.end();
    let env = going.env_of("a");
    assert!(
        env.contains("PLAIT_FEEDBACK=") && env.contains("SHOUT from the page"),
        "{env}"
    );
}
