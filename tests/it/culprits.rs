//! The culprit search: when the merged checks fail, find the tasks to blame, hold them out
//! and land the rest.

use crate::support::{stderr, stdout, TestRepo};
use std::fmt::Write as _;

/// Sixteen modules, each defining its function, and a test that calls them all; the test
/// also fails when both `A_ON` and `B_ON` are set (two features that clash at run time).
fn modules() -> TestRepo {
    let mut files: Vec<(String, String)> = (0..16)
        .map(|k| {
            (
                format!("src/m{k:02}.sh"),
                format!("f{k:02}() {{ echo {k}; }}\n"),
            )
        })
        .collect();
    let mut test = String::from("for m in src/m*.sh; do . ./$m; done\n");
    for k in 0..16 {
        let _ = writeln!(test, "[ \"$(f{k:02})\" = {k} ] || exit 1");
    }
    test.push_str("[ -z \"$A_ON\" ] || [ -z \"$B_ON\" ]\n");
    files.push(("tests/run.sh".into(), test));
    TestRepo::with_owned_files(&files)
}

/// A plan of sixteen tasks, one per module; `edits` gives some of them a command of their
/// own (every other one adds a comment).
fn plan(edits: &[(usize, &str)], extra: &str) -> String {
    let mut toml = format!("goal = \"g\"\n[checks]\nmerged = [\"sh tests/run.sh\"]\n{extra}");
    for k in 0..16 {
        let edit = edits.iter().find(|(i, _)| *i == k).map_or_else(
            || format!("echo '# touched' >> src/m{k:02}.sh"),
            |(_, e)| e.to_string(),
        );
        let _ = writeln!(toml, "[[task]]\nid = \"m{k:02}\"\nprompt = \"p\"\nowns = [\"/src/m{k:02}.sh\"]\nagent = {{ exec = \"{edit}\" }}");
    }
    toml
}

/// Runs the plan through the binary with `--json`; the run's id and its bisect events.
fn run(repo: &TestRepo, toml: &str) -> (String, Vec<serde_json::Value>) {
    let path = repo.plan(toml);
    let out = repo.plait(&["run", path.to_str().unwrap(), "--json", "-j", "4"]);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        stderr(&out)
    );
    let events: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let id = events
        .iter()
        .find_map(|e| e["task"]["run"].as_str().map(str::to_string))
        .expect("a task event names the run");
    let bisect = events
        .into_iter()
        .filter(|e| e["event"] == "bisect")
        .collect();
    (id, bisect)
}

fn status(repo: &TestRepo, id: &str) -> (serde_json::Value, String) {
    let json = repo.status_json(&[id]);
    let text = stdout(&repo.plait(&["status", id]));
    (json, text)
}

