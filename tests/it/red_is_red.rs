//! Red is red: a check passed when it exited 0. One that also fails on the base is context:
//! a task whose check fails exactly as on the base made nothing worse and is not sent back;
//! one that fails otherwise is sent back, told that the base fails too; the gate lets a red
//! merge land only when `[checks] base = "ignore"` and the failure is the base's own.

use crate::support::sandbox::namespaces;
use crate::support::{stderr, stdout, task_json, Plan, TestRepo};

const FEATURE_TEST: &str = "import unittest\n\nfrom feature import feature\n\n\n\
    class FeatureTest(unittest.TestCase):\n    def test_feature(self):\n        \
    self.assertEqual(feature(), 2)\n";

const OTHER_TEST: &str = "import unittest\n\nfrom other import value\n\n\n\
    class OtherTest(unittest.TestCase):\n    def test_value(self):\n        \
    self.assertEqual(value(), 1)\n";

/// A project whose feature test fails on the base (`feature()` is 1, the test wants 2).
fn repo() -> TestRepo {
    TestRepo::with_files(&[
        ("feature.py", "def feature():\n    return 1\n"),
        ("other.py", "def value():\n    return 1\n"),
        ("notes.txt", "n\n"),
        ("tests/__init__.py", ""),
        ("tests/test_feature.py", FEATURE_TEST),
        ("tests/test_other.py", OTHER_TEST),
    ])
}

const FEATURE_CHECK: &str = "python3 -m unittest -q tests.test_feature";
const BOTH_CHECK: &str = "python3 -m unittest -q tests.test_feature tests.test_other";

/// The run's id, from its status.
fn run_id(repo: &TestRepo) -> String {
    repo.status_json(&[])["id"].as_str().unwrap().to_string()
}

