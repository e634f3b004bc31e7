//! The run page at scale and in depth: the summary a page of thousands of tasks reads, what
//! git says of the branches (+/− lines, moved and merged by hand, the target's move), each
//! task's rounds with what it was told, and the page itself windowing 3,000 rows.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fixtures::three_tasks;
use crate::support::serve::{run, sample, Served, AGENT};
use crate::support::{git_in, TestRepo};

/// The reviewer asks for changes on the first try and approves every round after it.
const REVIEWER: &str = r#"[checks]
task = ["test -s lib/$PLAIT_TASK.txt"]
[review]
agent = { exec = '''if [ "$PLAIT_ROUND" = 0 ]; then echo 'make it louder'; exit 1; fi''' }
rounds = 2
"#;

/// A finished run whose tasks each had two rounds (the reviewer asked for changes on the
/// first), task b a third one a person sent it back for.
fn rounds_run() -> (TestRepo, String) {
    let repo = sample();
    let run = run(&repo, &three_tasks(AGENT, REVIEWER));
    let out = repo.plait(&["send-back", &run, "b", "--comment", "SHOUT it"]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    (repo, run)
}

/// Commits by hand in task c's worktree, and merges task a's branch into main by hand;
/// c's new tip.
fn move_by_hand(repo: &TestRepo, run: &str) -> String {
    let status = repo.status_json(&[run]);
    let worktree = std::path::PathBuf::from(status["tasks"][2]["worktree"].as_str().unwrap());
    std::fs::write(worktree.join("lib/c.txt"), "v1\nby hand\n").unwrap();
    git_in(&worktree, &["commit", "-q", "-am", "c by hand"]);
    repo.git(&[
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "a by hand",
        &format!("plait/{run}/a"),
    ]);
    git_in(&worktree, &["rev-parse", "HEAD"])
}

/// `GET path` with `Accept-Encoding: gzip`: the response's head and its body's bytes.
fn get_gzip(served: &Served, path: &str) -> (String, Vec<u8>) {
    let mut stream = TcpStream::connect(&served.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n",
        served.addr
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&response[..split]).to_lowercase();
    (head, response[split + 4..].to_vec())
}

fn gunzip(bytes: &[u8]) -> Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_summary_has_a_row_per_task_and_its_branches_say_lines_and_moves_by_hand() {
    let (repo, run) = rounds_run();
    let served = Served::start(&repo, &[]);
    let summary = served.get(&format!("/api/runs/{run}/summary"));
    let rows = summary["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let b = &rows[1];
    assert_eq!(
        (&b["id"], &b["state"], &b["verdict"], &b["by"]),
        (
            &json!("b"),
            &json!("done"),
            &json!("approve"),
            &json!("command")
        )
    );
    assert_eq!(
        (&b["rounds"], &b["sent_back"]),
        (&json!(2), &json!(1)),
        "{b}"
    );
    assert_eq!(
        (&b["checks"], &b["files"]),
        (&json!([1, 1]), &json!(1)),
        "{b}"
    );
    // A row is what the list shows, not the record.
    let allowed = [
        "id",
        "state",
        "verdict",
        "by",
        "overruled",
        "checks",
        "failed",
        "files",
        "violations",
        "rounds",
        "sent_back",
        "tokens",
        "cost_usd",
        "started_at",
        "finished_at",
        "error",
        "group",
        "conflict",
        "culprit",
        "excluded",
        "adopted",
    ];
    for row in rows {
        for key in row.as_object().unwrap().keys() {
            assert!(allowed.contains(&key.as_str()), "{key} in {row}");
        }
    }
    assert_eq!(summary["run"]["merge"]["tasks_included"], 3, "{summary}");
    assert!(summary["run"].get("tasks").is_none());
    assert_eq!(summary["gate"]["green"], true, "{summary}");
    assert!(summary["version"].is_string());
    // Gzipped for a client that takes it, the same JSON.
    let (head, zipped) = get_gzip(&served, &format!("/api/runs/{run}/summary"));
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert_eq!(gunzip(&zipped), summary);

    // Before anything moved by hand: lines, nothing moved or merged, main where it was.
    let branches = served.get(&format!("/api/runs/{run}/branches"));
    assert_eq!(
        branches["lines"],
        json!({"a": [1, 1], "b": [1, 1], "c": [1, 1]})
    );
    assert_eq!(
        (&branches["moved"], &branches["merged"]),
        (&json!({}), &json!([]))
    );
    assert_eq!(
        (&branches["target"]["branch"], &branches["target"]["ahead"]),
        (&json!("main"), &json!(0))
    );

    let tip = move_by_hand(&repo, &run);
    let branches = served.get(&format!("/api/runs/{run}/branches"));
    assert_eq!(branches["lines"]["c"], json!([2, 1]), "{branches}");
    assert_eq!(branches["moved"], json!({"c": tip}), "{branches}");
    assert_eq!(branches["merged"], json!(["a"]), "{branches}");
    assert!(
        branches["target"]["ahead"].as_u64() >= Some(2),
        "{branches}"
    );
    assert_eq!(branches["target"]["behind"], 0);
    let a = served.get(&format!("/api/runs/{run}/tasks/a"));
    assert_eq!(
        a["branch"],
        json!({"tip": a["task"]["commit"], "moved": false, "merged": true, "target": "main"})
    );
    let c = served.get(&format!("/api/runs/{run}/tasks/c"));
    assert_eq!(
        (&c["branch"]["moved"], &c["branch"]["tip"]),
        (&json!(true), &json!(tip))
    );

    // The search finds what the rows leave out: the changed paths.
    let found = served.get(&format!("/api/runs/{run}/search?q=C.TXT"));
    assert_eq!(found["tasks"], json!(["c"]));
    let all = served.get(&format!("/api/runs/{run}/search?q="));
    assert_eq!(all["tasks"], json!(["a", "b", "c"]));
}

#[test]
fn a_task_s_rounds_say_what_it_was_told_and_how_each_ended() {
    let (repo, run) = rounds_run();
    let served = Served::start(&repo, &[]);
    let b = served.get(&format!("/api/runs/{run}/tasks/b"));
    let rounds = b["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 3, "{}", b["rounds"]);
    let told = |i: usize| rounds[i]["told"]["kind"].as_str().unwrap();
    assert_eq!(
        (told(0), told(1), told(2)),
        ("prompt", "feedback", "person")
    );
    // The first try: judged, the reviewer's words kept, and another round followed.
    assert_eq!(
        rounds[0]["checks"][0]["command"],
        "test -s lib/$PLAIT_TASK.txt"
    );
    assert!(
        rounds[0]["review"]["output"]
            .as_str()
            .unwrap()
            .contains("make it louder"),
        "{}",
        rounds[0]
    );
    assert!(rounds[0]["outcome"]
        .as_str()
        .unwrap()
        .contains("another round"));
    assert!(rounds[1]["outcome"]
        .as_str()
        .unwrap()
        .contains("sent it back"));
    // The last: the person's comment, and the record's own checks and review.
    assert_eq!(rounds[2]["told"]["text"], "SHOUT it");
    assert!(rounds[2]["told"]["at"].as_u64().is_some());
    assert_eq!(rounds[2]["checks"][0]["passed"], true, "{}", rounds[2]);
    assert_eq!(rounds[2]["review"]["verdict"], "approve");
    assert_eq!(rounds[2]["outcome"], "done · approve");
    assert_eq!(b["adopted"], Value::Null);
    // A task nobody sent back: two rounds.
    let a = served.get(&format!("/api/runs/{run}/tasks/a"));
    assert_eq!(a["rounds"].as_array().unwrap().len(), 2, "{}", a["rounds"]);
}

/// The task of index `k` in [`many`]: its id and the file it changes.
fn many_task(k: usize) -> (String, String) {
    (
        format!("t{k:05}"),
        format!("src/d{:02}/f{k:05}.txt", k / 100),
    )
}

/// A finished run of `n` tasks written straight into `repo` (plait's own types for the
/// record, `git fast-import` for one branch a task): task k adds `k % 3 + 1` lines to its
/// file and changes one; every 10th failed its checks. The run's id.
fn many(repo: &TestRepo, n: usize) -> String {
    use plait_core::state::{
        ChangeKind, CheckResult, FileChange, MergeOutcome, Review, RunPhase, RunState, Store,
        TaskRecord, TaskState, Usage, Verdict,
    };
    let run = "1many0";
    let who = "Test Author <author@example.com> 1767225600 +0000";
    let mut stream = String::new();
    let data = |out: &mut String, text: &str| {
        let _ = writeln!(out, "data {}\n{text}", text.len());
    };
    let _ = writeln!(stream, "commit refs/heads/main\nmark :1\ncommitter {who}");
    data(&mut stream, "the base of many tasks");
    stream.push_str("from refs/heads/main^0\n");
    for k in 0..n {
        let _ = writeln!(stream, "M 100644 inline {}", many_task(k).1);
        data(&mut stream, &format!("one {k}\ntwo\n"));
    }
    for k in 0..n {
        let (id, path) = many_task(k);
        let _ = writeln!(
            stream,
            "commit refs/heads/plait/{run}/{id}\nmark :{}\ncommitter {who}",
            k + 2
        );
        data(&mut stream, &format!("plait({id}): fix it"));
        let _ = writeln!(stream, "from :1\nM 100644 inline {path}");
        let more: String = (0..=k % 3).map(|i| format!("more {i}\n")).collect();
        data(&mut stream, &format!("one {k}\nTWO\n{more}"));
    }
    let marks = repo.scratch.join("marks");
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .arg(format!("--export-marks={}", marks.display()))
        .current_dir(&repo.path)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stream.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    repo.git(&["reset", "-q", "--hard", "main"]);
    let ids: std::collections::HashMap<usize, String> = std::fs::read_to_string(&marks)
        .unwrap()
        .lines()
        .map(|l| {
            let (mark, sha) = l.split_once(' ').unwrap();
            (mark[1..].parse().unwrap(), sha.to_string())
        })
        .collect();
    let store = Store::new(repo.path.join(".git/plait"));
    std::fs::create_dir_all(store.run_dir(run)).unwrap();
    let tasks: Vec<TaskRecord> = (0..n)
        .map(|k| {
            let (id, path) = many_task(k);
            let dir = store.task_dir(run, &id);
            let mut t =
                TaskRecord::pending(run, &id, repo.scratch.join(&id), 1, dir.join("agent.log"));
            let failed = k % 10 == 3;
            t.state = if failed {
                TaskState::Failed
            } else {
                TaskState::Done
            };
            t.error = failed.then(|| "its checks still fail after 2 round(s) of changes".into());
            t.commit = Some(ids[&(k + 2)].clone());
            t.changes = vec![FileChange {
                path,
                kind: ChangeKind::Modified,
            }];
            t.started_at = Some(1_767_225_600_000);
            t.finished_at = Some(1_767_225_600_000 + 20_000);
            t.rounds = (k % 4) as u32;
            t.checks = vec![CheckResult {
                command: "make test".into(),
                passed: !failed,
                exit_code: Some(if failed { 2 } else { 0 }),
                tail: "ran 12 tests".into(),
                log: dir.join("checks-0/check-1.log"),
                ms: 1200,
                refused: Vec::new(),
                at_base: false,
                as_on_base: false,
                beyond_base: Vec::new(),
            }];
            t.review = Some(Review {
                verdict: Verdict::Approve,
                summary: "Looks right.".into(),
                comments: Vec::new(),
                by: "model".into(),
                round: t.rounds,
                note: None,
                usage: None,
            });
            t.usage = Some(Usage {
                input_tokens: 10_000 + k as u64,
                output_tokens: 800,
                cost_usd: Some(0.01),
                ..Usage::default()
            });
            t
        })
        .collect();
    let base = ids[&1].clone();
    let state = RunState {
        version: plait_core::state::STATE_VERSION,
        id: run.into(),
        goal: format!("{n} tasks"),
        plan: repo.scratch.join("plan.toml"),
        base: base.clone(),
        base_name: "main".into(),
        worktree_root: repo.scratch.clone(),
        phase: RunPhase::Finished,
        pid: 0,
        created_at: 1_767_225_600_000,
        finished_at: Some(1_767_225_700_000),
        merge: Some(MergeOutcome {
            branch: format!("plait/{run}/merged"),
            commit: base,
            included: tasks.iter().map(|t| t.id.clone()).collect(),
            excluded: Vec::new(),
            conflicts: Vec::new(),
            waiting: Vec::new(),
            commits: Default::default(),
        }),
        tasks,
        landed: Vec::new(),
        cleaned: false,
        merged_checks: Vec::new(),
        environment: None,
        base_checks_ignored: false,
        max_cost: None,
        groups: Vec::new(),
        culprits: None,
        timings: Vec::new(),
    };
    store.save(&state).unwrap();
    run.to_string()
}

#[test]
fn a_run_of_3000_tasks_is_summed_up_in_a_bounded_summary_and_every_branch_counted() {
    let repo = TestRepo::with_files(&[("README", "many\n")]);
    let run = many(&repo, 3000);
    let served = Served::start(&repo, &[]);
    let (status, text) = served.request("GET", &format!("/api/runs/{run}/summary"), &[], None);
    assert_eq!(status, 200);
    let (_, whole) = served.request("GET", &format!("/api/runs/{run}"), &[], None);
    // A row is a few hundred bytes, a fraction of the record.
    assert!(text.len() < 3000 * 350, "{} bytes", text.len());
    assert!(
        text.len() * 3 < whole.len(),
        "{} of {}",
        text.len(),
        whole.len()
    );
    let summary: Value = serde_json::from_str(&text).unwrap();
    let rows = summary["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), 3000);
    assert_eq!(
        rows[3],
        json!({"id": "t00003", "state": "failed", "verdict": "approve", "by": "model",
               "checks": [0, 1], "failed": ["make test"], "files": 1, "violations": 0,
               "rounds": 3, "tokens": [10003, 800], "cost_usd": 0.01,
               "started_at": 1_767_225_600_000u64, "finished_at": 1_767_225_620_000u64,
               "error": "its checks still fail after 2 round(s) of changes",
               "troubles": ["failed"], "attention": true})
    );
    assert_eq!(
        summary["totals"]["states"],
        json!({"done": 2700, "failed": 300})
    );
    let (_, zipped) = get_gzip(&served, &format!("/api/runs/{run}/summary"));
    assert!(
        zipped.len() * 5 < text.len(),
        "{} of {}",
        zipped.len(),
        text.len()
    );

    let branches = served.get(&format!("/api/runs/{run}/branches"));
    let lines = branches["lines"].as_object().unwrap();
    assert_eq!(lines.len(), 3000);
    for k in [0, 1, 2, 1234, 2999] {
        let want = json!([k % 3 + 2, 1]);
        assert_eq!(lines[&many_task(k).0], want, "task {k}");
    }
    // Counted once: the second look is the same.
    assert_eq!(served.get(&format!("/api/runs/{run}/branches")), branches);
}

mod browser {
    use serde_json::json;

    use super::{many, move_by_hand, rounds_run, Served, TestRepo};
    use crate::support::browser::{artifacts, ready, Browser};

    #[test]
    fn the_page_of_3000_tasks_renders_the_rows_in_view_with_their_lines() {
        let Some(browser) = Browser::find() else {
            return;
        };
        let repo = TestRepo::with_files(&[("README", "many\n")]);
        let run = many(&repo, 3000);
        let served = Served::start(&repo, &[]);
        let url = format!("http://{}/#/runs/{run}", served.addr);
        let shot = artifacts().join("serve-many.png");
        let out = browser.run(
            json!({"timeout_ms": 30000, "steps": [
                {"goto": url},
                ready(),
                {"wait": "#tasks [data-task='t00000']"},
                {"text": "#run .shown"},
                {"count": "#tasks [data-task]"},
                {"wait_attr": ["#tasks", "data-lines", "all"]},
                {"text": "#tasks [data-task='t00001'] .lines-cell"},
                {"screenshot": shot.to_str().unwrap(), "full_page": false},
                // Scrolled to the end, the last rows are put in the page.
                {"eval": "window.scrollTo(0, document.body.scrollHeight)"},
                {"wait": "#tasks [data-task='t02999']"},
                {"text": "#tasks [data-task='t02999'] .lines-cell"},
                {"count": "#tasks [data-task]"},
                {"count": "#tasks [data-task='t00000']"},
                {"click": "[data-filter='failed']"},
                {"text": "#run .shown"},
                {"fill": ["#search", "f02993"]},
                {"wait": "#tasks [data-task='t02993']"},
                {"count": "#tasks [data-task]"},
            ]}),
            &repo.scratch,
        );
        assert_eq!(out[3]["text"], "3000 tasks", "{out:?}");
        let rendered = out[4]["count"].as_u64().unwrap();
        assert!(
            (20..300).contains(&rendered),
            "only the rows in view: {out:?}"
        );
        assert_eq!(out[6]["text"], "+3 −1", "{out:?}");
        assert_eq!(out[10]["text"], "+4 −1", "{out:?}");
        assert!(out[11]["count"].as_u64().unwrap() < 300, "{out:?}");
        assert_eq!(out[12]["count"], 0, "the first rows left the page: {out:?}");
        assert_eq!(out[14]["text"], "300 of 3000 tasks", "{out:?}");
        // The search finds a path only the server knows of.
        assert_eq!(out[17]["count"], 1, "{out:?}");
    }

    #[test]
    fn a_task_s_page_shows_its_rounds_and_the_run_page_what_moved_by_hand() {
        let Some(browser) = Browser::find() else {
            return;
        };
        let (repo, run) = rounds_run();
        move_by_hand(&repo, &run);
        let served = Served::start(&repo, &[]);
        let url = format!("http://{}/", served.addr);
        let out = browser.run(
            json!({"timeout_ms": 20000, "steps": [
                {"goto": format!("{url}#/runs/{run}")},
                ready(),
                {"wait_attr": ["#tasks", "data-lines", "all"]},
                {"text": "#tasks [data-task='b'] .lines-cell"},
                {"attr": ["#tasks [data-task='c']", "data-moved"]},
                {"attr": ["#tasks [data-task='a']", "data-merged"]},
                {"attr": ["#target", "data-moved"]},
                {"text": "#target"},
                {"goto": format!("{url}#/runs/{run}/tasks/b")},
                ready(),
                {"count": "#rounds .round"},
                {"text": "#rounds .round[data-round='0'] .round-review"},
                {"attr": ["#rounds .round[data-round='1']", "data-told"]},
                {"text": "#rounds .round[data-round='2'] .told-text"},
                {"text": "#rounds .round[data-round='2'] h3"},
                {"goto": format!("{url}#/runs/{run}/tasks/c")},
                ready(),
                {"text": "#moved"},
            ]}),
            &repo.scratch,
        );
        assert_eq!(out[3]["text"], "+1 −1", "{out:?}");
        assert_eq!(out[4]["attr"], "true", "{out:?}");
        assert_eq!(out[5]["attr"], "true", "{out:?}");
        assert_eq!(out[6]["attr"], "true", "{out:?}");
        assert!(
            out[7]["text"]
                .as_str()
                .unwrap()
                .contains("main moved since the base"),
            "{out:?}"
        );
        assert_eq!(out[10]["count"], 3, "{out:?}");
        assert!(
            out[11]["text"].as_str().unwrap().contains("make it louder"),
            "{out:?}"
        );
        assert_eq!(out[12]["attr"], "feedback", "{out:?}");
        assert_eq!(out[13]["text"], "SHOUT it", "{out:?}");
        assert!(
            out[14]["text"].as_str().unwrap().contains("done · approve"),
            "{out:?}"
        );
        assert!(
            out[17]["text"].as_str().unwrap().contains("moved by hand"),
            "{out:?}"
        );
    }
}
