//! The hermetic repository every test starts from: a temp dir, `git init`, fixed author
//! and dates, files written and committed, trees and branches read back.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use super::{init, project_root, tests_root};

/// A git repository in a temp dir. The repository is at `path`; `scratch` is beside it for
/// plans and other files that must not be in the repository.
pub struct TestRepo {
    _dir: TempDir,
    pub path: PathBuf,
    pub scratch: PathBuf,
    /// The `--max-cost` of runs started through [`TestRepo::run`].
    pub max_cost: std::cell::Cell<Option<f64>>,
}

impl TestRepo {
    /// An initialised repository on branch `main`, without commits.
    pub fn empty() -> TestRepo {
        init();
        let dir = tempfile::tempdir_in(tests_root()).expect("tempdir");
        let path = dir.path().join("repo");
        let scratch = dir.path().join("scratch");
        fs::create_dir_all(&path).unwrap();
        fs::create_dir_all(&scratch).unwrap();
        let repo = TestRepo {
            _dir: dir,
            path,
            scratch,
            max_cost: std::cell::Cell::new(None),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// A repository whose first commit holds `files` (path → content).
    pub fn with_files(files: &[(&str, &str)]) -> TestRepo {
        let repo = TestRepo::empty();
        for (path, content) in files {
            repo.write(path, content);
        }
        repo.commit_all("base");
        repo
    }

    /// [`TestRepo::with_files`] of files whose paths and contents were made by the test.
    pub fn with_owned_files(files: &[(String, String)]) -> TestRepo {
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        TestRepo::with_files(&refs)
    }

    /// A repository whose first commit holds `fixtures/repos/<name>`.
    pub fn fixture(name: &str) -> TestRepo {
        let repo = TestRepo::empty();
        let src = project_root().join("fixtures/repos").join(name);
        copy_dir(&src, &repo.path);
        repo.commit_all("base");
        repo
    }

    pub fn write(&self, path: &str, content: &str) {
        let full = self.path.join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, content).unwrap();
    }

    pub fn read(&self, path: &str) -> String {
        fs::read_to_string(self.path.join(path)).unwrap()
    }

    /// Stages everything and commits; returns the commit id.
    pub fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// Runs git in the repository, asserting success; returns trimmed stdout.
    pub fn git(&self, args: &[&str]) -> String {
        git_in(&self.path, args)
    }

    pub fn repo(&self) -> git2::Repository {
        git2::Repository::open(&self.path).unwrap()
    }

    /// Writes a plan file in the scratch dir and returns its path.
    pub fn plan(&self, toml: &str) -> PathBuf {
        let path = self.scratch.join("plait.toml");
        fs::write(&path, toml).unwrap();
        path
    }

    /// key, say).
    pub fn assert_not_written(&self, secret: &str) {
        for entry in walkdir::WalkDir::new(self.path.join(".git/plait")) {
            let entry = entry.unwrap();
            if entry.file_type().is_file() {
                let text = fs::read(entry.path()).unwrap();
                assert!(
                    !String::from_utf8_lossy(&text).contains(secret),
                    "the secret was written to {}",
                    entry.path().display()
                );
            }
        }
    }

    /// Files in a commit's tree: path → content.
    pub fn tree_files(&self, rev: &str) -> BTreeMap<String, String> {
        let repo = self.repo();
        let tree = repo.revparse_single(rev).unwrap().peel_to_tree().unwrap();
        let mut out = BTreeMap::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
            if let Ok(blob) = entry.to_object(&repo).and_then(|o| o.peel_to_blob()) {
                out.insert(
                    format!("{root}{}", entry.name().unwrap()),
                    String::from_utf8_lossy(blob.content()).into_owned(),
                );
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        out
    }

    /// Local branch names.
    pub fn branches(&self) -> Vec<String> {
        self.git(&["for-each-ref", "--format=%(refname:short)", "refs/heads/"])
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// Runs git in `dir`, asserting success; returns trimmed stdout.
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    init();
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn copy_dir(src: &Path, dest: &Path) {
    for entry in walkdir::WalkDir::new(src).min_depth(1) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(src).unwrap();
        let target = dest.join(rel);
        if entry.file_type().is_dir() {
            fs::create_dir_all(&target).unwrap();
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A repository's `.git/config` less the one setting plait adds itself:
/// `extensions.worktreeConfig`, which its sparse worktrees need (as `git sparse-checkout`
/// sets it for a linked worktree).
pub fn without_worktree_config(config: &str) -> String {
    config.replace("[extensions]\n\tworktreeConfig = true\n", "")
}