#[test]
fn test_first_work_gets_its_rounds_and_lands_green_beside_a_task_red_as_on_the_base() {
    // The base's checks run in its layer.
    if !namespaces() {
        return;
    }
    let repo = repo();
    // Its first try is wrong; told that the check fails otherwise than on the base, it
    // gets it right.
    let feat = "if printf %s \"$PLAIT_FEEDBACK\" | grep -q 'also fails on the base'; \
                then printf 'def feature():\\n    return 2\\n' > feature.py; \
                else printf 'def feature():\\n    return 3\\n' > feature.py; fi";
    let plan = Plan::new()
        .goal("make tests/test_feature.py pass")
        .review_off()
        .set("review", "rounds", 2)
        .set("checks", "task", [FEATURE_CHECK])
        .set("checks", "merged", [FEATURE_CHECK])
        .task("feat")
        .prompt("make tests/test_feature.py pass")
        .owns(["feature.py"])
        .exec(feat)
        .task("notes")
        .prompt("add a note")
        .owns(["notes.txt"])
        .exec("echo more >> notes.txt")
        .to_toml();
    let out = repo.plait(&["run", repo.plan(&plan).to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let status = repo.status_json(&[]);
    let feat = task_json(&status, "feat");
    assert_eq!(feat["state"], "done", "{feat:#}");
    assert_eq!(feat["rounds"], 1, "{feat:#}");
    assert_eq!(feat["checks"][0]["passed"], true, "{feat:#}");
    // The unrelated task's check failed exactly as on the base: red, said so, not its
    // fault, no round for it.
    let notes = task_json(&status, "notes");
    assert_eq!(notes["state"], "done", "{notes:#}");
    assert_eq!(notes["rounds"], 0, "{notes:#}");
    let check = &notes["checks"][0];
    assert_eq!(check["passed"], false, "{check:#}");
    assert_eq!(check["at_base"], true, "{check:#}");
    assert_eq!(check["as_on_base"], true, "{check:#}");
    assert_eq!(status["merged_checks"][0]["passed"], true, "{status:#}");
    let text = stdout(&repo.plait(&["status"]));
    assert!(
        text.contains(&format!(
            "check `{FEATURE_CHECK}` failed, as it also does on the base for notes"
        )),
        "{text}"
    );
    let out = repo.plait(&["land", &run_id(&repo), "--into", "main"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(repo.read("feature.py"), "def feature():\n    return 2\n");
    assert_eq!(repo.read("notes.txt"), "n\nmore\n");
}

#[test]
fn the_gate_lands_red_only_when_told_to_and_only_as_red_as_the_base() {
    if !namespaces() {
        return;
    }
    let plan = |tasks: &[(&str, &str, &str)], ignore: bool| {
        let mut plan = Plan::new()
            .goal("g")
            .review_off()
            .set("checks", "task", [FEATURE_CHECK])
            .set("checks", "merged", [BOTH_CHECK]);
        if ignore {
            plan = plan.set("checks", "base", "ignore");
        }
        for (id, owns, exec) in tasks {
            plan = plan.task(id).prompt("p").owns([*owns]).exec(exec);
        }
        plan.to_toml()
    };
    let notes = ("notes", "notes.txt", "echo more >> notes.txt");
    // Red as on the base, and nothing said: the gate refuses.
    let repo = repo();
    let out = repo.plait(&["run", repo.plan(&plan(&[notes], false)).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    assert_eq!(status["merged_checks"][0]["passed"], false, "{status:#}");
    assert_eq!(status["merged_checks"][0]["as_on_base"], true, "{status:#}");
    let out = repo.plait(&["land", &run_id(&repo), "--into", "main"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("fails as it does on the base; [checks] base = \"ignore\""),
        "{}",
        stderr(&out)
    );
    assert_eq!(repo.read("notes.txt"), "n\n");

    // Told to ignore the base's own failure: it lands, the merged check still red.
    let repo = self::repo();
    let out = repo.plait(&["run", repo.plan(&plan(&[notes], true)).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = repo.plait(&["land", &run_id(&repo), "--into", "main"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(repo.read("notes.txt"), "n\nmore\n");

    // A task that adds a failure (its own check fails only as on the base, the merged one
    // otherwise) blocks even then.
    let breaker = (
        "other",
        "other.py",
        "printf 'def value():\\n    return 5\\n' > other.py",
    );
    let repo = self::repo();
    let out = repo.plait(&[
        "run",
        repo.plan(&plan(&[notes, breaker], true)).to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    assert_eq!(
        status["culprits"]["sets"][0]["tasks"],
        serde_json::json!(["other"]),
        "{:#}",
        status["culprits"]
    );
    let out = repo.plait(&["land", &run_id(&repo), "--into", "main"]);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(repo.read("other.py"), "def value():\n    return 1\n");
}

#[test]
fn a_tasks_own_checks_are_its_own_whatever_the_base_does() {
    if !namespaces() {
        return;
    }
    // It touches the file and leaves the feature as wrong as on the base.
    let touch = "printf '# looked\\n' >> feature.py";
    let plan = |own: bool| {
        let plan = Plan::new()
            .goal("g")
            .review_off()
            .set("review", "rounds", 1)
            .set("checks", "task", [FEATURE_CHECK])
            .task("feat")
            .prompt("make tests/test_feature.py pass")
            .owns(["feature.py"])
            .exec(touch);
        match own {
            true => plan.with("checks", [FEATURE_CHECK]).to_toml(),
            false => plan.to_toml(),
        }
    };
    // As `[checks] task` alone, it fails as on the base: not the task's doing.
    let repo = repo();
    let out = repo.plait(&["run", repo.plan(&plan(false)).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let feat = task_json(&status, "feat");
    assert_eq!(feat["state"], "done", "{feat:#}");
    assert_eq!(feat["rounds"], 0, "{feat:#}");
    // As its own check, the same failure is its own: sent back, then failed.
    let repo = self::repo();
    let out = repo.plait(&["run", repo.plan(&plan(true)).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let feat = task_json(&status, "feat");
    assert_eq!(feat["state"], "failed", "{feat:#}");
    assert_eq!(feat["rounds"], 1, "{feat:#}");
    let check = &feat["checks"][0];
    assert_eq!(check["at_base"], true, "{check:#}");
    assert_ne!(check["as_on_base"], true, "{check:#}");
    assert!(
        feat["error"]
            .as_str()
            .unwrap()
            .contains("its checks still fail"),
        "{feat:#}"
    );
}
