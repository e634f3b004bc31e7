//! A task run as several attempts (`attempts = 3`, `pick = "checks"`), as people review it:
//! the status's rows under the task, `plait review`'s candidates, the API's attempts and an
//! attempt's diff, and the task's page showing the candidates side by side with the chosen
//! one marked.

use serde_json::{json, Value};

use crate::support::browser::{artifacts, ready, Browser};
use crate::support::serve::{sample, Served};
use crate::support::{stderr, stdout, task_json, Plan, TestRepo};

/// Attempt 2 writes `good`; the others write `bad N`, which the task's check refuses.
const AGENT: &str = "if [ \"$PLAIT_ATTEMPT\" = 2 ]; then echo good > lib/a.txt; else echo \"bad $PLAIT_ATTEMPT\" > lib/a.txt; fi";

/// A run of task `a` as three attempts, one at a time, picked by its checks: attempt 1
/// fails, attempt 2 passes and is chosen, attempt 3 fails or never starts.
fn picked() -> (TestRepo, String) {
    let repo = sample();
    let toml = Plan::new()
        .goal("g")
        .review_off()
        .set("checks", "task", ["! grep bad lib/a.txt"])
        .task("a")
        .prompt("fix a")
        .owns(["lib/a.txt"])
        .exec(AGENT)
        .with("attempts", 3)
        .with("pick", "checks")
        .to_toml();
    let plan = repo.plan(&toml);
    let out = repo.plait(&["run", plan.to_str().unwrap(), "-j", "1"]);
    assert_eq!(out.status.code(), Some(0), "plait run: {}", stderr(&out));
    (repo, stdout(&out).trim().to_string())
}

#[test]
fn a_task_s_attempts_show_in_the_status_the_review_and_the_api() {
    let (repo, run) = picked();
    let status = repo.status_json(&[&run]);
    let a = task_json(&status, "a");
    assert_eq!(a["attempts"].as_array().map(Vec::len), Some(3), "{a}");
    assert_eq!(a["pick"]["attempt"], 2, "{a}");

    // The status: a row per attempt under the task, the chosen one saying why.
    let text = stdout(&repo.plait(&["status", &run]));
    let row = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("  {id} ")))
            .unwrap_or_else(|| panic!("no row for {id}:\n{text}"))
            .to_string()
    };
    assert!(row("a~1").contains("failed"), "{text}");
    assert!(
        row("a~2").ends_with("chosen (checks: the first attempt whose checks passed)"),
        "{text}"
    );
    assert!(
        text.contains("attempts: 1 task(s) ran as 3 attempt(s), 1 chosen"),
        "{text}"
    );

    // `plait review`: the candidates under the task, the chosen marked.
    let review = stdout(&repo.plait(&["review", &run, "--no-pager"]));
    assert!(
        review.contains(
            "attempts: 3 · attempt 2 chosen by checks: the first attempt whose checks passed"
        ),
        "{review}"
    );
    // Attempt 3 failed too, or never started (its state's width sets the columns).
    let line = |start: &str| {
        review
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_default()
    };
    assert!(line("  * a~2  done").contains("checks 1/1"), "{review}");
    let first = line("    a~1  failed");
    assert!(first.contains("checks 0/1"), "{review}");
    let (_, said) = first.split_once("checks 0/1").unwrap_or_default();
    assert!(!said.trim().is_empty(), "how it ended: {review}");
    let table = review.lines().find(|l| l.starts_with("  a~2")).unwrap();
    assert!(table.contains("chosen"), "{review}");

    // The page's data: the attempts with the pick, the run's row, an attempt's diff.
    let served = Served::start(&repo, &[]);
    let task = served.get(&format!("/api/runs/{run}/tasks/a"));
    let attempts = &task["attempts"];
    assert_eq!(attempts["pick"]["by"], "checks", "{attempts}");
    let list = attempts["list"].as_array().unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list[1]["chosen"], true, "{attempts}");
    assert_eq!(list[1]["branch"], format!("plait/{run}/a@2"));
    assert!(list[1]["agent"].as_str().unwrap().starts_with("exec: "));
    assert_eq!(list[0]["checks"][0]["passed"], false, "{attempts}");
    assert!(
        list[0]["checks"][0]["tail"]
            .as_str()
            .unwrap()
            .contains("bad 1"),
        "the failing check's last lines: {attempts}"
    );
    let summary = served.get(&format!("/api/runs/{run}/summary"));
    let row = task_json(&summary, "a");
    assert_eq!(
        (row["attempts"].as_u64(), row["chosen"].as_u64()),
        (Some(3), Some(2)),
        "{row}"
    );
    let diff = served.get(&format!("/api/runs/{run}/tasks/a~1/diff"));
    assert_eq!(diff["base"], status["base"], "{diff}");
    let added = &diff["files"][0]["hunks"][0]["lines"][1];
    assert_eq!(
        added,
        &json!({"op": "+", "old": null, "new": 1, "text": "bad 1"})
    );
    let (missing, _) = served.request("GET", &format!("/api/runs/{run}/tasks/a~4/diff"), &[], None);
    assert_eq!(missing, 404);
}

#[test]
fn the_task_page_shows_its_attempts_side_by_side_and_which_was_chosen() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let (repo, run) = picked();
    let served = Served::start(&repo, &[]);
    let url = format!("http://{}/", served.addr);
    let shot = artifacts().join("serve-attempts.png");
    let _ = std::fs::remove_file(&shot);
    let card = |n: u32| format!("#attempts .attempt[data-attempt='{n}']");
    let inner = |selector: &str| format!("document.querySelector({selector:?})?.innerText ?? null");
    let out = browser.run(
        json!({"timeout_ms": 15000, "steps": [
            {"goto": format!("{url}#/runs/{run}")},
            ready(),
            {"text": "#tasks [data-task='a'] .tag.attempts"},
            {"goto": format!("{url}#/runs/{run}/tasks/a")},
            ready(),
            {"wait": format!("{} .attempt-diff[data-loaded='true'] tr.add", card(1))},
            {"wait": format!("{} .attempt-diff[data-loaded='true'] tr.add", card(2))},
            {"count": "#attempts .attempt"},
            {"attr": ["#attempts .attempt[data-chosen='true']", "data-attempt"]},
            {"eval": inner("#attempts .pick-line")},
            {"eval": inner(&card(1))},
            {"eval": inner(&format!("{} .attempt-diff tr.add", card(2)))},
            {"attr": [card(1), "data-state"]},
            {"screenshot": shot.to_str().unwrap()},
        ]}),
        &repo.scratch,
    );
    let value = |i: usize, key: &str| -> Value { out[i][key].clone() };
    let text = |i: usize| value(i, "eval").as_str().unwrap_or_default().to_string();
    assert_eq!(value(2, "text"), "#2 of 3", "the run's row: {out:?}");
    assert_eq!(value(7, "count"), 3, "a card per attempt: {out:?}");
    assert_eq!(value(8, "attr"), "2", "attempt 2 is marked chosen: {out:?}");
    let pick = text(9);
    assert!(
        pick.contains("attempt 2 chosen")
            && pick.contains("checks")
            && pick.contains("the first attempt whose checks passed"),
        "{pick}"
    );
    let first = text(10);
    assert!(first.contains("✗"), "its check failed: {first}");
    assert!(
        first.contains("bad 1"),
        "its check's tail and diff: {first}"
    );
    assert!(first.contains(&format!("plait/{run}/a@1")), "{first}");
    assert!(text(11).contains("good"), "the chosen one's diff: {out:?}");
    assert_eq!(value(12, "attr"), "failed", "{out:?}");
    assert!(shot.is_file());
}
