//! Supervisors for large runs: tasks grouped by path, each group merged into its own
//! branch and reviewed as a whole, then merged at the top; conflicts reported at the level
//! where they occur.

use plait_core::state::RunState;
use serde_json::json;

use crate::mock::{MockModel, Provider, ToolCall, Turn};
use crate::support::fixtures::wide;
use crate::support::{stderr, stdout, Plan, TestRepo};

const KEY: &str = "sk-test-groups-0123456789";

fn group_tasks(state: &RunState) -> Vec<Vec<String>> {
    state.groups.iter().map(|g| g.tasks.clone()).collect()
}

#[test]
fn a_run_over_the_threshold_is_grouped_by_path_and_merged_in_two_levels() {
    let (repo, plan) = wide(14);
    let state = repo.run(&plan.to_toml(), 4);
    // 14 tasks over the default threshold of 12: two groups of neighbouring directories.
    let groups = group_tasks(&state);
    assert_eq!(groups.len(), 2, "{groups:?}");
    let ids = |r: std::ops::RangeInclusive<usize>| -> Vec<String> {
        r.map(|i| format!("t{i:02}")).collect()
    };
    assert_eq!(groups, vec![ids(1..=7), ids(8..=14)]);
    for group in &state.groups {
        let merge = group.merge.as_ref().expect("each group is merged");
        assert_eq!(merge.included, group.tasks);
        assert!(merge.is_clean());
        assert!(group.merged_up, "no supervisor: the group goes up");
        let files = repo.tree_files(&group.branch);
        for (path, content) in &files {
            let dir: usize = path[1..3].parse().unwrap();
            let mine = group.tasks.contains(&format!("t{dir:02}"));
            assert_eq!(content.ends_with("touched\n"), mine, "{} {path}", group.id);
        }
    }
    let merge = state.merge.as_ref().unwrap();
    assert_eq!(merge.included.len(), 14);
    let files = repo.tree_files(&merge.branch);
    assert!(files.values().all(|c| c.ends_with("touched\n")));
    // The top merge joins the base and the two group branches.
    let parents = repo.git(&["rev-list", "--parents", "-n", "1", &merge.branch]);
    let parents: Vec<&str> = parents.split_whitespace().skip(1).collect();
    let groups: Vec<String> = state
        .groups
        .iter()
        .map(|g| g.merge.as_ref().unwrap().commit.clone())
        .collect();
    assert_eq!(parents[1..], groups, "{parents:?}");

    // status shows the tree.
    let out = repo.plait(&["status", &state.id]);
    let text = stdout(&out);
    let g1 = text.find("\ngroup-1 ").expect("group-1 line");
    let t01 = text.find("\n  t01 ").expect("t01 under its group");
    let g2 = text.find("\ngroup-2 ").expect("group-2 line");
    let t08 = text.find("\n  t08 ").expect("t08 under its group");
    assert!(g1 < t01 && t01 < g2 && g2 < t08, "{text}");
    assert!(text.contains("7 of 7 task(s) merged into plait/"), "{text}");
    let out = repo.plait(&["diff", &state.id, "group-2", "--stat"]);
    let stat = stdout(&out);
    assert!(
        stat.contains("d08/f.txt") && !stat.contains("d01/f.txt"),
        "{stat}"
    );

    // --groups 0 turns grouping off; clean removes the group branches.
    let out = repo.plait(&["clean", &state.id, "--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(repo.branches().iter().all(|b| !b.starts_with("plait/")));
    let plan_path = repo.plan(&plan.to_toml());
    let out = repo.plait(&["run", plan_path.to_str().unwrap(), "--groups", "0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    let status = repo.status_json(&[&run]);
    assert!(status.get("groups").is_none(), "{status}");
}

/// Tasks `a` and `b` both add `shared/a-b` (their globs both match the new path); `c` and
/// `d` change files of their own. `order` decides which tasks share a group.
fn conflicting(a_path: &str, b_path: &str) -> (TestRepo, String) {
    let repo = TestRepo::with_files(&[
        ("shared/a-1", "1\n"),
        ("shared/2-b", "2\n"),
        (a_path, "a\n"),
        (b_path, "b\n"),
        ("m/c.txt", "c\n"),
        ("m/d.txt", "d\n"),
    ]);
    let plan = Plan::new()
        .set("defaults", "timeout", "30s")
        .set("groups", "count", 2)
        .task("a")
        .owns([&format!("/{a_path}"), "/shared/a-*"])
        .exec(&format!("echo A > shared/a-b; echo a2 > {a_path}"))
        .task("b")
        .owns([&format!("/{b_path}"), "/shared/*-b"])
        .exec(&format!("echo B > shared/a-b; echo b2 > {b_path}"))
        .task("c")
        .owns(["/m/c.txt"])
        .exec("echo c2 > m/c.txt")
        .task("d")
        .owns(["/m/d.txt"])
        .exec("echo d2 > m/d.txt")
        .to_toml();
    (repo, plan)
}

#[test]
fn a_conflict_between_two_tasks_of_one_group_is_reported_at_the_group() {
    // a (lib/a.py) and b (lib/b.py) sort together: group-1 = a, b; group-2 = c, d.
    let (repo, plan) = conflicting("lib/a.py", "lib/b.py");
    let state = repo.run(&plan, 2);
    assert_eq!(group_tasks(&state), vec![vec!["a", "b"], vec!["c", "d"]]);
    let g1 = state.groups[0].merge.as_ref().unwrap();
    assert_eq!(g1.included, ["a"]);
    assert_eq!(g1.excluded, ["b"]);
    assert_eq!(g1.conflicts.len(), 1);
    assert_eq!(g1.conflicts[0].kind, "add/add");
    assert_eq!(g1.conflicts[0].tasks, ["a", "b"]);
    assert!(state.groups[1].merge.as_ref().unwrap().is_clean());
    // The group still goes up with what merged; the run reports the group's conflict.
    let merge = state.merge.as_ref().unwrap();
    assert_eq!(merge.included, ["a", "c", "d"]);
    assert_eq!(merge.excluded, ["b"]);
    assert_eq!(merge.conflicts.len(), 1);
    assert!(
        merge.conflicts[0].message.starts_with("in group-1: "),
        "{:?}",
        merge.conflicts
    );
    let files = repo.tree_files(&merge.branch);
    assert_eq!(files["shared/a-b"], "A\n");
    assert_eq!(files["m/d.txt"], "d2\n");
    let text = stdout(&repo.plait(&["status", &state.id]));
    assert!(text.contains("1 conflict(s) inside, left out: b"), "{text}");
}

#[test]
fn a_conflict_between_groups_is_reported_at_the_top_with_its_tasks() {
    // a (a/a.py) sorts first, b (z/b.py) last: group-1 = a, c; group-2 = d, b.
    let (repo, plan) = conflicting("a/a.py", "z/b.py");
    let state = repo.run(&plan, 2);
    assert_eq!(group_tasks(&state), vec![vec!["a", "c"], vec!["b", "d"]]);
    assert!(state
        .groups
        .iter()
        .all(|g| g.merge.as_ref().unwrap().is_clean()));
    let merge = state.merge.as_ref().unwrap();
    assert_eq!(merge.conflicts.len(), 1, "{:?}", merge.conflicts);
    let conflict = &merge.conflicts[0];
    assert_eq!(conflict.path, "shared/a-b");
    assert_eq!(conflict.tasks, ["a", "b"], "the tasks whose changes meet");
    assert!(
        conflict
            .message
            .starts_with("between group-1 and group-2: "),
        "{conflict:?}"
    );
    // group-2 as a whole stays out of the top merge.
    assert!(state.groups[0].merged_up && !state.groups[1].merged_up);
    assert_eq!(merge.included, ["a", "c"]);
    let mut excluded = merge.excluded.clone();
    excluded.sort();
    assert_eq!(excluded, ["b", "d"]);
}

#[test]
fn supervisors_review_each_group_and_a_person_can_overrule_them() {
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let review = |verdict: &str, summary: &str| {
        Turn::Tools(vec![ToolCall::new(
            "submit_review",
            json!({"verdict": verdict, "summary": summary}),
        )])
    };
    mock.script("review:group-1", vec![review("approve", "consistent")]);
    mock.script(
        "review:group-2",
        vec![review("request_changes", "t05 is wrong")],
    );
    let (repo, plan) = wide(6);
    let plan = plan
        .set("groups", "count", 2)
        .set("groups", "review", "mock")
        .set("groups", "rounds", 0)
        .mock("anthropic", &mock.url(), "claude-sonnet-4-5");
    let env = |name: &str| (name == "PLAIT_TEST_KEY").then(|| KEY.to_string());
    let state = repo.run_with_env(&plan.to_toml(), 2, &env);
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let [g1, g2] = &state.groups[..] else {
        panic!("two groups: {:?}", state.groups)
    };
    assert_eq!(g1.review.as_ref().unwrap().summary, "consistent");
    assert!(g1.merged_up);
    assert!(!g2.merged_up, "changes requested: group-2 stays out");
    let merge = state.merge.as_ref().unwrap();
    assert_eq!(merge.included, ["t01", "t02", "t03"]);
    let attention = plait_stages::report::attention(&state);
    assert!(
        attention
            .iter()
            .any(|a| a.contains("group-2 (request_changes)")),
        "{attention:?}"
    );

    // What a supervisor sees: its group's tasks, summaries and the merged diff.
    let request = mock
        .requests()
        .into_iter()
        .find(|r| r.task.as_deref() == Some("review:group-2"))
        .unwrap();
    let body = request.body.to_string();
    assert!(body.contains("Supervisor review of group-2"), "{body}");
    assert!(body.contains("task t05 (merged)"), "{body}");
    assert!(
        body.contains("d05/f.txt") && body.contains("+touched"),
        "{body}"
    );
    assert!(
        !body.contains("d01/f.txt"),
        "only its own group's diff: {body}"
    );

    let text = stdout(&repo.plait(&["review", &state.id]));
    assert!(
        text.contains("== group-2 · tasks t04, t05, t06 · request_changes (by the supervisor) · left out of the merge")
            && text.contains("summary: t05 is wrong"),
        "{text}"
    );

    // Landing is refused until a person decides; accepting the group re-merges it.
    let out = repo.plait(&["land", &state.id, "--into", "main"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = repo.plait(&["accept", &state.id, "group-2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("group group-2"), "{}", stdout(&out));
    let out = repo.plait(&["land", &state.id, "--into", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let files = repo.tree_files("main");
    assert!(
        files.values().all(|c| c.ends_with("touched\n")),
        "{files:?}"
    );
    let out = repo.plait(&["accept", &state.id, "group-9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no task or group `group-9`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_supervisors_request_for_changes_goes_back_to_the_tasks_it_names() {
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let review = |verdict: &str, summary: &str, comments: serde_json::Value| {
        Turn::Tools(vec![ToolCall::new(
            "submit_review",
            json!({"verdict": verdict, "summary": summary, "comments": comments}),
        )])
    };
    mock.script("review:group-1", vec![review("approve", "fine", json!([]))]);
    mock.script(
        "review:group-2",
        vec![
            review(
                "request_changes",
                "d05 needs a second line",
                json!([{"path": "d05/f.txt", "body": "add the word fixed"}]),
            ),
            review("approve", "now consistent", json!([])),
        ],
    );
    let (repo, plan) = wide(6);
    let plan = plan
        .set("groups", "count", 2)
        .set("groups", "review", "mock")
        .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
        // Workers that write the feedback they get into their file.
        .exec_all(
            "if [ -n \"$PLAIT_FEEDBACK\" ]; then echo \"$PLAIT_FEEDBACK\" | grep -o 'add the word fixed' >> \"$PLAIT_FILE\"; else echo touched >> \"$PLAIT_FILE\"; fi",
        );
    let env = |name: &str| (name == "PLAIT_TEST_KEY").then(|| KEY.to_string());
    let state = repo.run_with_env(&plan.to_toml(), 2, &env);
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    assert_eq!(
        mock.count("review:group-2"),
        2,
        "reviewed again after the changes"
    );
    assert_eq!(mock.count("review:group-1"), 1);
    let g2 = &state.groups[1];
    assert_eq!(g2.review.as_ref().unwrap().summary, "now consistent");
    assert!(g2.merged_up);
    // Only the task owning the named path went back.
    assert_eq!(state.task("t05").unwrap().rounds, 1);
    assert_eq!(state.task("t04").unwrap().rounds, 0);
    let merged = repo.tree_files(&state.merge.as_ref().unwrap().branch);
    assert_eq!(merged["d05/f.txt"], "file 5\ntouched\nadd the word fixed\n");
    assert_eq!(merged["d04/f.txt"], "file 4\ntouched\n");
    assert!(
        plait_stages::report::attention(&state).is_empty(),
        "{:?}",
        plait_stages::report::attention(&state)
    );
}

#[test]
fn a_grouped_run_reports_its_groups_as_it_goes() {
    let (repo, plan) = wide(14);
    let plan_path = repo.plan(&plan.to_toml());
    let out = repo.plait(&["run", plan_path.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let events: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stages: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["event"] == "group")
        .map(|e| {
            let g = &e["group"];
            (
                g["group"].as_str().unwrap().to_string(),
                g["stage"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let pairs = |g: &str, s: &str| (g.to_string(), s.to_string());
    assert_eq!(
        stages,
        [
            pairs("group-1", "merged"),
            pairs("group-2", "merged"),
            pairs("group-1", "up"),
            pairs("group-2", "up"),
        ]
    );
    assert_eq!(events.last().unwrap()["event"], "finished");
    // Without --json, the same steps are lines on stderr.
    let out = repo.plait(&["run", plan_path.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(
        err.contains("merged      group-1: 7 of 7 task(s) into plait/"),
        "{err}"
    );
    assert!(err.contains("up          group-2: in plait/"), "{err}");
}