fn included(state: &serde_json::Value) -> Vec<String> {
    state["merge"]["included"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn one_task_that_breaks_the_merged_tests_is_found_held_out_and_the_rest_lands() {
    let repo = modules();
    // m07 renames its function: its own file is fine, the test that calls it is not.
    let (id, events) = run(&repo, &plan(&[(7, "sed -i s/f07/g07/ src/m07.sh")], ""));
    let (state, text) = status(&repo, &id);
    let sets = &state["culprits"]["sets"];
    assert_eq!(sets.as_array().unwrap().len(), 1, "{state}");
    assert_eq!(sets[0]["tasks"], serde_json::json!(["m07"]), "{state}");
    assert!(text.contains("`m07` breaks `sh tests/run.sh`"), "{text}");
    // Held out of the merged branch, which was rebuilt from the rest and passes.
    let merged = included(&state);
    assert_eq!(merged.len(), 15, "{merged:?}");
    assert!(!merged.contains(&"m07".to_string()));
    assert_eq!(state["merged_checks"][0]["passed"], true, "{state}");
    // Each step was an event with the check runs so far; few runs for one among 16.
    let runs = state["culprits"]["runs"].as_u64().unwrap();
    assert!(
        runs <= 2 * 4 + 2,
        "{runs} check runs for one culprit among 16"
    );
    assert_eq!(events.len() as u64, runs, "{events:#?}");
    assert_eq!(events.last().unwrap()["step"]["runs"], runs);
    // The failing output of the culprit's merge is kept under the run.
    let logs = sets[0]["logs"].as_str().unwrap();
    assert!(std::path::Path::new(logs).is_dir(), "{logs}");
    // `land` refuses, naming the culprit; `land --partial` lands the green rest.
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("m07"), "{}", stderr(&out));
    let out = repo.plait(&["land", &id, "--into", "main", "--partial"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(repo.read("src/m03.sh").contains("# touched"));
    assert!(
        repo.read("src/m07.sh").contains("f07"),
        "the culprit did not land"
    );
    // A person who accepts the culprit overrules the search: it goes back into the merge.
    let out = repo.plait(&["accept", &id, "m07"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (state, _) = status(&repo, &id);
    assert!(state["culprits"]["sets"].is_null(), "{state}");
}

#[test]
fn two_tasks_that_break_the_tests_only_together_are_named_together() {
    let repo = modules();
    let (id, _) = run(
        &repo,
        &plan(
            &[
                (4, "echo A_ON=1 >> src/m04.sh"),
                (12, "echo B_ON=1 >> src/m12.sh"),
            ],
            "",
        ),
    );
    let (state, text) = status(&repo, &id);
    let sets = &state["culprits"]["sets"];
    assert_eq!(sets.as_array().unwrap().len(), 1, "{state}");
    // One of the pair is held out, which is enough for the rest to pass; the other is
    // named as its partner and lands.
    assert_eq!(sets[0]["tasks"], serde_json::json!(["m04"]), "{state}");
    assert_eq!(sets[0]["partners"], serde_json::json!(["m12"]), "{state}");
    assert!(
        text.contains("`m04` breaks `sh tests/run.sh` together with `m12`"),
        "{text}"
    );
    let merged = included(&state);
    assert_eq!(merged.len(), 15, "{merged:?}");
    assert!(merged.contains(&"m12".to_string()));
    assert_eq!(state["merged_checks"][0]["passed"], true, "{state}");
}

#[test]
fn a_base_that_already_fails_blames_no_task() {
    let repo = modules();
    repo.write("tests/run.sh", "exit 1\n");
    repo.commit_all("the tests fail already");
    let (id, events) = run(&repo, &plan(&[], ""));
    let (state, text) = status(&repo, &id);
    assert_eq!(
        state["culprits"]["base_fails"],
        serde_json::json!(["sh tests/run.sh"])
    );
    assert!(state["culprits"]["sets"].is_null(), "{state}");
    assert!(
        text.contains("on the base alone: no task is to blame"),
        "{text}"
    );
    assert_eq!(included(&state).len(), 16);
    if plait_sandbox::sandbox::view_support().is_ok() {
        // plait built the base before any task and saw the check fail there: no search.
        assert!(events.is_empty(), "{events:?}");
        assert_eq!(state["merged_checks"][0]["at_base"], true, "{state}");
    } else {
        assert_eq!(
            events.last().unwrap()["step"]["tested"],
            serde_json::json!(["base"]),
            "the last step tested the base alone"
        );
        assert!(
            events.len() <= 7,
            "{} check runs to find the base at fault",
            events.len()
        );
    }
    let out = repo.plait(&["land", &id, "--into", "main", "--partial"]);
    assert!(!out.status.success(), "a failing merge must not land");
}

#[test]
fn a_flaky_check_is_reported_as_flaky_not_blamed() {
    let repo = modules();
    // Fails on the merge, passes on the culprit search's first tree (the same tasks,
    // again): the search's scratch branch is there only then. On the base, where plait
    // warms its seed, it passes.
    let check = "[ $PLAIT_TASK = base ] && exit 0; \
                 git rev-parse -q --verify refs/heads/plait/$PLAIT_RUN/bisect";
    let toml = plan(&[], "").replace(
        "merged = [\"sh tests/run.sh\"]",
        &format!("merged = ['{check}']"),
    );
    let (id, _) = run(&repo, &toml);
    let (state, text) = status(&repo, &id);
    assert!(state["culprits"]["sets"].is_null(), "{state}");
    assert_eq!(
        state["culprits"]["flaky"].as_array().unwrap().len(),
        1,
        "{state}"
    );
    assert!(text.contains("flaky"), "{text}");
    assert_eq!(included(&state).len(), 16, "nobody held out");
}

#[test]
fn bisect_false_leaves_a_failing_merge_alone() {
    let repo = modules();
    let (id, events) = run(
        &repo,
        &plan(&[(7, "sed -i s/f07/g07/ src/m07.sh")], "bisect = false\n"),
    );
    let (state, _) = status(&repo, &id);
    assert!(state["culprits"].is_null(), "{state}");
    assert!(events.is_empty());
    assert_eq!(state["merged_checks"][0]["passed"], false);
}

#[test]
fn check_bisect_names_the_culprits_without_changing_the_run() {
    let repo = modules();
    let (id, _) = run(
        &repo,
        &plan(&[(7, "sed -i s/f07/g07/ src/m07.sh")], "bisect = false\n"),
    );
    let before = repo.status_json(&[&id]);
    let out = repo.plait(&["check", &id, "--bisect"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("`m07` breaks `sh tests/run.sh`"), "{text}");
    assert!(
        stderr(&out).contains("bisect"),
        "progress on stderr: {}",
        stderr(&out)
    );
    let out = repo.plait(&["check", &id, "--bisect", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["culprits"]["sets"][0]["tasks"],
        serde_json::json!(["m07"])
    );
    let after = repo.status_json(&[&id]);
    assert!(after["culprits"].is_null());
    assert_eq!(before["merge"], after["merge"], "the run is not changed");
}

#[test]
fn with_rework_a_culprit_gets_another_round_told_what_broke() {
    let repo = modules();
    // m07 renames its function; told what broke, it puts the name back.
    let edit = "if [ -n \\\"$PLAIT_FEEDBACK\\\" ]; then echo $PLAIT_FEEDBACK; sed -i s/g07/f07/ src/m07.sh; echo '# fixed' >> src/m07.sh; else sed -i s/f07/g07/ src/m07.sh; fi";
    let (id, events) = run(&repo, &plan(&[(7, edit)], "rework = 1\n"));
    let (state, _) = status(&repo, &id);
    assert!(!events.is_empty(), "a search ran");
    assert_eq!(
        state["culprits"]["reworked"],
        serde_json::json!(["m07"]),
        "{state}"
    );
    assert!(
        state["culprits"]["sets"].is_null(),
        "nobody held out: {state}"
    );
    assert_eq!(included(&state).len(), 16);
    assert_eq!(state["merged_checks"][0]["passed"], true);
    let log = std::fs::read_to_string(
        state["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == "m07")
            .unwrap()["log"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(log.contains("breaks `sh tests/run.sh`"), "{log}");
    assert!(
        log.contains("f07: not found") || log.contains("Output of the failing"),
        "{log}"
    );
    assert!(repo
        .git(&["show", &format!("plait/{id}/merged:src/m07.sh")])
        .contains("# fixed"));
}
