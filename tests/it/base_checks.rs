//! A check that already fails on the base: plait ran it there before any task, so it is
//! said to fail on the base, sends no task back for rounds it cannot win, searches no
//! culprit, and keeps the run from landing saying so, unless `[checks] base = "ignore"`.

use std::fmt::Write as _;

use crate::support::sandbox::namespaces;
use crate::support::{stderr, stdout, task_json, Plan, TestRepo};

fn repo() -> TestRepo {
    TestRepo::with_files(&[
        ("lint.sh", "#!/bin/sh\n! grep -rq TODO src\n"),
        ("src/a.txt", "a TODO\n"),
        ("src/b.txt", "b\n"),
        ("src/c.txt", "c\n"),
    ])
}

fn plan(extra: &str) -> String {
    let mut plan = String::from(
        "goal = \"g\"\n[review]\nagent = \"off\"\nrounds = 2\n\
         [checks]\ntask = [\"sh lint.sh\"]\nmerged = [\"sh lint.sh\"]\n",
    );
    plan.push_str(extra);
    for id in ["b", "c"] {
        let _ = write!(
            plan,
            "[[task]]\nid = \"{id}\"\nprompt = \"p\"\nowns = [\"src/{id}.txt\"]\n\
             agent = {{ exec = \"echo more >> src/{id}.txt\" }}\n"
        );
    }
    plan
}

