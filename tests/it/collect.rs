//! Stage 4: plait commits owned changes only; everything else is a reported violation.

use std::fs;

use plait_core::state::{ChangeKind, FileChange, TaskState};

use crate::support::{git_in, TestRepo};

fn change(path: &str, kind: ChangeKind) -> FileChange {
    FileChange {
        path: path.to_string(),
        kind,
    }
}

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("lib/a/mod.py", "a = 1\n"),
        ("lib/a/old.py", "old\n"),
        ("lib/b/mod.py", "b = 1\n"),
        ("docs/guide.md", "guide\n"),
        (".gitignore", "*.pyc\n"),
    ])
}

fn plan(exec: &str) -> String {
    format!(
        "goal = \"g\"\n[defaults]\nagent = {{ exec = '''{exec}''' }}\n\
         [[task]]\nid = \"a\"\nprompt = \"Rewrite lib/a\\nsecond line\"\nowns = [\"/lib/a/\"]\ncontext = [\"docs/\"]\n"
    )
}

#[test]
fn owned_additions_changes_and_deletions_are_committed() {
    let repo = sample();
    let state = repo.run(&plan("echo 'a = 2' > lib/a/mod.py && rm lib/a/old.py && echo new > lib/a/new.py && chmod +x lib/a/new.py && echo junk > x.pyc"), 1);
    let task = state.task("a").unwrap();
    assert_eq!(task.state, TaskState::Done);
    assert_eq!(
        task.changes,
        [
            change("lib/a/mod.py", ChangeKind::Modified),
            change("lib/a/new.py", ChangeKind::Added),
            change("lib/a/old.py", ChangeKind::Deleted),
        ]
    );
    assert!(
        task.violations.is_empty(),
        "ignored files are not violations: {:?}",
        task.violations
    );
    let files = repo.tree_files(&task.branch);
    assert_eq!(files["lib/a/mod.py"], "a = 2\n");
    assert_eq!(files["lib/a/new.py"], "new\n");
    assert!(!files.contains_key("lib/a/old.py"));
    assert_eq!(
        repo.git(&["ls-tree", &task.branch, "lib/a/new.py"])
            .split(' ')
            .next(),
        Some("100755")
    );
    let message = repo.git(&["log", "-1", "--format=%B", &task.branch]);
    assert_eq!(
        message,
        format!("plait(a): Rewrite lib/a\n\nPlait-Run: {}", state.id)
    );
    assert_eq!(
        repo.git(&["rev-parse", &format!("{}~1", task.branch)]),
        state.base
    );
    // Only the ignored file remains untracked; the index matches the new commit.
    assert_eq!(git_in(&task.worktree, &["status", "--porcelain"]), "");
}

#[test]
fn changes_outside_ownership_are_violations_left_uncommitted() {
    let repo = sample();
    // A context file edited, a tracked file that is not checked out written, a stray new file.
    let state = repo.run(
        &plan("echo 'a = 2' > lib/a/mod.py && echo hacked > docs/guide.md && mkdir -p lib/b && echo b2 > lib/b/mod.py && echo x > stray.txt"),
        1,
    );
    let task = state.task("a").unwrap();
    assert_eq!(task.state, TaskState::Done);
    assert_eq!(task.changes, [change("lib/a/mod.py", ChangeKind::Modified)]);
    assert_eq!(
        task.violations,
        [
            change("docs/guide.md", ChangeKind::Modified),
            change("lib/b/mod.py", ChangeKind::Modified),
            change("stray.txt", ChangeKind::Added),
        ]
    );
    let files = repo.tree_files(&task.branch);
    assert_eq!(files["docs/guide.md"], "guide\n");
    assert_eq!(files["lib/b/mod.py"], "b = 1\n");
    assert!(!files.contains_key("stray.txt"));
    // The violations are still in the worktree, and git status shows them.
    assert_eq!(
        fs::read_to_string(task.worktree.join("stray.txt")).unwrap(),
        "x\n"
    );
    let status = git_in(&task.worktree, &["status", "--porcelain"]);
    assert!(status.contains("M docs/guide.md"), "{status}");
    assert!(status.contains(" M lib/b/mod.py"), "{status}");
    assert!(status.contains("?? stray.txt"), "{status}");
    // A task with violations stays out of the merge until a person accepts it.
    let merged = repo.tree_files(&state.merged_branch());
    assert_eq!(merged["lib/a/mod.py"], "a = 1\n");
    assert_eq!(merged["docs/guide.md"], "guide\n");
}

#[test]
fn deleting_a_context_file_is_a_violation() {
    let repo = sample();
    let state = repo.run(&plan("rm docs/guide.md"), 1);
    let task = state.task("a").unwrap();
    assert_eq!(
        task.violations,
        [change("docs/guide.md", ChangeKind::Deleted)]
    );
    assert!(task.changes.is_empty());
    assert!(task.commit.is_none());
}

#[test]
fn no_change_means_done_with_nothing_to_merge() {
    let repo = sample();
    let state = repo.run(&plan("cat lib/a/mod.py > /dev/null"), 1);
    let task = state.task("a").unwrap();
    assert_eq!(task.state, TaskState::Done);
    assert!(task.commit.is_none() && task.changes.is_empty());
    assert_eq!(repo.git(&["rev-parse", &task.branch]), state.base);
    let merge = state.merge.as_ref().unwrap();
    assert_eq!(merge.commit, state.base);
    assert!(merge.included.is_empty());
}

#[test]
fn an_agent_s_own_commit_cannot_smuggle_changes_past_collect() {
    let repo = sample();
    // The sandbox refuses an agent's writes to the git directory; collect is the wall
    // behind it, so this test takes the sandbox away.
    let plan = plan("echo 'a = 2' > lib/a/mod.py && echo hacked > docs/guide.md && git add -A && git commit -qm sneaky")
        .replace("[defaults]\n", "[defaults]\nsandbox = { mode = \"off\" }\n");
    let state = repo.run(&plan, 1);
    let task = state.task("a").unwrap();
    assert_eq!(task.state, TaskState::Done);
    assert_eq!(task.changes, [change("lib/a/mod.py", ChangeKind::Modified)]);
    assert_eq!(
        task.violations,
        [change("docs/guide.md", ChangeKind::Modified)]
    );
    let files = repo.tree_files(&task.branch);
    assert_eq!(files["docs/guide.md"], "guide\n");
    assert_eq!(files["lib/a/mod.py"], "a = 2\n");
    let log = repo.git(&[
        "log",
        "--format=%s",
        &format!("{}..{}", state.base, task.branch),
    ]);
    assert_eq!(
        log, "plait(a): Rewrite lib/a",
        "only plait's commit is on the branch"
    );
}
