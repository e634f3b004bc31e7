//! The gate's consistency with itself: checks that cannot run are the plan's fault, found
//! before anything is created where they can be, and never fed back to an agent; an empty
//! merge is not checked.

use crate::support::{stderr, stdout, TestRepo};

fn one_task(checks: &str) -> String {
    format!(
        "goal = \"g\"\n[checks]\n{checks}\n[review]\nagent = \"off\"\nrounds = 2\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/a.txt\"]\n\
         agent = {{ exec = \"echo $PLAIT_ROUND >> rounds.log; echo more >> a.txt\" }}\n"
    )
}

#[test]
fn a_check_naming_a_missing_program_is_a_plan_error_and_creates_nothing() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    let path = repo.plan(&one_task(
        "task = [\"pytset -q\"]\nmerged = [\"RUST_LOG=x cargo-nope test && true\"]",
    ));
    let out = repo.plait(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("[checks] task: `pytset -q` runs `pytset`, which is not on PATH"),
        "{said}"
    );
    assert!(said.contains("runs `cargo-nope`"), "{said}");
    assert_eq!(repo.branches(), ["main"]);
    assert!(!repo.path.join(".git/plait/runs").exists());
}

#[test]
fn a_check_whose_program_is_not_found_at_run_time_is_not_the_agents_fault() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    // Not on PATH when the plan is read, so only the run can tell: a program the check's
    // own environment lacks.
    let path = repo.plan(&one_task("task = [\"PATH=/nowhere; ls\"]"));
    let out = repo.plait(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let state = repo.status_json(&[]);
    let task = &state["tasks"][0];
    assert_eq!(task["state"], "failed", "{task:#}");
    let error = task["error"].as_str().unwrap_or_default();
    assert!(error.contains("cannot run: `ls` was not found"), "{error}");
    // One round only: the agent was not sent back for it.
    assert_eq!(task["rounds"], 0, "{task:#}");
    let _ = stdout(&out);
}

#[test]
fn an_empty_merge_runs_no_merged_checks() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    let marker = repo.scratch.join("merged-ran");
    let toml = format!(
        "goal = \"g\"\n[checks]\nmerged = [\"touch {}\"]\n[review]\nagent = \"off\"\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/a.txt\"]\nagent = {{ exec = \"exit 3\" }}\n",
        marker.display()
    );
    let path = repo.plan(&toml);
    let out = repo.plait(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!marker.exists(), "merged checks ran on a merge of no task");
    let merged = repo.status_json(&[])["merged_checks"].clone();
    assert!(merged.as_array().is_none_or(|a| a.is_empty()), "{merged:#}");
}
