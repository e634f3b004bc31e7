//! Stage 7: the merge applies disjoint changes straight onto the base and gives paths two
//! branches touched to git's own engine; results equal `git merge-tree --write-tree`.

use git2::Oid;
use plait_core::state::TaskState;
use plait_stages::merge::{self, BranchInput, MergeSettings};

use crate::support::TestRepo;

/// Commits `files` (None deletes) on a new branch from `base`; returns the commit.
fn branch(repo: &TestRepo, name: &str, base: &str, files: &[(&str, Option<&str>)]) -> String {
    repo.git(&["checkout", "-q", "-b", name, base]);
    for (path, content) in files {
        match content {
            Some(c) => repo.write(path, c),
            None => {
                repo.git(&["rm", "-q", path]);
            }
        }
    }
    let commit = repo.commit_all(name);
    repo.git(&["checkout", "-q", "main"]);
    commit
}

fn inputs(names: &[(&str, &str)]) -> Vec<BranchInput> {
    names
        .iter()
        .map(|(task, commit)| BranchInput {
            task: task.to_string(),
            branch: format!("t/{task}"),
            commit: Oid::from_str(commit).unwrap(),
            start: None,
        })
        .collect()
}

fn run_merge(
    repo: &TestRepo,
    base: &str,
    branches: &[BranchInput],
    out: &str,
) -> plait_core::state::MergeOutcome {
    let git = repo.repo();
    let settings = MergeSettings {
        workdir: &repo.path,
        branch: out,
        base: Oid::from_str(base).unwrap(),
        branches,
        message: "merge".into(),
    };
    merge::merge(&git, &settings).unwrap()
}

fn lines(n: usize, changed: &[(usize, &str)]) -> String {
    (0..n)
        .map(|i| {
            changed
                .iter()
                .find(|(k, _)| *k == i)
                .map_or(format!("line {i}\n"), |(_, s)| format!("{s}\n"))
        })
        .collect()
}

/// The tree git's engine makes of base + the branches, merged one by one.
fn git_fold(repo: &TestRepo, base: &str, branches: &[&str]) -> String {
    let mut tree = format!("{base}^{{tree}}");
    for b in branches {
        let out = repo.git(&[
            "merge-tree",
            "--write-tree",
            &format!("--merge-base={base}"),
            &tree,
            b,
        ]);
        tree = out.lines().next().unwrap().to_string();
    }
    tree
}

#[test]
fn disjoint_changes_are_applied_in_any_order_with_git_s_result() {
    let repo = TestRepo::with_files(&[
        ("a/x", "x\n"),
        ("b/y", "y\n"),
        ("c/z", "z\n"),
        ("d/w", "w\n"),
    ]);
    let base = repo.git(&["rev-parse", "HEAD"]);
    let one = branch(
        &repo,
        "t/one",
        &base,
        &[("a/x", Some("x1\n")), ("a/new", Some("n\n"))],
    );
    let two = branch(&repo, "t/two", &base, &[("b/y", None)]);
    let three = branch(
        &repo,
        "t/three",
        &base,
        &[("c/z", Some("z3\n")), ("e/f/g", Some("g\n"))],
    );
    let forward = run_merge(
        &repo,
        &base,
        &inputs(&[("one", &one), ("two", &two), ("three", &three)]),
        "out/fwd",
    );
    let backward = run_merge(
        &repo,
        &base,
        &inputs(&[("three", &three), ("two", &two), ("one", &one)]),
        "out/bwd",
    );
    assert!(forward.is_clean() && backward.is_clean());
    let tree = |rev: &str| repo.git(&["rev-parse", &format!("{rev}^{{tree}}")]);
    assert_eq!(tree("out/fwd"), tree("out/bwd"));
    assert_eq!(
        tree("out/fwd"),
        git_fold(&repo, &base, &["t/one", "t/two", "t/three"])
    );
    // The merged commit has the base and every task commit as parents.
    let parents = repo.git(&["rev-list", "--parents", "-n", "1", "out/fwd"]);
    assert_eq!(parents.split(' ').count(), 5, "{parents}");
    assert_eq!(forward.included, ["one", "two", "three"]);
}

#[test]
fn overlapping_clean_edits_go_through_git_s_engine() {
    let repo = TestRepo::with_files(&[("f.txt", &lines(20, &[])), ("other", "o\n")]);
    let base = repo.git(&["rev-parse", "HEAD"]);
    let top = branch(
        &repo,
        "t/top",
        &base,
        &[("f.txt", Some(&lines(20, &[(1, "TOP")])))],
    );
    let bottom = branch(
        &repo,
        "t/bottom",
        &base,
        &[
            ("f.txt", Some(&lines(20, &[(18, "BOTTOM")]))),
            ("other", Some("o2\n")),
        ],
    );
    let outcome = run_merge(
        &repo,
        &base,
        &inputs(&[("top", &top), ("bottom", &bottom)]),
        "out/m",
    );
    assert!(outcome.is_clean(), "{:?}", outcome.conflicts);
    assert_eq!(outcome.included, ["top", "bottom"]);
    let files = repo.tree_files("out/m");
    assert_eq!(files["f.txt"], lines(20, &[(1, "TOP"), (18, "BOTTOM")]));
    assert_eq!(
        repo.git(&["rev-parse", "out/m^{tree}"]),
        git_fold(&repo, &base, &["t/top", "t/bottom"])
    );
}

