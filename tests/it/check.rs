//! `plait check` and the git hooks that run it.

use crate::support::{git_in, stderr, stdout, Plan, TestRepo};

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("x/a.txt", "a\n"),
        ("x/b.txt", "b\n"),
        ("shared/a-1", "1\n"),
        ("shared/2-b", "2\n"),
        ("notes.md", "n\n"),
    ])
}

/// Runs a plan through the binary; returns the run id.
fn run(repo: &TestRepo, toml: &str) -> String {
    let plan = repo.plan(toml);
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        stderr(&out)
    );
    stdout(&out).trim().to_string()
}

/// Tasks `a` and `b` append `2` to their files; the merged check wants a `2`.
fn clean_plan() -> Plan {
    Plan::new()
        .exec_all("echo 2 >> x/$PLAIT_TASK.txt")
        .set("checks", "merged", ["grep -q 2 x/a.txt"])
        .task("a")
        .owns(["/x/a.txt"])
        .task("b")
        .owns(["/x/b.txt"])
}

/// Both tasks add shared/a-b, which both own, with different content.
fn conflicting_plan() -> String {
    Plan::new()
        .exec_all("echo $PLAIT_TASK > shared/a-b; echo 3 >> x/$PLAIT_TASK.txt")
        .task("a")
        .owns(["/x/a.txt", "/shared/a-*"])
        .task("b")
        .owns(["/x/b.txt", "/shared/*-b"])
        .to_toml()
}

#[test]
fn check_exit_codes_say_pass_fail_and_usage() {
    let repo = sample();
    let clean = run(&repo, &clean_plan().to_toml());
    let out = repo.plait(&["check", &clean]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains(&format!("run {clean} into main: PASS")),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("merged check `grep -q 2 x/a.txt`: passed"));

    let conflicting = run(&repo, &conflicting_plan());
    let out = repo.plait(&["check", &conflicting, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["pass"], false);
    assert!(
        report["gate"].to_string().contains("1 conflict(s)"),
        "{report}"
    );

    let out = repo.plait(&["check", "nosuchrun"]);
    assert_eq!(out.status.code(), Some(2));
    let out = repo.plait(&["check", &clean, "--into", "nosuchbranch"]);
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn check_catches_a_target_that_moved_into_conflict_and_hand_edits_outside_ownership() {
    let repo = sample();
    let clean = run(&repo, &clean_plan().to_toml());
    repo.write("x/a.txt", "a\nmine\n");
    repo.commit_all("main moves on");
    let out = repo.plait(&["check", &clean]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("conflicts with main (content): x/a.txt"),
        "{}",
        stdout(&out)
    );

    // Someone commits to a task branch by hand, outside the task's files.
    let repo = sample();
    let clean = run(&repo, &clean_plan().to_toml());
    let branch = format!("plait/{clean}/a");
    let index = repo.scratch.join("hand-index");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo.path)
            .env("GIT_INDEX_FILE", &index)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    std::fs::write(repo.scratch.join("sneaky"), "sneaky\n").unwrap();
    let blob = git(&[
        "hash-object",
        "-w",
        repo.scratch.join("sneaky").to_str().unwrap(),
    ]);
    git(&["read-tree", &branch]);
    git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("100644,{blob},notes.md"),
    ]);
    let tree = git(&["write-tree"]);
    let commit = git(&["commit-tree", &tree, "-p", &branch, "-m", "by hand"]);
    git(&["update-ref", &format!("refs/heads/{branch}"), &commit]);
    let out = repo.plait(&["check", &clean]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("changes a file it does not own: a: notes.md"),
        "{text}"
    );
    assert!(
        text.contains(&format!("branch plait/{clean}/a moved since the run")),
        "{text}"
    );
}

