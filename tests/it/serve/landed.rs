//! The page agrees with the record after a landing: a partial landing shows as landed with
//! what it left out and no Land button, a decision that changes the merge brings the gate
//! back; commands keep their case; a violation shows the change the agent tried to make.

use serde_json::{json, Value};

use crate::support::browser::{artifacts, ready, Browser};
use crate::support::fixtures::three_tasks;
use crate::support::serve::{run, sample, Served, AGENT};
use crate::support::{stderr, stdout, TestRepo};

/// Task a writes its file and, outside what it owns, a line into README.md; task b fails;
/// task c writes its file. Each task's check names its own file.
const PLAN: &str = r#"goal = "g"
[defaults]
agent = { exec = '''case "$PLAIT_TASK" in a) echo 'SNEAKY line the agent wrote' >> README.md ;; b) exit 3 ;; esac; echo v1 > lib/$PLAIT_TASK.txt''' }
[checks]
task = ["test -s lib/$PLAIT_TASK.txt"]
[[task]]
id = "a"
prompt = "fix a"
owns = ["lib/a.txt"]
[[task]]
id = "b"
prompt = "fix b"
owns = ["lib/b.txt"]
[[task]]
id = "c"
prompt = "fix c"
owns = ["lib/c.txt"]
"#;

/// A run of [`PLAN`] landed with `--partial`: only c's work is in main.
fn landed_in_part() -> (TestRepo, String) {
    let repo = TestRepo::with_files(&[
        ("README.md", "# sample\n"),
        ("lib/a.txt", "a\n"),
        ("lib/b.txt", "b\n"),
        ("lib/c.txt", "c\n"),
    ]);
    let run = run(&repo, PLAN);
    let refused = repo.plait(&["land", &run, "--into", "main"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let out = repo.plait(&["land", &run, "--into", "main", "--partial"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(said.contains("(fast-forward; in part"), "{said}");
    let status = stdout(&repo.plait(&["status", &run]));
    assert!(status.contains("(fast-forward, in part)"), "{status}");
    let main = repo.tree_files("main");
    assert_eq!(
        (main["lib/c.txt"].as_str(), main["lib/a.txt"].as_str()),
        ("v1\n", "a\n")
    );
    (repo, run)
}

#[test]
fn after_a_partial_landing_the_record_and_the_gate_say_landed_until_the_merge_changes() {
    let (repo, run) = landed_in_part();
    let status = repo.status_json(&[&run]);
    assert_eq!(status["landed"][0]["partial"], true, "{}", status["landed"]);
    assert!(
        status["landed"][0]["merged"].is_string(),
        "{}",
        status["landed"]
    );
    let served = Served::start(&repo, &[]);
    let gate = |s: &Served| s.get(&format!("/api/runs/{run}/summary"))["gate"].clone();
    let landed = gate(&served);
    assert_eq!(landed["landed"]["branch"], "main", "{landed}");
    assert_eq!(landed["landed"]["partial"], true, "{landed}");
    assert_eq!(
        landed["blockers"].as_array().map(Vec::len),
        Some(2),
        "what the landing left out: {landed}"
    );
    let runs = served.get("/api/runs");
    assert_eq!(runs["runs"][0]["landed"], true, "{runs}");
    // `plait runs` says what the page says.
    let listed = |r: &TestRepo| stdout(&r.plait(&["runs"]));
    assert!(listed(&repo).contains(" landed "), "{}", listed(&repo));
    // Accepting a's violations changes what belongs in the merge: what landed is history,
    // and the gate speaks for the merge as it will be.
    assert!(repo.plait(&["accept", &run, "a"]).status.success());
    let after = gate(&served);
    assert!(after["landed"].is_null(), "{after}");
    assert_eq!(served.get("/api/runs")["runs"][0]["landed"], false);
    assert!(listed(&repo).contains(" finished "), "{}", listed(&repo));
    // Landing again merges again and lands a's work too: landed once more.
    let out = repo.plait(&["land", &run, "--into", "main", "--partial"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let again = gate(&served);
    assert_eq!(again["landed"]["branch"], "main", "{again}");
    assert!(listed(&repo).contains(" landed "), "{}", listed(&repo));
    assert_eq!(repo.tree_files("main")["lib/a.txt"], "v1\n");
}

#[test]
fn the_page_after_a_partial_landing_shows_landed_commands_as_written_and_violations_diffs() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let (repo, run) = landed_in_part();
    let served = Served::start(&repo, &[]);
    let url = format!("http://{}/", served.addr);
    let shot = artifacts().join("serve-landed.png");
    let task_shot = artifacts().join("serve-violation.png");
    let _ = std::fs::remove_file(&shot);
    let visible = |selector: &str| {
        format!(
            "(() => {{ const e = document.querySelector({selector:?}); return !!e && e.offsetParent !== null; }})()"
        )
    };
    let inner = |selector: &str| format!("document.querySelector({selector:?})?.innerText ?? null");
    let command = "#rounds .round[data-round='0'] .round-checks code";
    let out = browser.run(
        json!({"timeout_ms": 15000, "steps": [
            {"goto": format!("{url}#/runs/{run}")},
            ready(),
            {"wait": format!("#run[data-run='{run}']")},
            {"attr": ["#gate", "data-landed"]},
            {"eval": inner("#gate h2")},
            {"count": "#gate .blockers li"},
            {"eval": visible("button[data-action='land']")},
            {"eval": "document.querySelector(\"button[data-action='land']\")?.disabled ?? null"},
            {"eval": inner(".page-head h1 .badge.landed")},
            {"screenshot": shot.to_str().unwrap()},
            {"goto": format!("{url}#/runs/{run}/tasks/a")},
            ready(),
            {"wait": "#violations .violation[data-path='README.md'] .violation-diff"},
            {"eval": inner("#violations .violation[data-path='README.md']")},
            {"count": "#violations .violation[data-path='README.md'] tr.add"},
            {"wait": command},
            {"eval": inner(command)},
            {"eval": format!("getComputedStyle(document.querySelector({command:?})).textTransform")},
            {"screenshot": task_shot.to_str().unwrap()},
        ]}),
        &repo.scratch,
    );
    let value = |i: usize, key: &str| -> Value { out[i][key].clone() };
    assert_eq!(value(3, "attr"), "true", "the gate says landed: {out:?}");
    let head = value(4, "eval");
    let head = head.as_str().unwrap_or_default();
    assert!(head.starts_with("Landed into main"), "{head}");
    assert!(head.contains("in part, leaving out"), "{head}");
    assert!(
        !head.contains("Not ready"),
        "no contradicting header: {head}"
    );
    assert_eq!(value(5, "count"), 2, "what it left out is listed: {out:?}");
    assert_eq!(value(6, "eval"), false, "no Land button shows: {out:?}");
    assert_eq!(value(7, "eval"), true, "nor could be pressed: {out:?}");
    assert_eq!(value(8, "eval"), "landed in part", "{out:?}");
    let violation = value(13, "eval");
    let violation = violation.as_str().unwrap_or_default();
    assert!(
        violation.contains("SNEAKY line the agent wrote") && violation.contains("# sample"),
        "the change the agent tried to make, against the base: {violation}"
    );
    assert_eq!(value(14, "count"), 1, "one line added: {out:?}");
    assert_eq!(
        value(16, "eval"),
        "test -s lib/$PLAIT_TASK.txt",
        "the command as written, in the text a person sees: {out:?}"
    );
    assert_eq!(value(17, "eval"), "none", "{out:?}");
    assert!(shot.is_file());
}

#[test]
fn a_full_landing_through_the_page_s_api_is_landed_with_the_gate_green() {
    let repo = sample();
    let run = run(&repo, &three_tasks(AGENT, ""));
    let served = Served::start(&repo, &[]);
    let gate = |s: &Served| s.get(&format!("/api/runs/{run}/summary"))["gate"].clone();
    let before = gate(&served);
    assert_eq!(before["green"], true, "{before}");
    assert!(before["landed"].is_null(), "{before}");
    let (status, said) = served.post(&format!("/api/runs/{run}/land"), json!({"into": "main"}));
    assert_eq!(status, 200, "{said}");
    let after = gate(&served);
    assert_eq!(after["green"], true, "{after}");
    assert_eq!(after["landed"]["branch"], "main", "{after}");
    assert_eq!(after["landed"]["fast_forward"], true, "{after}");
    assert!(after["landed"].get("partial").is_none(), "{after}");
    let record = repo.status_json(&[&run]);
    assert_eq!(
        after["landed"], record["landed"][0],
        "the record's own landing"
    );
}