#[test]
fn a_check_red_on_the_base_sends_no_task_back_and_the_gate_says_why() {
    // The base's checks run in its layer.
    if !namespaces() {
        return;
    }
    let repo = repo();
    let out = repo.plait(&["run", repo.plan(&plan("")).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    for id in ["b", "c"] {
        let task = task_json(&status, id);
        assert_eq!(task["state"], "done", "{task:#}");
        // One round: the lint's failure was not held against the task.
        assert_eq!(task["rounds"], 0, "{task:#}");
        assert_eq!(task["checks"][0]["at_base"], true, "{task:#}");
        assert_eq!(task["checks"][0]["as_on_base"], true, "{task:#}");
        assert_eq!(task["checks"][0]["passed"], false, "{task:#}");
        let branch = repo.tree_files(&format!("plait/{}/{id}", status["id"].as_str().unwrap()));
        assert_eq!(branch[&format!("src/{id}.txt")], format!("{id}\nmore\n"));
    }
    assert_eq!(status["merged_checks"][0]["at_base"], true);
    // No search: the base's build said it already.
    assert!(
        status["culprits"]["sets"].is_null(),
        "{:#}",
        status["culprits"]
    );
    assert_eq!(
        status["culprits"]["base_fails"],
        serde_json::json!(["sh lint.sh"])
    );
    assert_eq!(
        status["environment"]["failed_at_base"],
        serde_json::json!(["sh lint.sh"])
    );
    let text = stdout(&repo.plait(&["status"]));
    assert!(
        text.contains("already failing at the base: sh lint.sh")
            && text.contains("FAILED, as it also does on the base"),
        "{text}"
    );
    let run = status["id"].as_str().unwrap().to_string();
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("sh lint.sh (fails as it does on the base"),
        "{}",
        stderr(&out)
    );

    // Told to ignore it, the gate lets the run land.
    let repo = self::repo();
    let out = repo.plait(&[
        "run",
        repo.plan(&plan("base = \"ignore\"\n")).to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let run = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(repo.read("src/b.txt"), "b\nmore\n");
}

/// An exec agent is run once by default: a failing check does not apply it again (a
/// command that appends would append twice); `[review] rounds` in the repository's config
/// (or the plan) asks for more.
#[test]
fn an_exec_agent_gets_no_rounds_unless_asked_and_the_config_may_ask() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    let plan = repo.plan(
        &Plan::new()
            .goal("g")
            .review_off()
            .set("checks", "task", ["test $(grep -c x a.txt) -ne 1"])
            .task("a")
            .owns(["a.txt"])
            .exec("echo x >> a.txt")
            .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "failed", "{a:#}");
    assert_eq!(a["rounds"], 0, "{a:#}");
    assert!(
        a["error"]
            .as_str()
            .unwrap()
            .contains("an exec agent gets none"),
        "{a:#}"
    );
    let run = status["id"].as_str().unwrap();
    assert_eq!(
        repo.tree_files(&format!("plait/{run}/a"))["a.txt"],
        "a\nx\n"
    );

    repo.write(".plait.toml", "[review]\nrounds = 1\n");
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a:#}");
    assert_eq!(a["rounds"], 1, "{a:#}");
}

/// A check that names a task's own (`$PLAIT_TASK`) fails on the base for want of it, which
/// says nothing of a task's: such a check still sends the task back.
#[test]
fn a_check_naming_the_task_is_not_excused_by_the_base() {
    let repo = TestRepo::with_files(&[("lib/a.txt", "a\n")]);
    let agent = "if [ \"$PLAIT_ROUND\" = 0 ]; then echo broken > lib/a.txt; else echo fixed > lib/a.txt; fi";
    let plan = repo.plan(
        &Plan::new()
            .goal("g")
            .review_off()
            .set("review", "rounds", 1)
            .set("checks", "task", ["grep -q fixed lib/$PLAIT_TASK.txt"])
            .task("a")
            .owns(["lib/a.txt"])
            .exec(agent)
            .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a:#}");
    assert_eq!(a["rounds"], 1, "{a:#}");
}

/// The merged checks run at the base only when they fail on the merged work: a gate that
/// passes runs them once; one that fails on the base too is told so (its run at the base
/// logged under `merged-checks/at-base/`), blames no task and searches no culprit.
#[test]
fn merged_checks_run_at_the_base_only_when_they_fail() {
    // The base's checks run in its layer.
    if !namespaces() {
        return;
    }
    let plan = |merged: &str| {
        let mut plan = format!(
            "goal = \"g\"\n[review]\nagent = \"off\"\n\
             [checks]\ntask = [\"true\"]\nmerged = [\"{merged}\"]\n"
        );
        for id in ["b", "c"] {
            let _ = write!(
                plan,
                "[[task]]\nid = \"{id}\"\nprompt = \"p\"\nowns = [\"src/{id}.txt\"]\n\
                 agent = {{ exec = \"echo more >> src/{id}.txt\" }}\n"
            );
        }
        plan
    };
    // Green: the merged check ran on the merged work alone.
    let repo = repo();
    let out = repo.plait(&[
        "run",
        "--timings",
        repo.plan(&plan("test -s src/b.txt")).to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let run_dir = repo
        .path
        .join(".git/plait/runs")
        .join(status["id"].as_str().unwrap());
    assert!(!run_dir.join("merged-checks/at-base").exists());
    assert!(
        !run_dir.join("seed-checks/2").exists(),
        "the merged check ran at the base"
    );
    // Where the time went, in the record and on the terminal.
    let steps: Vec<&str> = status["timings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["step"].as_str().unwrap())
        .collect();
    for step in ["tasks", "merge", "merged checks", "agent", "task checks"] {
        assert!(steps.contains(&step), "{steps:?}");
    }
    let text = stderr(&out);
    assert!(
        text.contains("timings (") && text.contains("tasks' steps, summed:"),
        "{text}"
    );
    assert!(text.contains("2× ·"), "{text}");

    // Red on the base too: run there once, said, no culprit.
    let repo = self::repo();
    let out = repo.plait(&["run", repo.plan(&plan("sh lint.sh")).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    assert_eq!(status["merged_checks"][0]["at_base"], true, "{status:#}");
    assert!(
        status["culprits"]["sets"].is_null(),
        "{:#}",
        status["culprits"]
    );
    assert_eq!(
        status["environment"]["failed_at_base"],
        serde_json::json!(["sh lint.sh"])
    );
    let run_dir = repo
        .path
        .join(".git/plait/runs")
        .join(status["id"].as_str().unwrap());
    let log = std::fs::read_to_string(run_dir.join("merged-checks/at-base/check-1.log")).unwrap();
    assert!(log.contains("sh lint.sh"), "{log}");

    // Red on the merged work only: blamed on the task that broke it.
    let repo = self::repo();
    repo.write("src/a.txt", "a\n");
    repo.commit_all("no TODO");
    let mut broken = plan("sh lint.sh");
    broken = broken.replace("echo more >> src/b.txt", "echo TODO >> src/b.txt");
    let out = repo.plait(&["run", repo.plan(&broken).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    assert_ne!(status["merged_checks"][0]["at_base"], true, "{status:#}");
    assert_eq!(
        status["culprits"]["sets"][0]["tasks"],
        serde_json::json!(["b"]),
        "{:#}",
        status["culprits"]
    );
}
