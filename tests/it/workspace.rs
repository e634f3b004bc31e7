//! Stage 2: each task's worktree is a real git worktree holding only its files.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::support::{git_in, TestRepo};

fn sample() -> TestRepo {
    let repo = TestRepo::with_files(&[
        ("lib/a/mod.py", "a = 1\n"),
        ("lib/a/run.sh", "#!/bin/sh\necho a\n"),
        ("lib/b/mod.py", "b = 1\n"),
        ("docs/guide.md", "guide\n"),
        ("docs/api.md", "api\n"),
        (".gitignore", "*.pyc\n"),
        ("lib/.gitignore", "build/\n"),
    ]);
    fs::set_permissions(
        repo.path.join("lib/a/run.sh"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("mod.py", repo.path.join("lib/a/link.py")).unwrap();
    repo.commit_all("exec bit and symlink");
    repo
}

const PLAN: &str = r#"
goal = "look"
[defaults]
agent = { exec = "true" }
[[task]]
id = "a"
prompt = "p"
owns = ["/lib/a/"]
context = ["docs/guide.md"]
[[task]]
id = "full"
prompt = "p"
owns = ["/lib/b/"]
checkout = "full"
"#;

fn files_in(dir: &std::path::Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| !e.file_type().is_dir())
        .map(|e| {
            e.path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|p| p != ".git")
        .collect();
    out.sort();
    out
}

#[test]
fn worktrees_hold_owned_context_and_ignore_files_only_and_git_sees_them_clean() {
    let repo = sample();
    let state = repo.run(PLAN, 2);
    let a = state.task("a").unwrap();
    assert_eq!(
        files_in(&a.worktree),
        [
            ".gitignore",
            "docs/guide.md",
            "lib/.gitignore",
            "lib/a/link.py",
            "lib/a/mod.py",
            "lib/a/run.sh"
        ]
    );
    // The worktree lives under the git directory and git knows it.
    assert!(
        a.worktree
            .starts_with(repo.path.join(".git/plait/runs").canonicalize().unwrap())
            || a.worktree.starts_with(repo.path.join(".git/plait/runs"))
    );
    let list = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(
        list.contains(&format!("branch refs/heads/plait/{}/a", state.id)),
        "{list}"
    );
    assert_eq!(git_in(&a.worktree, &["status", "--porcelain"]), "");
    assert_eq!(
        git_in(&a.worktree, &["rev-parse", "--abbrev-ref", "HEAD"]),
        format!("plait/{}/a", state.id)
    );
    // Not-checked-out files are skip-worktree entries, not deletions.
    let entries = git_in(&a.worktree, &["ls-files", "-v"]);
    assert!(entries.contains("S lib/b/mod.py"), "{entries}");
    assert!(entries.contains("H lib/a/mod.py"), "{entries}");
    // Modes and symlinks survive.
    let mode = fs::metadata(a.worktree.join("lib/a/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111);
    assert_eq!(
        fs::read_link(a.worktree.join("lib/a/link.py"))
            .unwrap()
            .to_str(),
        Some("mod.py")
    );
    // git diff works in it.
    fs::write(a.worktree.join("lib/a/mod.py"), "a = 2\n").unwrap();
    let diff = git_in(&a.worktree, &["diff"]);
    assert!(diff.contains("-a = 1") && diff.contains("+a = 2"), "{diff}");

    let full = state.task("full").unwrap();
    assert_eq!(files_in(&full.worktree).len(), 8);
    assert_eq!(git_in(&full.worktree, &["status", "--porcelain"]), "");
    // The user's worktree was not touched.
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(repo.git(&["rev-parse", "--abbrev-ref", "HEAD"]), "main");
}

#[test]
fn worktrees_can_live_outside_the_git_directory() {
    let repo = sample();
    let outside = tempfile::tempdir().unwrap();
    let plan_path = repo.plan(PLAN);
    let out = repo.plait(&[
        "run",
        plan_path.to_str().unwrap(),
        "--worktree-dir",
        outside.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let run = crate::support::stdout(&out).trim().to_string();
    let wt = outside.path().join(&run).join("a");
    assert!(wt.join("lib/a/mod.py").is_file());
    assert_eq!(git_in(&wt, &["status", "--porcelain"]), "");
}

#[test]
fn run_ids_are_short_and_sortable() {
    let repo = sample();
    let first = repo.run(PLAN, 1).id;
    let second = repo.run(PLAN, 1).id;
    assert_eq!(first.len(), 6);
    assert!(first < second, "{first} < {second}");
}
