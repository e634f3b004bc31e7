//! Waves: `after = [...]`, a task that starts from the merged result of the tasks it
//! comes after, in one run that lands once.

use std::fs;

use crate::support::fixtures::{culprit_waves, culprit_waves_repo};
use crate::support::{stderr, stdout, wait_until, Plan, TestRepo};

/// A crate whose modules `a` and `b` call `core::old_total`, which an expand/contract
/// rename turns into `core::total`.
fn rename_crate() -> TestRepo {
    TestRepo::with_files(&[
        (
            "Cargo.toml",
            "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (".gitignore", "target/\n"),
        ("src/lib.rs", "pub mod a;\npub mod b;\npub mod core;\n"),
        (
            "src/core.rs",
            "pub fn old_total(x: u32) -> u32 {\n    x + 1\n}\n",
        ),
        (
            "src/a.rs",
            "pub fn a() -> u32 {\n    crate::core::old_total(1)\n}\n\n#[test]\nfn a_adds_one() {\n    assert_eq!(a(), 2);\n}\n",
        ),
        (
            "src/b.rs",
            "pub fn b() -> u32 {\n    crate::core::old_total(2)\n}\n\n#[test]\nfn b_adds_one() {\n    assert_eq!(b(), 3);\n}\n",
        ),
    ])
}

/// `total` as `core.rs` holds it, written by `printf`.
const PRINT_TOTAL: &str = r"printf 'pub fn total(x: u32) -> u32 {\n    x + 1\n}\n'";

/// The first two waves of the rename: `core-add` adds `total` beside `old_total`, the
/// callers switch. `after` is left out with `waves = false`.
fn rename_callers(waves: bool) -> Plan {
    let after = |plan: Plan, ids: &[&str]| if waves { plan.after(ids) } else { plan };
    let plan = Plan::new()
        .goal("rename old_total to total")
        .set("checks", "task", ["cargo check --offline --quiet"])
        .set("checks", "merged", ["cargo test --offline --quiet"])
        .task("core-add")
        .prompt("add total beside old_total")
        .owns(["/src/core.rs"])
        .exec(&format!("{PRINT_TOTAL} >> src/core.rs"));
    let plan = after(
        plan.task("a").prompt("call total").owns(["/src/a.rs"]),
        &["core-add"],
    )
    .exec("sed -i s/old_total/total/ src/a.rs");
    after(
        plan.task("b").prompt("call total").owns(["/src/b.rs"]),
        &["core-add"],
    )
    .exec("sed -i s/old_total/total/ src/b.rs")
}

/// The three waves of the rename: [`rename_callers`], then `core-drop` removes `old_total`.
fn rename_plan(waves: bool) -> String {
    let plan = rename_callers(waves)
        .task("core-drop")
        .prompt("drop old_total")
        .owns(["/src/core.rs"]);
    let plan = if waves { plan.after(["a", "b"]) } else { plan };
    plan.exec(&format!("{PRINT_TOTAL} > src/core.rs")).to_toml()
}

#[test]
fn an_expand_contract_rename_runs_in_waves_and_lands_once() {
    let repo = rename_crate();
    let plan = repo.plan(&rename_plan(true));
    let out = repo.plait(&["run", plan.to_str().unwrap(), "-j", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    let tasks = status["tasks"].as_array().unwrap();
    for t in tasks {
        assert_eq!(t["state"], "done", "{t:#}");
        let checks = t["checks"].as_array().unwrap();
        assert!(
            checks.len() == 1 && checks[0]["passed"] == true,
            "every task's own cargo check passes where it started: {t:#}"
        );
    }
    let core_add = tasks[0]["commit"].as_str().unwrap();
    // The callers started from core-add's work; core-drop from theirs, merged.
    for t in &tasks[1..3] {
        assert_eq!(t["after"], serde_json::json!(["core-add"]));
        assert_eq!(t["start"].as_str(), Some(core_add), "{t:#}");
        assert_eq!(t["start_from"]["core-add"].as_str(), Some(core_add));
        assert_eq!(
            t["changes"].as_array().unwrap().len(),
            1,
            "only its own file"
        );
    }
    let drop = &tasks[3];
    assert_eq!(drop["after"], serde_json::json!(["a", "b"]));
    let from = drop["start_from"].as_object().unwrap();
    assert_eq!(from.len(), 3, "a, b and core-add through them: {drop:#}");
    assert_eq!(drop["start_from"]["a"], tasks[1]["commit"]);
    assert_eq!(status["merged_checks"][0]["passed"], true, "{status:#}");
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(
        merged["src/core.rs"],
        "pub fn total(x: u32) -> u32 {\n    x + 1\n}\n"
    );
    assert!(merged["src/a.rs"].contains("crate::core::total(1)"));
    assert!(merged["src/b.rs"].contains("crate::core::total(2)"));
    // A task's diff is its own work; --from-base shows what it started from too.
    let own = stdout(&repo.plait(&["diff", &run, "a", "--stat"]));
    assert!(
        own.contains("src/a.rs") && !own.contains("core.rs"),
        "{own}"
    );
    let whole = stdout(&repo.plait(&["diff", &run, "a", "--stat", "--from-base"]));
    assert!(
        whole.contains("src/a.rs") && whole.contains("src/core.rs"),
        "{whole}"
    );
    let table = stdout(&repo.plait(&["status", &run]));
    assert!(table.contains("WAITS"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("core-drop") && l.contains("a,b")),
        "{table}"
    );
    // One landing takes all three waves.
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let main = repo.tree_files("main");
    assert_eq!(main["src/core.rs"], merged["src/core.rs"]);
    assert!(main["src/a.rs"].contains("total(1)") && !main["src/a.rs"].contains("old_total"));
}

#[test]
fn without_after_the_callers_own_checks_fail_at_the_base() {
    // The same tasks all starting from the base: the callers call a name that does not
    // exist there, so their cargo check fails (the test above can fail).
    let repo = rename_crate();
    let without_drop = rename_callers(false).to_toml();
    let plan = repo.plan(&without_drop);
    let _ = repo.plait(&["run", plan.to_str().unwrap(), "-j", "2"]);
    let status = repo.status_json(&[]);
    let a = &status["tasks"][1];
    assert_eq!(a["id"], "a");
    assert_eq!(a["checks"][0]["passed"], false, "{a:#}");
}

#[test]
fn a_failed_task_blocks_the_tasks_after_it_which_are_named() {
    let repo = TestRepo::with_files(&[
        ("src/core.rs", "c\n"),
        ("src/a.rs", "a\n"),
        ("src/b.rs", "b\n"),
        ("docs/x.md", "x\n"),
    ]);
    let plan = repo.plan(
        &Plan::new()
            .task("core")
            .owns(["/src/core.rs"])
            .exec("echo broken; exit 4")
            .task("a")
            .owns(["/src/a.rs"])
            .after(["core"])
            .exec("echo 2 >> src/a.rs")
            .task("b")
            .owns(["/src/b.rs"])
            .after(["a"])
            .exec("echo 2 >> src/b.rs")
            .task("docs")
            .owns(["/docs/**"])
            .exec("echo 2 >> docs/x.md")
            .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    let t = |i: usize| &status["tasks"][i];
    assert_eq!(t(0)["state"], "failed");
    assert_eq!(t(1)["state"], "blocked", "{:#}", t(1));
    assert_eq!(t(1)["blocked_by"], serde_json::json!(["core"]));
    let why = t(1)["error"].as_str().unwrap();
    assert!(
        why.contains("core failed (command exited with status 4)"),
        "{why}"
    );
    assert_eq!(t(2)["state"], "blocked");
    // The cause, through a.
    assert_eq!(t(2)["blocked_by"], serde_json::json!(["core"]));
    assert!(t(1)["worktree"]
        .as_str()
        .is_some_and(|w| !std::path::Path::new(w).exists()));
    assert!(
        !repo.branches().contains(&format!("plait/{run}/a")),
        "a blocked task never gets a branch"
    );
    assert_eq!(t(3)["state"], "done");
    let text = stdout(&repo.plait(&["status", &run]));
    assert!(text.contains("blocked, never started"), "{text}");
    assert!(text.contains("a, b"), "{text}");
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert_ne!(out.status.code(), Some(0));
    let out = repo.plait(&["land", &run, "--into", "main", "--partial"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let main = repo.tree_files("main");
    assert_eq!(main["docs/x.md"], "x\n2\n");
    assert_eq!(main["src/a.rs"], "a\n");
}

#[test]
fn sending_a_task_back_runs_the_tasks_after_it_again_from_its_new_work() {
    let repo = TestRepo::with_files(&[("src/core.rs", "c\n"), ("src/a.rs", "a\n")]);
    // core writes its round into its file; a copies core's file into its own, so its work
    // shows which of core's it started from; it also says what it heard.
    let plan = repo.plan(
        &Plan::new()
            .task("core")
            .owns(["/src/core.rs"])
            .exec("echo round $PLAIT_ROUND > src/core.rs")
            .task("a")
            .owns(["/src/a.rs"])
            .after(["core"])
            .exec("cp src/core.rs src/a.rs; printf '%s' \"$PLAIT_FEEDBACK\" > \"$PLAIT_SCRATCH/heard\"")
            .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let before = repo.status_json(&[]);
    let run = before["id"].as_str().unwrap().to_string();
    assert_eq!(
        repo.tree_files(&format!("plait/{run}/merged"))["src/a.rs"],
        "round 0\n"
    );
    let out = repo.plait(&["send-back", &run, "core", "--comment", "once more"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let after = repo.status_json(&[&run]);
    let (core, a) = (&after["tasks"][0], &after["tasks"][1]);
    assert_ne!(core["commit"], before["tasks"][0]["commit"]);
    assert_eq!(a["start_from"]["core"], core["commit"], "{a:#}");
    assert_eq!(a["state"], "done");
    assert_eq!(a["rounds"], 1, "one more round from the new start");
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/core.rs"], "round 1\n");
    assert_eq!(
        merged["src/a.rs"], "round 1\n",
        "a ran again on core's new work"
    );
    let scratch = std::path::Path::new(a["log"].as_str().unwrap())
        .parent()
        .unwrap()
        .join("scratch/heard");
    let heard = fs::read_to_string(&scratch).unwrap();
    assert!(heard.contains("changed since it started: core"), "{heard}");
}

#[test]
fn a_run_killed_in_its_second_wave_is_finished_by_resume() {
    let repo = TestRepo::with_files(&[
        ("src/core.rs", "c\n"),
        ("src/a.rs", "a\n"),
        ("src/b.rs", "b\n"),
        ("src/z.rs", "z\n"),
    ]);
    let marks = tempfile::tempdir().unwrap();
    let go = marks.path().join("go");
    let wait = format!(
        "if [ -e {go} ]; then cat src/core.rs >> src/$PLAIT_TASK.rs; else sleep 120; fi",
        go = go.display()
    );
    let plan = repo.plan(
        &Plan::new()
            .task("core")
            .owns(["/src/core.rs"])
            .exec("echo new > src/core.rs")
            .task("a")
            .owns(["/src/a.rs"])
            .after(["core"])
            .exec(&wait)
            .task("b")
            .owns(["/src/b.rs"])
            .after(["core"])
            .exec(&wait)
            .task("z")
            .owns(["/src/z.rs"])
            .after(["a", "b"])
            .exec("cat src/a.rs src/b.rs > src/z.rs")
            .to_toml(),
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan.to_str().unwrap(), "-j", "4"])
        .current_dir(&repo.path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut run = String::new();
    wait_until("the second wave runs", || {
        let out = repo.plait(&["status", "--json"]);
        let Ok(status) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
            return false;
        };
        run = status["id"].as_str().unwrap_or_default().to_string();
        let state = |i: usize| status["tasks"][i]["state"].clone();
        state(1) == "running" && state(2) == "running" && state(3) == "pending"
    });
    child.kill().unwrap();
    let _ = child.wait();
    fs::write(&go, "").unwrap();
    let out = repo.plait(&["resume", &run]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[&run]);
    for t in status["tasks"].as_array().unwrap() {
        assert_eq!(t["state"], "done", "{t:#}");
    }
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a.rs"], "a\nnew\n");
    assert_eq!(
        merged["src/z.rs"], "a\nnew\nb\nnew\n",
        "z started from a and b"
    );
}

#[test]
fn a_culprit_sent_back_by_the_merged_checks_runs_the_tasks_after_it_again() {
    let repo = culprit_waves_repo();
    let plan = repo.plan(&culprit_waves());
    let out = repo.plait(&["run", plan.to_str().unwrap(), "-j", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    assert_eq!(
        status["culprits"]["reworked"],
        serde_json::json!(["core"]),
        "{status:#}"
    );
    assert_eq!(status["merged_checks"][0]["passed"], true, "{status:#}");
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a.txt"], "fixed\n");
    assert_eq!(merged["src/z.txt"], "fixed\nfixed\n");
    for t in status["tasks"].as_array().unwrap() {
        assert_eq!(t["state"], "done", "{t:#}");
        assert_eq!(t["rounds"], 1, "each ran once more: {t:#}");
    }
}

/// A 1 → `n` → 1 plan over `pkg/`: `core`, then `m00`.. each copying core's file into its
/// own, then `last` gathering them; grouped in two.
fn fan(n: usize) -> (TestRepo, Plan) {
    let mut files = vec![
        ("pkg/core.txt".to_string(), "core\n".to_string()),
        ("pkg/zz/last.txt".to_string(), "last\n".to_string()),
    ];
    let mut plan = Plan::new()
        .goal("fan")
        .set("groups", "count", 2)
        .task("core")
        .owns(["/pkg/core.txt"])
        .exec("echo new > pkg/core.txt");
    for k in 0..n {
        files.push((format!("pkg/m{k:02}/f.txt"), format!("{k}\n")));
        plan = plan
            .task(&format!("m{k:02}"))
            .owns([format!("/pkg/m{k:02}/**")])
            .after(["core"])
            .exec(&format!("cat pkg/core.txt >> pkg/m{k:02}/f.txt"));
    }
    let plan = plan
        .task("last")
        .owns(["/pkg/zz/**"])
        .after(["m*"])
        .exec("$PLAIT_RUN_IN sh -c 'cat pkg/m*/f.txt > pkg/zz/last.txt'");
    (TestRepo::with_owned_files(&files), plan)
}

#[test]
fn a_grouped_run_in_waves_merges_each_task_on_what_it_started_from() {
    // 16 tasks: two groups, and the tasks of each come after tasks of the other.
    let (repo, plan) = fan(14);
    let state = repo.run(&plan.to_toml(), 2);
    assert_eq!(state.groups.len(), 2);
    for t in &state.tasks {
        assert_eq!(t.state, plait_core::state::TaskState::Done, "{t:?}");
    }
    let merge = state.merge.as_ref().unwrap();
    assert_eq!(merge.included.len(), 16, "{merge:?}");
    assert!(
        merge.waiting.is_empty() && merge.conflicts.is_empty(),
        "{merge:?}"
    );
    let files = repo.tree_files(&merge.branch);
    assert_eq!(files["pkg/m03/f.txt"], "3\nnew\n");
    let last: String = (0..14).map(|k| format!("{k}\nnew\n")).collect();
    assert_eq!(files["pkg/zz/last.txt"], last);
    // Each group's merge tells of its own tasks; one whose tasks start from the other's
    // shows its diff from there.
    for g in &state.groups {
        let m = g.merge.as_ref().unwrap();
        assert!(m.included.iter().all(|t| g.tasks.contains(t)), "{g:?}");
    }
    assert!(state.groups.iter().any(|g| g.from.is_some()));
}

#[test]
fn a_group_held_by_its_supervisor_holds_out_the_tasks_after_its_tasks() {
    // The supervisor rejects the group that holds core: every task after it stays out.
    let (repo, plan) = fan(14);
    let plan = plan
        .set(
            "groups.review",
            "exec",
            "if git diff --name-only $PLAIT_BASE $PLAIT_COMMIT | grep -q core.txt; then exit 2; fi",
        )
        .set("groups", "rounds", 0);
    let state = repo.run(&plan.to_toml(), 2);
    let merge = state.merge.as_ref().unwrap();
    let held = state
        .groups
        .iter()
        .find(|g| g.tasks.iter().any(|t| t == "core"))
        .unwrap();
    assert!(!held.merged_up, "{held:?}");
    assert!(
        merge.included.iter().all(|t| !held.tasks.contains(t)),
        "{merge:?}"
    );
    assert!(merge.waiting.contains(&"last".to_string()), "{merge:?}");
    let text = stdout(&repo.plait(&["status", &state.id]));
    assert!(
        text.contains("left out of the merge: core not in it"),
        "{text}"
    );
}

#[test]
fn a_split_plan_with_a_first_and_a_last_task_runs_in_three_waves() {
    // log → tracing: the dependency is added first, the modules move, log goes last.
    let repo = TestRepo::with_files(&[
        ("Cargo.toml", "[dependencies]\nlog = \"0.4\"\n"),
        ("src/db/mod.rs", "use log::info;\n"),
        ("src/net/mod.rs", "use log::info;\n"),
    ]);
    let out_path = repo.scratch.join("plan.toml");
    let out = repo.plait(&[
        "plan",
        "--split",
        "dir:src/*",
        "--prompt",
        "Move {path} from log to tracing",
        // Each module checks that tracing is there before it moves.
        "--exec",
        "grep -q tracing Cargo.toml && sed -i s/log::/tracing::/ src/*/mod.rs",
        "--first",
        "/Cargo.toml",
        "--first-prompt",
        "Add tracing",
        "--last",
        "/Cargo.toml",
        "--last-prompt",
        "Remove log",
        "-o",
        out_path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = fs::read_to_string(&out_path).unwrap();
    let plan = plait_plan::parse(&text, &out_path).unwrap();
    let ids: Vec<&str> = plan.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["first", "src-db", "src-net", "last"], "{text}");
    assert_eq!(plan.defaults.after, Some(vec!["first".to_string()]));
    assert_eq!(plan.tasks[3].after, Some(vec!["*".to_string()]));
    // The first and last tasks get agents of their own here.
    let text = text
        .replace(
            "prompt = \"Add tracing\"",
            "prompt = \"Add tracing\"\nagent = { exec = \"echo 'tracing = \\\"0.1\\\"' >> Cargo.toml\" }",
        )
        .replace(
            "prompt = \"Remove log\"",
            "prompt = \"Remove log\"\nagent = { exec = \"sed -i /^log/d Cargo.toml\" }",
        );
    let plan = repo.plan(&text);
    let out = repo.plait(&["run", plan.to_str().unwrap(), "-j", "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["Cargo.toml"], "[dependencies]\ntracing = \"0.1\"\n");
    assert_eq!(merged["src/db/mod.rs"], "use tracing::info;\n");
    assert_eq!(merged["src/net/mod.rs"], "use tracing::info;\n");
}

#[test]
fn a_blocked_task_sent_back_starts_once_a_person_accepted_what_it_comes_after() {
    let repo = TestRepo::with_files(&[("src/core.txt", "c\n"), ("src/a.txt", "a\n")]);
    // Only core is reviewed, and its reviewer never approves.
    let plan = repo.plan(
        &Plan::new()
            .set("review", "rounds", 0)
            .set(
                "review.agent",
                "exec",
                "if [ $PLAIT_TASK = core ]; then echo no; exit 1; fi",
            )
            .task("core")
            .owns(["/src/core.txt"])
            .exec("echo new > src/core.txt")
            .task("a")
            .owns(["/src/a.txt"])
            .after(["core"])
            .exec("cat src/core.txt >> src/a.txt")
            .to_toml(),
    );
    let _ = repo.plait(&["run", plan.to_str().unwrap()]);
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    assert_eq!(status["tasks"][1]["state"], "blocked", "{status:#}");
    let why = status["tasks"][1]["error"].as_str().unwrap();
    assert!(why.contains("core was not approved"), "{why}");
    let out = repo.plait(&["accept", &run, "core"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = repo.plait(&["send-back", &run, "a", "--comment", "start now"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[&run]);
    assert_eq!(status["tasks"][1]["state"], "done", "{status:#}");
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/a.txt"], "a\nnew\n");
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn the_page_shows_what_a_task_comes_after_what_blocks_it_and_its_own_diff() {
    let repo = TestRepo::with_files(&[
        ("src/core.txt", "c\n"),
        ("src/a.txt", "a\n"),
        ("src/bad.txt", "b\n"),
        ("src/late.txt", "l\n"),
    ]);
    let plan = repo.plan(
        &Plan::new()
            .task("core")
            .owns(["/src/core.txt"])
            .exec("echo new > src/core.txt")
            .task("a")
            .owns(["/src/a.txt"])
            .after(["core"])
            .exec("echo 2 >> src/a.txt")
            .task("bad")
            .owns(["/src/bad.txt"])
            .exec("exit 1")
            .task("late")
            .owns(["/src/late.txt"])
            .after(["bad"])
            .exec("true")
            .to_toml(),
    );
    let _ = repo.plait(&["run", plan.to_str().unwrap()]);
    let run = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    let served = crate::support::serve::Served::start(&repo, &[]);
    let summary = served.get(&format!("/api/runs/{run}/summary"));
    let row = |id: &str| crate::support::task_json(&summary, id);
    assert_eq!(
        row("a")["after"],
        serde_json::json!(["core"]),
        "{summary:#}"
    );
    assert_eq!(row("late")["state"], "blocked");
    assert_eq!(row("late")["blocked_by"], serde_json::json!(["bad"]));
    assert_eq!(row("late")["attention"], true);
    let diff = served.get(&format!("/api/runs/{run}/tasks/a/diff"));
    let files: Vec<&str> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["src/a.txt"], "its own work: {diff:#}");
    assert_eq!(row("a")["wave"], 1, "{summary:#}");
    assert!(row("core").get("wave").is_none(), "wave 0 is left out");
    // The run page in Chromium: the rows under a head per wave, in the order the work
    // flows, with what each comes after and what blocks it.
    let Some(browser) = crate::support::browser::Browser::find() else {
        return;
    };
    let url = format!("http://{}/", served.addr);
    let out = browser.run(
        serde_json::json!({"timeout_ms": 20000, "steps": [
            {"goto": format!("{url}#/runs/{run}")},
            crate::support::browser::ready(),
            {"wait": "#tasks [data-task='late']"},
            {"eval": "[...document.querySelectorAll('#tasks tr.wave-head, #tasks tr.task-row')].map((r) => r.dataset.task || `wave ${r.dataset.wave}`)"},
            {"text": "#tasks tr.wave-head[data-wave='1']"},
            {"text": "#tasks [data-task='a']"},
            {"text": "#tasks [data-task='late']"},
        ]}),
        &repo.scratch,
    );
    assert_eq!(
        out[3]["eval"],
        serde_json::json!(["wave 0", "core", "bad", "wave 1", "a", "late"]),
        "{out:?}"
    );
    let head = out[4]["text"].as_str().unwrap();
    assert!(
        head.contains("wave 2") && head.contains("2 tasks"),
        "{head}"
    );
    assert!(
        out[5]["text"].as_str().unwrap().contains("after core"),
        "{out:?}"
    );
    assert!(
        out[6]["text"].as_str().unwrap().contains("blocked by bad"),
        "{out:?}"
    );
}

/// core, then a and b from it, then z from both: a breaks the merged checks. The search
/// blames a, not core whose holding out would have held a out with it, and the merge keeps
/// core and b and leaves z out with a.
#[test]
fn the_culprit_search_blames_the_later_task_not_what_it_started_from() {
    let repo = culprit_waves_repo();
    let plan = repo.plan(
        &Plan::new()
            .goal("waves")
            .set(
                "checks",
                "merged",
                ["! grep -q broken src/a.txt src/b.txt src/z.txt src/core.txt"],
            )
            .task("core")
            .owns(["/src/core.txt"])
            .exec("echo new > src/core.txt")
            .task("a")
            .owns(["/src/a.txt"])
            .after(["core"])
            .exec("echo broken > src/a.txt")
            .task("b")
            .owns(["/src/b.txt"])
            .after(["core"])
            .exec("cp src/core.txt src/b.txt")
            .task("z")
            .owns(["/src/z.txt"])
            .after(["a", "b"])
            .exec("cat src/core.txt src/b.txt > src/z.txt")
            .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap(), "-j", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    let sets = status["culprits"]["sets"].as_array().unwrap();
    assert_eq!(sets.len(), 1, "{status:#}");
    assert_eq!(sets[0]["tasks"], serde_json::json!(["a"]), "{status:#}");
    assert!(
        sets[0]["partners"].as_array().is_none_or(Vec::is_empty),
        "{status:#}"
    );
    assert_eq!(status["merged_checks"][0]["passed"], true, "{status:#}");
    let mut included: Vec<&str> = status["merge"]["included"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    included.sort_unstable();
    assert_eq!(included, ["b", "core"], "{status:#}");
    assert_eq!(
        status["merge"]["waiting"],
        serde_json::json!(["z"]),
        "{status:#}"
    );
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["src/core.txt"], "new\n");
    assert_eq!(merged["src/b.txt"], "new\n");
    assert_eq!(merged["src/a.txt"], "a\n");
}

/// A hand fix on a task's branch after the run: `plait land` takes it in, and the task
/// that started from the old work is held out, the gate naming the move and the way on;
/// `plait send-back` of that task runs it again from the fixed work, told the comment, and
/// the whole lands.
#[test]
fn a_hand_fix_under_a_later_task_is_named_and_sent_back_from() {
    let repo = TestRepo::with_files(&[("src/core.rs", "c\n"), ("src/a.rs", "a\n")]);
    let plan = repo.plan(
        &Plan::new()
            .task("core")
            .owns(["/src/core.rs"])
            .exec("echo new > src/core.rs")
            .task("a")
            .owns(["/src/a.rs"])
            .after(["core"])
            .exec("cp src/core.rs src/a.rs; printf '%s' \"$PLAIT_FEEDBACK\" > \"$PLAIT_SCRATCH/heard\"")
            .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    let core_tree = std::path::PathBuf::from(status["tasks"][0]["worktree"].as_str().unwrap());
    fs::write(core_tree.join("src/core.rs"), "fixed by hand\n").unwrap();
    crate::support::git_in(
        &core_tree,
        &[
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@e",
            "commit",
            "-qam",
            "hand fix",
        ],
    );
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("a (core moved since it started from it)"),
        "{err}"
    );
    assert!(
        err.contains(&format!("plait send-back {run} a -m TEXT")),
        "{err}"
    );
    let table = stdout(&repo.plait(&["status", &run]));
    assert!(
        table.contains("left out of the merge: core moved since it started from it"),
        "{table}"
    );
    let out = repo.plait(&["send-back", &run, "a", "-m", "core was fixed by hand"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let after = repo.status_json(&[&run]);
    let a = &after["tasks"][1];
    assert_eq!(a["state"], "done", "{a:#}");
    assert_eq!(
        a["start_from"]["core"], after["tasks"][0]["commit"],
        "{a:#}"
    );
    let heard = fs::read_to_string(
        std::path::Path::new(a["log"].as_str().unwrap())
            .parent()
            .unwrap()
            .join("scratch/heard"),
    )
    .unwrap();
    assert!(heard.contains("changed since it started: core"), "{heard}");
    assert!(heard.contains("core was fixed by hand"), "{heard}");
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let main = repo.tree_files("main");
    assert_eq!(main["src/core.rs"], "fixed by hand\n");
    assert_eq!(main["src/a.rs"], "fixed by hand\n");
}