#[test]
fn the_hook_blocks_a_merge_of_a_failing_run_lets_a_clean_one_through_and_chains() {
    let repo = sample();
    let hooks = repo.path.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let marker = repo.scratch.join("own-hook-ran");
    std::fs::write(
        hooks.join("pre-merge-commit"),
        format!("#!/bin/sh\necho ran >> {}\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        hooks.join("pre-merge-commit"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = repo.plait(&["hook", "install"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(hooks.join("pre-merge-commit.plait-chained").exists());

    let clean = run(&repo, &clean_plan().to_toml());
    // Task a writes 3, not the 2 the merged check wants.
    let failing = run(
        &repo,
        &clean_plan()
            .exec_all("echo 3 >> x/$PLAIT_TASK.txt")
            .to_toml(),
    );
    // main moves on, so merges make merge commits and the hook runs.
    repo.write("notes.md", "n2\n");
    repo.commit_all("main moves on");

    let out = std::process::Command::new("git")
        .args(["merge", "--no-edit", &format!("plait/{failing}/a")])
        .current_dir(&repo.path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the hook let a failing run through");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("FAIL"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    repo.git(&["merge", "--abort"]);
    assert_eq!(repo.read("x/a.txt"), "a\n");

    git_in(
        &repo.path,
        &["merge", "--no-edit", &format!("plait/{clean}/merged")],
    );
    assert_eq!(repo.read("x/a.txt"), "a\n2\n");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().lines().count(),
        2,
        "the user's own hook ran first, both times"
    );

    let out = repo.plait(&["hook", "uninstall"]);
    assert!(out.status.success());
    let restored = std::fs::read_to_string(hooks.join("pre-merge-commit")).unwrap();
    assert!(restored.contains("own-hook-ran"), "{restored}");
    assert!(!hooks.join("pre-push").exists());
}

#[test]
fn check_takes_branches_and_a_plan_without_a_run() {
    let repo = sample();
    let plan = repo.plan(
        &Plan::new()
            .exec_all("true")
            .set("checks", "merged", ["test -f x/a.txt"])
            .task("a")
            .owns(["/x/a.txt", "/shared/a-*"])
            .task("b")
            .owns(["/x/b.txt", "/shared/*-b"])
            .to_toml(),
    );
    let branch = |name: &str, files: &[(&str, &str)]| {
        repo.git(&["checkout", "-q", "-b", name, "main"]);
        for (path, content) in files {
            repo.write(path, content);
        }
        repo.commit_all(name);
        repo.git(&["checkout", "-q", "main"]);
    };
    branch("feature/a", &[("x/a.txt", "a2\n")]);
    branch("feature/b", &[("x/b.txt", "b2\n")]);
    branch(
        "feature/sneaky",
        &[("x/b.txt", "b3\n"), ("notes.md", "mine\n")],
    );
    branch("feature/a-new", &[("shared/a-b", "A\n")]);
    branch("feature/b-new", &[("shared/a-b", "B\n")]);
    let plan = plan.to_str().unwrap();
    let check = |branches: &[&str]| {
        let mut args = vec!["check", "--plan", plan, "--json"];
        for b in branches {
            args.extend(["--branch", b]);
        }
        repo.plait(&args)
    };

    let out = check(&["feature/a", "feature/b"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["checks"][0]["passed"], true, "{report}");

    let out = check(&["a=feature/a", "b=feature/sneaky"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ownership"], serde_json::json!(["b: notes.md"]));

    let out = check(&["a=feature/a-new", "b=feature/b-new"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["conflicts"][0]["kind"], "add/add", "{report}");
    assert_eq!(
        repo.branches()
            .iter()
            .filter(|b| b.contains("check-"))
            .count(),
        0,
        "no scratch branch is left"
    );

    let out = check(&["nosuchtask=feature/a"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("has no task `nosuchtask`"));
}

/// A module and its tests (two of them placeholders that pass).
fn tested() -> TestRepo {
    TestRepo::with_files(&[
        ("src/lib.sh", "one() { echo 1; }\n"),
        ("tests/one.sh", ". ./src/lib.sh\n[ \"$(one)\" = 1 ]\n"),
        ("tests/two.sh", "true\n"),
        ("tests/bad.sh", "true\n"),
        ("notes.md", "n\n"),
    ])
}

/// Task `fn` adds a function, `test` a test that calls it, `bad` a test that fails; the
/// merged check runs every test.
fn tested_plan() -> String {
    Plan::new()
        .set(
            "checks",
            "merged",
            ["for t in tests/*.sh; do sh $t || exit 1; done"],
        )
        .task("fn")
        .owns(["/src/"])
        .exec("echo \"two() { echo 2; }\" >> src/lib.sh")
        .task("test")
        .owns(["/tests/two.sh"])
        .exec("printf \". ./src/lib.sh\\n[ \\\"\\$(two)\\\" = 2 ]\\n\" > tests/two.sh")
        .task("bad")
        .owns(["/tests/bad.sh"])
        .exec("echo false > tests/bad.sh")
        .to_toml()
}

#[test]
fn the_hook_judges_exactly_the_merge_being_made() {
    let repo = tested();
    let out = repo.plait(&["hook", "install"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = run(&repo, &tested_plan());
    // The run as a whole fails its merged checks: the culprit search holds `bad` out.
    let status = repo.plait(&["status", &id, "--json"]);
    let state: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        state["culprits"]["sets"][0]["tasks"],
        serde_json::json!(["bad"]),
        "{state}"
    );
    repo.write("notes.md", "n2\n");
    repo.commit_all("main moves on");
    let merge = |branch: &str| {
        std::process::Command::new("git")
            .args(["merge", "--no-edit", branch])
            .current_dir(&repo.path)
            .output()
            .unwrap()
    };

    // The test alone, without the function it calls: the tree being merged fails.
    let out = merge(&format!("plait/{id}/test"));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "the hook let the test through alone: {said}"
    );
    assert!(said.contains("FAIL"), "{said}");
    assert!(said.contains("this merge includes: test"), "{said}");
    assert!(said.contains("it leaves out: fn, bad"), "{said}");
    repo.git(&["merge", "--abort"]);
    assert_eq!(repo.read("tests/two.sh"), "true\n");

    // The function alone is green, though another branch of the run breaks the whole.
    let out = merge(&format!("plait/{id}/fn"));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "the hook refused a green merge: {said}"
    );
    assert!(
        said.contains("PASS") && said.contains("this merge includes: fn"),
        "{said}"
    );
    assert!(repo.read("src/lib.sh").contains("two()"));

    // Now the test goes through: the function is on main.
    let out = merge(&format!("plait/{id}/test"));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{said}");
    assert!(said.contains("this merge includes: fn, test"), "{said}");

    // The breaking task is refused, and named.
    let out = merge(&format!("plait/{id}/bad"));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("this merge includes: fn, test, bad"),
        "{said}"
    );
    assert!(said.contains("| "), "the failing output is shown: {said}");
}

#[test]
fn a_fast_forward_onto_a_plait_branch_is_judged_too() {
    let repo = tested();
    let out = repo.plait(&["hook", "install"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(repo.path.join(".git/hooks/reference-transaction").exists());
    let id = run(&repo, &tested_plan());
    // main has not moved: merging a task branch is a fast-forward, with no merge commit.
    let merge = |branch: &str| {
        std::process::Command::new("git")
            .args(["merge", "--no-edit", branch])
            .current_dir(&repo.path)
            .output()
            .unwrap()
    };
    let before = repo.git(&["rev-parse", "main"]);
    // An unrelated change of the user's, not committed, must survive the refusal.
    repo.write("notes.md", "mine\n");
    let out = merge(&format!("plait/{id}/test"));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "the fast-forward went through: {said}"
    );
    assert!(said.contains("this merge includes: test"), "{said}");
    assert_eq!(
        repo.git(&["rev-parse", "main"]),
        before,
        "main did not move"
    );
    assert_eq!(
        repo.read("tests/two.sh"),
        "true\n",
        "the checkout did not change"
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), "M notes.md");
    assert_eq!(repo.read("notes.md"), "mine\n");
    repo.git(&["checkout", "--", "notes.md"]);

    let out = merge(&format!("plait/{id}/fn"));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{said}");
    assert!(repo.read("src/lib.sh").contains("two()"));
    // Ordinary commits are not in the way.
    repo.write("notes.md", "n2\n");
    repo.commit_all("main moves on");
    let out = repo.plait(&["hook", "uninstall"]);
    assert!(out.status.success());
    assert!(!repo.path.join(".git/hooks/reference-transaction").exists());
}

#[test]
fn a_damaged_run_record_stops_the_merge_it_cannot_judge() {
    let repo = sample();
    let out = repo.plait(&["hook", "install"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = run(&repo, &clean_plan().to_toml());
    std::fs::write(
        repo.path.join(format!(".git/plait/runs/{id}/state.json")),
        "{broken",
    )
    .unwrap();
    repo.write("notes.md", "n2\n");
    repo.commit_all("main moves on");
    let out = std::process::Command::new("git")
        .args(["merge", "--no-edit", &format!("plait/{id}/a")])
        .current_dir(&repo.path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "a merge went through unjudged: {said}"
    );
    assert!(said.contains("is damaged"), "{said}");
}

/// A repository with the hooks installed, a finished run of [`tested_plan`], and a commit of
/// main's own after the run's base (so that nothing below is a plain fast-forward); the
/// run's id and main's tip.
fn tested_run_with_hooks() -> (TestRepo, String, String) {
    let repo = tested();
    let out = repo.plait(&["hook", "install"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = run(&repo, &tested_plan());
    repo.write("notes.md", "n2\n");
    let main = repo.commit_all("main moves on");
    (repo, id, main)
}

/// Runs git in the repository and returns its output, whether it succeeded or not.
fn try_git(repo: &TestRepo, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(args)
        .current_dir(&repo.path)
        .output()
        .unwrap()
}

/// Asserts that `out` (of the command that made the commit) was refused for bringing in
/// task `task` of the run, and that main is still at `main`; returns what git said.
fn assert_refused(repo: &TestRepo, out: &std::process::Output, task: &str, main: &str) -> String {
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "the hook let {task} through: {said}");
    assert!(said.contains("FAIL"), "{said}");
    assert!(
        said.contains(&format!("this merge includes: {task}")),
        "{said}"
    );
    assert!(said.contains("main stays at"), "{said}");
    assert!(said.contains("core.hooksPath=/dev/null"), "{said}");
    assert_eq!(repo.git(&["rev-parse", "main"]), main, "main moved: {said}");
    said
}

/// Asserts that `out` went through after the hook judged task `task` green.
fn assert_let_through(out: &std::process::Output, task: &str) {
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "the hook refused {task}: {said}");
    assert!(
        said.contains("PASS") && said.contains(&format!("this merge includes: {task}")),
        "{said}"
    );
}

#[test]
fn a_squash_merge_and_a_cherry_pick_of_a_red_task_are_judged_by_content() {
    let (repo, id, main) = tested_run_with_hooks();
    let branch = |task: &str| format!("plait/{id}/{task}");

    // A squash merge makes no merge commit; the commit after it is judged.
    repo.git(&["merge", "-q", "--squash", &branch("test")]);
    let out = try_git(&repo, &["commit", "-q", "-m", "squashed"]);
    let said = assert_refused(&repo, &out, "test", &main);
    assert!(said.contains("it leaves out: fn, bad"), "{said}");
    assert!(said.contains("git reset --merge"), "{said}");
    repo.git(&["reset", "-q", "--hard"]);
    repo.git(&["merge", "-q", "--squash", &branch("fn")]);
    assert_let_through(&try_git(&repo, &["commit", "-q", "-m", "squashed"]), "fn");
    assert!(repo.read("src/lib.sh").contains("two()"));
    repo.git(&["reset", "-q", "--hard", &main]);

    let out = try_git(&repo, &["cherry-pick", &branch("test")]);
    let said = assert_refused(&repo, &out, "test", &main);
    assert!(said.contains("git cherry-pick --abort"), "{said}");
    repo.git(&["cherry-pick", "--abort"]);
    assert_eq!(repo.read("tests/two.sh"), "true\n");
    assert_let_through(&try_git(&repo, &["cherry-pick", &branch("fn")]), "fn");
    assert!(repo.read("src/lib.sh").contains("two()"));

    // --no-verify skips pre-merge-commit, not the judgement of the merge commit.
    let main = repo.git(&["rev-parse", "main"]);
    let out = try_git(
        &repo,
        &["merge", "--no-verify", "--no-edit", &branch("bad")],
    );
    let said = assert_refused(&repo, &out, "bad", &main);
    assert!(said.contains("git merge --abort"), "{said}");
    repo.git(&["merge", "--abort"]);
    assert_eq!(repo.read("tests/bad.sh"), "true\n");

    // A real merge is judged once, by pre-merge-commit, not again when its commit lands.
    let out = try_git(&repo, &["merge", "--no-edit", &branch("test")]);
    assert_let_through(&out, "test");
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(said.matches("plait check: run").count(), 1, "{said}");
}

#[test]
fn a_rebase_and_a_reset_onto_a_red_task_are_refused_and_the_checkout_kept() {
    let (repo, id, main) = tested_run_with_hooks();
    let branch = |task: &str| format!("plait/{id}/{task}");

    // main's own commit, replayed onto the task's branch.
    let out = try_git(&repo, &["rebase", &branch("test")]);
    let said = assert_refused(&repo, &out, "test", &main);
    assert!(said.contains("git rebase --abort"), "{said}");
    repo.git(&["rebase", "--abort"]);
    assert_eq!(repo.git(&["rev-parse", "--abbrev-ref", "HEAD"]), "main");
    assert_eq!(repo.read("tests/two.sh"), "true\n");
    assert_let_through(&try_git(&repo, &["rebase", &branch("fn")]), "fn");
    assert!(repo.read("src/lib.sh").contains("two()"));
    repo.git(&["reset", "-q", "--hard", &main]);

    // git moves the checkout before the branch; the refusal puts it back.
    let out = try_git(&repo, &["reset", "--hard", &branch("test")]);
    let said = assert_refused(&repo, &out, "test", &main);
    assert!(said.contains("checkout was put back"), "{said}");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(repo.read("tests/two.sh"), "true\n");
    assert_eq!(repo.read("notes.md"), "n2\n");
    assert_let_through(&try_git(&repo, &["reset", "--hard", &branch("fn")]), "fn");
    assert!(repo.read("src/lib.sh").contains("two()"));
}

#[test]
fn part_of_a_red_tasks_files_is_refused_and_unrelated_commits_pass_quietly() {
    let repo = tested();
    let out = repo.plait(&["hook", "install"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // One task changes two files; the failing test is one of them.
    let id = run(
        &repo,
        "[checks]\nmerged = ['for t in tests/*.sh; do sh $t || exit 1; done']\n\
         [[task]]\nid = \"pair\"\nprompt = \"p\"\nowns = [\"/tests/\"]\n\
         agent = { exec = 'echo false > tests/bad.sh; echo true > tests/three.sh' }\n",
    );
    let main = repo.git(&["rev-parse", "main"]);

    repo.write("notes.md", "mine\n");
    let out = try_git(&repo, &["commit", "-q", "-am", "unrelated"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "",
        "plait said something about an unrelated commit"
    );
    assert!(
        repo.path.join(".git/plait/task-work").exists(),
        "the hook looked the commit up"
    );
    let main_after = repo.git(&["rev-parse", "main"]);
    assert_ne!(main_after, main);

    repo.git(&[
        "checkout",
        &format!("plait/{id}/pair"),
        "--",
        "tests/bad.sh",
    ]);
    let out = try_git(&repo, &["commit", "-q", "-m", "just the one file"]);
    assert_refused(&repo, &out, "pair", &main_after);
    // The commit's changes stay staged, as a refused commit leaves them.
    assert_eq!(repo.git(&["status", "--porcelain"]), "M  tests/bad.sh");
    repo.git(&["reset", "-q", "--hard"]);

    // The other file alone is green, and brings the task in all the same.
    repo.git(&[
        "checkout",
        &format!("plait/{id}/pair"),
        "--",
        "tests/three.sh",
    ]);
    assert_let_through(
        &try_git(&repo, &["commit", "-q", "-m", "the other"]),
        "pair",
    );
}

#[test]
fn the_index_of_task_work_follows_the_records_and_the_branches() {
    use plait::check::work::WorkIndex;
    let repo = tested();
    let id = run(&repo, &tested_plan());
    let git_repo = repo.repo();
    let store = plait_core::state::Store::new(plait_core::git::plait_dir(&git_repo));
    let tip = |branch: &str| git2::Oid::from_str(&repo.git(&["rev-parse", branch])).unwrap();
    let changes_to = |rev: &str| {
        let from = git_repo.revparse_single("main^{tree}").unwrap();
        let to = git_repo
            .revparse_single(&format!("{rev}^{{tree}}"))
            .unwrap();
        plait_core::git::tree_changes(&git_repo, from.as_tree().unwrap(), to.as_tree().unwrap())
            .unwrap()
    };
    // Past the moments in which a directory's time says nothing, the refs are kept.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let index = WorkIndex::load(&git_repo, &store).unwrap();
    let fn_tip = tip(&format!("plait/{id}/fn"));
    assert_eq!(index.runs_at(&[fn_tip]), vec![id.clone()]);
    let text = std::fs::read_to_string(repo.path.join(".git/plait/task-work")).unwrap();
    assert!(text.contains("\ntips "), "{text}");
    let found = index.brought_in(&changes_to(&format!("plait/{id}/test")));
    assert_eq!(found[&id], vec!["test".to_string()]);

    // A branch moved by hand is seen where it is now.
    let main = tip("main");
    assert!(index.runs_at(&[main]).is_empty());
    repo.git(&["update-ref", &format!("refs/heads/plait/{id}/bad"), "main"]);
    let index = WorkIndex::load(&git_repo, &store).unwrap();
    assert_eq!(index.runs_at(&[main]), vec![id.clone()]);

    // A record that breaks keeps what was indexed; one that is gone takes its run away.
    let record = repo.path.join(format!(".git/plait/runs/{id}/state.json"));
    let good = std::fs::read(&record).unwrap();
    std::fs::write(&record, "{broken").unwrap();
    let index = WorkIndex::load(&git_repo, &store).unwrap();
    let found = index.brought_in(&changes_to(&format!("plait/{id}/test")));
    assert_eq!(found[&id], vec!["test".to_string()]);
    std::fs::remove_file(&record).unwrap();
    let index = WorkIndex::load(&git_repo, &store).unwrap();
    assert!(index
        .brought_in(&changes_to(&format!("plait/{id}/test")))
        .is_empty());
    assert!(index.runs_at(&[fn_tip]).is_empty());
    std::fs::write(&record, good).unwrap();
    let index = WorkIndex::load(&git_repo, &store).unwrap();
    assert_eq!(index.runs_at(&[fn_tip]), vec![id]);
}

#[test]
fn plait_land_goes_through_the_hooks_unjudged() {
    let repo = sample();
    let out = repo.plait(&["hook", "install"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = run(&repo, &clean_plan().to_toml());
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        !stderr(&out).contains("plait check:"),
        "the hook judged the landing: {}",
        stderr(&out)
    );
    assert_eq!(repo.read("x/a.txt"), "a\n2\n");
}