#[test]
fn a_content_conflict_is_reported_with_hunks_and_the_later_task_is_left_out() {
    let repo = TestRepo::with_files(&[("f.txt", &lines(10, &[])), ("g.txt", "g\n")]);
    let base = repo.git(&["rev-parse", "HEAD"]);
    let left = branch(
        &repo,
        "t/left",
        &base,
        &[("f.txt", Some(&lines(10, &[(4, "LEFT")])))],
    );
    let right = branch(
        &repo,
        "t/right",
        &base,
        &[
            ("f.txt", Some(&lines(10, &[(4, "RIGHT")]))),
            ("g.txt", Some("g2\n")),
        ],
    );
    let clean = branch(&repo, "t/clean", &base, &[("h.txt", Some("h\n"))]);
    let outcome = run_merge(
        &repo,
        &base,
        &inputs(&[("left", &left), ("right", &right), ("clean", &clean)]),
        "out/m",
    );
    assert_eq!(outcome.included, ["left", "clean"]);
    assert_eq!(outcome.excluded, ["right"]);
    assert_eq!(outcome.conflicts.len(), 1);
    let c = &outcome.conflicts[0];
    assert_eq!((c.path.as_str(), c.kind.as_str()), ("f.txt", "content"));
    assert_eq!(c.tasks, ["left", "right"]);
    assert!(
        c.hunks
            .contains("<<<<<<< refs/heads/out/m\nLEFT\n=======\nRIGHT\n>>>>>>> refs/heads/t/right"),
        "{}",
        c.hunks
    );
    // git's own engine gives the same file for the same inputs.
    let git_out = std::process::Command::new("git")
        .args([
            "merge-tree",
            "--write-tree",
            &format!("--merge-base={base}"),
            "refs/heads/out/m",
            "refs/heads/t/right",
        ])
        .current_dir(&repo.path)
        .output()
        .unwrap();
    assert_eq!(git_out.status.code(), Some(1));
    let git_tree = String::from_utf8_lossy(&git_out.stdout)
        .lines()
        .next()
        .unwrap()
        .to_string();
    let git_file = repo.git(&["cat-file", "-p", &format!("{git_tree}:f.txt")]);
    assert!(
        git_file.contains(c.hunks.trim_end()),
        "{git_file}\n---\n{}",
        c.hunks
    );
    // No conflicted content reaches the merged branch; the clean task and left are in.
    let files = repo.tree_files("out/m");
    assert_eq!(files["f.txt"], lines(10, &[(4, "LEFT")]));
    assert_eq!(
        files["g.txt"], "g\n",
        "nothing of the excluded task is merged"
    );
    assert_eq!(files["h.txt"], "h\n");
    assert!(files.values().all(|c| !c.contains("<<<<<<<")));
}

#[test]
fn modify_delete_and_add_add_conflicts_are_named() {
    let repo = TestRepo::with_files(&[("keep.txt", "k\n")]);
    let base = repo.git(&["rev-parse", "HEAD"]);
    let del = branch(
        &repo,
        "t/del",
        &base,
        &[("keep.txt", None), ("new.txt", Some("one\n"))],
    );
    let edit = branch(
        &repo,
        "t/edit",
        &base,
        &[("keep.txt", Some("k2\n")), ("new.txt", Some("two\n"))],
    );
    let outcome = run_merge(
        &repo,
        &base,
        &inputs(&[("del", &del), ("edit", &edit)]),
        "out/m",
    );
    let kinds: Vec<(&str, &str)> = outcome
        .conflicts
        .iter()
        .map(|c| (c.path.as_str(), c.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [("keep.txt", "modify/delete"), ("new.txt", "add/add")]
    );
    assert!(
        outcome.conflicts[1].hunks.contains("one\n=======\ntwo"),
        "{}",
        outcome.conflicts[1].hunks
    );
    assert!(
        outcome.conflicts[0].message.contains("deleted in"),
        "{}",
        outcome.conflicts[0].message
    );
}

#[test]
fn two_tasks_adding_the_same_new_file_conflict_within_a_run() {
    // Both tasks' globs match the new path shared/a-b; no tracked file is owned twice.
    let repo = TestRepo::with_files(&[
        ("shared/a-1", "1\n"),
        ("shared/2-b", "2\n"),
        ("lib/a.py", "a\n"),
        ("lib/b.py", "b\n"),
    ]);
    let plan = |same: bool| {
        let b_content = if same { "A" } else { "B" };
        format!(
            "[defaults]\ntimeout = \"30s\"\n\
             [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/lib/a.py\", \"/shared/a-*\"]\nagent = {{ exec = \"echo A > shared/a-b; echo a2 > lib/a.py\" }}\n\
             [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"/lib/b.py\", \"/shared/*-b\"]\nagent = {{ exec = \"echo {b_content} > shared/a-b; echo b2 > lib/b.py\" }}\n"
        )
    };
    let state = repo.run(&plan(false), 1);
    assert!(state.tasks.iter().all(|t| t.state == TaskState::Done));
    let merge = state.merge.as_ref().unwrap();
    assert_eq!(merge.included, ["a"]);
    assert_eq!(merge.excluded, ["b"]);
    assert_eq!(merge.conflicts[0].kind, "add/add");
    assert_eq!(merge.conflicts[0].tasks, ["a", "b"]);
    let files = repo.tree_files(&merge.branch);
    assert_eq!(files["shared/a-b"], "A\n");
    assert_eq!(files["lib/b.py"], "b\n");
    assert!(plait_stages::report::attention(&state)
        .iter()
        .any(|a| a.contains("1 conflict")));

    // The same content added twice merges cleanly.
    let state = repo.run(&plan(true), 1);
    let merge = state.merge.as_ref().unwrap();
    assert!(merge.is_clean(), "{:?}", merge.conflicts);
    let files = repo.tree_files(&merge.branch);
    assert_eq!(
        (files["shared/a-b"].as_str(), files["lib/b.py"].as_str()),
        ("A\n", "b2\n")
    );
}
