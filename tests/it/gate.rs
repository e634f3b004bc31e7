//! The gate's consistency with itself: checks that cannot run are the plan's fault, found
//! before anything is created where they can be, and never fed back to an agent; an empty
//! merge is not checked.

use crate::support::{stderr, stdout, Plan, TestRepo};

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

fn two_tasks(repo: &TestRepo, a_script: &str) -> String {
    let toml = Plan::new()
        .goal("g")
        .review_off()
        .task("a")
        .owns(["/a.txt"])
        .exec(a_script)
        .task("b")
        .owns(["/b.txt"])
        .exec("echo more >> b.txt")
        .to_toml();
    let path = repo.plan(&toml);
    let out = repo.plait(&["run", path.to_str().unwrap()]);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        stderr(&out)
    );
    repo.status_json(&[])["id"].as_str().unwrap().to_string()
}

fn files() -> TestRepo {
    TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")])
}

#[test]
fn a_task_with_violations_is_out_of_a_partial_landing_until_a_person_accepts_it() {
    let violating = "echo more >> a.txt; echo sneaky >> c.txt";
    // --partial lands the rest, without the violating task.
    let repo = files();
    let id = two_tasks(&repo, violating);
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let out = repo.plait(&["land", &id, "--into", "main", "--partial"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let main = repo.tree_files("main");
    assert_eq!(main["b.txt"], "b\nmore\n");
    assert_eq!(
        main["a.txt"], "a\n",
        "a task with violations was landed by --partial"
    );
    // Accepted as it is, it lands with the rest, without --partial.
    let repo = files();
    let id = two_tasks(&repo, violating);
    let out = repo.plait(&["accept", &id, "a"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let main = repo.tree_files("main");
    assert_eq!(main["a.txt"], "a\nmore\n");
    assert_eq!(main["b.txt"], "b\nmore\n");
    assert_eq!(main["c.txt"], "c\n", "a violation is never committed");
}

#[test]
fn a_persons_reject_is_a_decision_the_rest_lands_and_clean_removes_it() {
    let repo = files();
    let id = two_tasks(&repo, "echo more >> a.txt");
    let out = repo.plait(&["reject", &id, "b"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let main = repo.tree_files("main");
    assert_eq!(main["a.txt"], "a\nmore\n");
    assert_eq!(main["b.txt"], "b\n");
    let tip = repo.git(&["rev-parse", &format!("plait/{id}/b")]);
    let out = repo.plait(&["clean", &id]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains(&format!("git branch plait/{id}/b {tip}")),
        "{}",
        stdout(&out)
    );
    assert!(!repo.branches().contains(&format!("plait/{id}/b")));
}

#[test]
fn a_fix_committed_by_hand_in_a_task_branch_is_collected_by_land_never_dropped() {
    let repo = files();
    let id = two_tasks(&repo, "echo more >> a.txt");
    let state = repo.status_json(&[&id]);
    let worktree = state["tasks"][0]["worktree"].as_str().unwrap().to_string();
    let wt = std::path::Path::new(&worktree);
    std::fs::write(wt.join("a.txt"), "a\nmore\nfixed by hand\n").unwrap();
    crate::support::git_in(wt, &["commit", "-q", "-am", "fix by hand"]);
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("moved by hand: collected"),
        "{}",
        stderr(&out)
    );
    assert_eq!(repo.tree_files("main")["a.txt"], "a\nmore\nfixed by hand\n");

    // A hand commit that changes a file the task does not own stops the landing.
    let repo = files();
    let id = two_tasks(&repo, "echo more >> a.txt");
    let main_before = repo.git(&["rev-parse", "main"]);
    // A commit on the branch (checked out in the task's worktree) that changes c.txt.
    let git = repo.repo();
    let refname = format!("refs/heads/plait/{id}/a");
    let parent = git
        .find_reference(&refname)
        .unwrap()
        .peel_to_commit()
        .unwrap();
    let blob = git.blob(b"c\nnot a's\n").unwrap();
    let mut tree = git.treebuilder(Some(&parent.tree().unwrap())).unwrap();
    tree.insert("c.txt", blob, 0o100644).unwrap();
    let tree = git.find_tree(tree.write().unwrap()).unwrap();
    let sig = git2::Signature::now("hand", "hand@example.invalid").unwrap();
    git.commit(Some(&refname), &sig, &sig, "outside", &tree, &[&parent])
        .unwrap();
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("change files task `a` does not own: c.txt"),
        "{}",
        stderr(&out)
    );
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before);
}

#[test]
fn plait_check_collects_a_fix_committed_by_hand_as_land_does() {
    let repo = files();
    let id = two_tasks(&repo, "echo more >> a.txt");
    let state = repo.status_json(&[&id]);
    let wt = std::path::PathBuf::from(state["tasks"][0]["worktree"].as_str().unwrap());
    std::fs::write(wt.join("a.txt"), "a\nmore\nfixed by hand\n").unwrap();
    crate::support::git_in(&wt, &["commit", "-q", "-am", "fix by hand"]);
    let out = repo.plait(&["check", &id, "--into", "main"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let merged = repo.tree_files(&format!("plait/{id}/merged"));
    assert_eq!(merged["a.txt"], "a\nmore\nfixed by hand\n");
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(repo.tree_files("main")["a.txt"], "a\nmore\nfixed by hand\n");
}
