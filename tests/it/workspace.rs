//! Stage 2: each task's worktree is a real git worktree holding only its files.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::support::{git_in, Plan, TestRepo};

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
        // A file of the base deleted in the task's view is overlayfs's whiteout there.
        .filter(|e| !std::os::unix::fs::FileTypeExt::is_char_device(&e.file_type()))
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

/// A repository of a few directories, each with files and a subdirectory.
fn wide() -> TestRepo {
    let mut files: Vec<(String, String)> = vec![
        ("README.md".into(), "readme\n".into()),
        (".gitignore".into(), "*.o\n".into()),
    ];
    for d in ["app", "core", "docs", "tests"] {
        for f in 0..3 {
            files.push((format!("{d}/f{f}.txt"), format!("{d} {f}\n")));
            files.push((format!("{d}/sub/g{f}.txt"), format!("{d} sub {f}\n")));
        }
    }
    files.push(("core/sub/.gitignore".into(), "gen/\n".into()));
    TestRepo::with_owned_files(&files)
}

#[test]
fn worktrees_are_sparse_checkouts_git_reads_as_its_own() {
    let repo = wide();
    let edit = "printf 'new\\n' > core/new.txt; printf 'two\\n' > core/f1.txt; rm core/f2.txt";
    let state = repo.run(
        &format!(
            "goal = \"g\"\n\
             [[task]]\nid = \"core\"\nprompt = \"p\"\nowns = [\"/core/\"]\ncontext = [\"/docs/f0.txt\"]\nagent = {{ exec = \"{edit}\" }}\n\
             [[task]]\nid = \"one\"\nprompt = \"p\"\nowns = [\"/app/sub/g1.txt\"]\nagent = {{ exec = \"true\" }}\n"
        ),
        2,
    );
    let core = state.task("core").unwrap();
    let wt = &core.worktree;
    // git sees a sparse checkout in cone mode, with plait's cone.
    assert_eq!(git_in(wt, &["config", "core.sparseCheckoutCone"]), "true");
    assert_eq!(git_in(wt, &["sparse-checkout", "list"]), "core");
    // The index is sparse: the directories outside the cone are one entry each.
    let sparse = git_in(wt, &["ls-files", "--sparse", "-s"]);
    let dirs: Vec<&str> = sparse
        .lines()
        .filter(|l| l.starts_with("040000"))
        .map(|l| l.split('\t').nth(1).unwrap())
        .collect();
    assert_eq!(dirs, ["app/", "docs/sub/", "tests/"], "{sparse}");
    assert!(sparse.contains("\tcore/sub/g0.txt"), "{sparse}");
    let admin = git_in(wt, &["rev-parse", "--git-dir"]);
    let index = fs::read(std::path::Path::new(&admin).join("index")).unwrap();
    assert!(index.windows(4).any(|w| w == b"sdir"));
    // What plait committed leaves git clean; the held files are the task's, and the root's
    // own files (the directories on the way to its files) as context.
    assert_eq!(git_in(wt, &["status", "--porcelain"]), "");
    assert_eq!(
        files_in(wt),
        [
            ".gitignore",
            "README.md",
            "core/f0.txt",
            "core/f1.txt",
            "core/new.txt",
            "core/sub/.gitignore",
            "core/sub/g0.txt",
            "core/sub/g1.txt",
            "core/sub/g2.txt",
            "docs/f0.txt"
        ]
    );
    let plait_tree = git_in(wt, &["rev-parse", "HEAD^{tree}"]);

    // git diff and git add work in it; the same change committed by git in the same
    // worktree, from the base on another branch, makes the same tree.
    git_in(wt, &["checkout", "-q", "-b", "by-git", "HEAD~1"]);
    assert_eq!(git_in(wt, &["status", "--porcelain"]), "");
    assert_eq!(
        fs::read_to_string(wt.join("core/f2.txt")).unwrap(),
        "core 2\n"
    );
    assert!(!wt.join("core/new.txt").exists());
    fs::write(wt.join("core/new.txt"), "new\n").unwrap();
    fs::write(wt.join("core/f1.txt"), "two\n").unwrap();
    fs::remove_file(wt.join("core/f2.txt")).unwrap();
    let diff = git_in(wt, &["diff"]);
    assert!(diff.contains("-core 1") && diff.contains("+two"), "{diff}");
    git_in(wt, &["add", "-A", "core"]);
    git_in(
        wt,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "same",
        ],
    );
    assert_eq!(git_in(wt, &["rev-parse", "HEAD^{tree}"]), plait_tree);
    // Still sparse after git rewrote the index.
    let sparse = git_in(wt, &["ls-files", "--sparse"]);
    assert!(sparse.lines().any(|l| l == "tests/"), "{sparse}");
    // plait reads back what git wrote, in index version 4 too.
    git_in(wt, &["update-index", "--index-version", "4"]);
    let held =
        plait_trees::workspace::index::checked_out(&std::path::Path::new(&admin).join("index"))
            .unwrap();
    assert_eq!(held, files_in(wt));

    // A task owning one file: its directory's own files are in the cone, nothing whole;
    // the own files of each directory on the way to it are held as context, the rest of
    // the cone is skip-worktree.
    let one = state.task("one").unwrap();
    assert_eq!(git_in(&one.worktree, &["sparse-checkout", "list"]), "");
    assert_eq!(git_in(&one.worktree, &["status", "--porcelain"]), "");
    assert_eq!(
        files_in(&one.worktree),
        [
            ".gitignore",
            "README.md",
            "app/f0.txt",
            "app/f1.txt",
            "app/f2.txt",
            "app/sub/g0.txt",
            "app/sub/g1.txt",
            "app/sub/g2.txt"
        ]
    );
    let sparse = git_in(&one.worktree, &["ls-files", "--sparse", "-t"]);
    assert!(sparse.contains("H app/sub/g0.txt"), "{sparse}");
    assert!(sparse.contains("H README.md"), "{sparse}");
    assert!(sparse.contains("S core/"), "{sparse}");
}

#[test]
fn directories_with_glob_characters_and_spaces_make_cones_git_reads() {
    let repo = TestRepo::with_files(&[
        ("we#ird[1]/a.txt", "a\n"),
        ("my dir/b.txt", "b\n"),
        ("st*r/c.txt", "c\n"),
        ("other/d.txt", "d\n"),
    ]);
    let state = repo.run(
        &Plan::new()
            .goal("g")
            .exec_all("true")
            .task("w")
            .owns(["/we#ird\\[1\\]/", "/my dir/", "/st\\*r/"])
            .to_toml(),
        1,
    );
    let w = state.task("w").unwrap();
    assert_eq!(w.state, plait_core::state::TaskState::Done, "{:?}", w.error);
    assert_eq!(
        git_in(&w.worktree, &["sparse-checkout", "list"]),
        "my dir\nst*r\nwe#ird[1]"
    );
    assert_eq!(git_in(&w.worktree, &["status", "--porcelain"]), "");
    assert_eq!(
        files_in(&w.worktree),
        ["my dir/b.txt", "st*r/c.txt", "we#ird[1]/a.txt"]
    );
    let sparse = git_in(&w.worktree, &["ls-files", "--sparse"]);
    assert!(sparse.lines().any(|l| l == "other/"), "{sparse}");
    // git's own sparse-checkout reapply agrees with plait's cone: nothing moves.
    git_in(&w.worktree, &["sparse-checkout", "reapply"]);
    assert_eq!(
        files_in(&w.worktree),
        ["my dir/b.txt", "st*r/c.txt", "we#ird[1]/a.txt"]
    );
}
