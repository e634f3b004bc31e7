//! Worktrees tools can live in: outside the user's checkout (under the user's cache), and
//! holding, as context, the files directly inside every directory on the way from the root
//! to each owned file, so that a tool walking up for its configuration finds the project's
//! own and writes its cache inside the worktree. Through the real binary, with a stand-in
//! for ruff that looks up the tree the way ruff does.

use std::path::{Path, PathBuf};

use crate::support::{stderr, stdout, Plan, TestRepo};

/// A ruff-like formatter: from the file's directory up, the first `pyproject.toml` with a
/// `[tool.ruff]` table (or a `ruff.toml`) is the configuration; its directory gets the
/// cache (`.ruff_cache/` with a `.gitignore` of `*`, as ruff writes it); the file gets a
/// line naming the line length it was formatted with. A write that fails is reported the
/// way ruff reports it, without saying EACCES.
const FAKE_RUFF: &str = r##"import os, sys, re
path = os.path.abspath(sys.argv[1])
d = os.path.dirname(path)
while True:
    found = None
    for name in ("ruff.toml", "pyproject.toml"):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            text = open(p).read()
            if name == "ruff.toml" or "[tool.ruff]" in text:
                found = p
                break
    if found or os.path.dirname(d) == d:
        break
    d = os.path.dirname(d)
length = 88
if found:
    m = re.search(r"line-length\s*=\s*(\d+)", open(found).read())
    if m:
        length = int(m.group(1))
root = os.path.dirname(found) if found else os.getcwd()
try:
    cache = os.path.join(root, ".ruff_cache", "0.6.0")
    os.makedirs(cache, exist_ok=True)
    open(os.path.join(root, ".ruff_cache", ".gitignore"), "w").write("*\n")
    open(os.path.join(cache, "entry"), "w").write(path + "\n")
except OSError:
    print("error: Failed to create temporary file", file=sys.stderr)
    sys.exit(2)
with open(path, "a") as f:
    f.write("# formatted, line-length %d, config %s\n" % (length, os.path.relpath(found or "-", os.path.dirname(path))))
"##;

fn attrs_like() -> TestRepo {
    TestRepo::with_files(&[
        (".gitignore", "__pycache__/\n"),
        (
            "pyproject.toml",
            "[project]\nname = \"attrs\"\n\n[tool.ruff]\nline-length = 79\n",
        ),
        ("conftest.py", "# root conftest\n"),
        ("src/attr/__init__.py", "from ._make import attrib\n"),
        ("src/attr/_make.py", "def attrib(): pass\n"),
        ("src/attr/converters.py", "def optional(): pass\n"),
        ("src/attr/sub/deep.py", "x = 1\n"),
        (
            "tools/pkg/pyproject.toml",
            "[tool.ruff]\nline-length = 100\n",
        ),
        ("tools/pkg/mod.py", "y = 2\n"),
        ("tools/other/big.py", "z = 3\n"),
        ("docs/conf.py", "project = 'attrs'\n"),
    ])
}

fn worktree_of(repo: &TestRepo, run: &str, task: &str) -> PathBuf {
    let state = repo.path.join(format!(".git/plait/runs/{run}/state.json"));
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    let task = state["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == task)
        .unwrap();
    PathBuf::from(task["worktree"].as_str().unwrap())
}

/// Every file under `dir`, relative, sorted, without the `.git` link.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                if rel != ".git" {
                    out.push(rel);
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_tool_walking_up_finds_the_project_s_config_and_writes_its_cache_in_the_worktree() {
    let repo = attrs_like();
    // The user's own checkout: a cache of theirs, and an uncommitted change to the config
    // that no task may see.
    repo.write(".ruff_cache/0.6.0/mine", "the user's\n");
    repo.write(
        "pyproject.toml",
        "[project]\nname = \"attrs\"\n\n[tool.ruff]\nline-length = 120\n",
    );
    let ruff = repo.scratch.join("fake_ruff.py");
    std::fs::write(&ruff, FAKE_RUFF).unwrap();
    let toml = format!(
        "goal = \"format\"\n[defaults]\nagent = {{ exec_each = 'python3 {} {{file}}' }}\n\
         [[task]]\nid = \"make\"\nprompt = \"p\"\nowns = [\"src/attr/_make.py\"]\n\
         [[task]]\nid = \"pkg\"\nprompt = \"p\"\nowns = [\"tools/pkg/mod.py\"]\n\
         [[task]]\nid = \"deep\"\nprompt = \"p\"\nowns = [\"src/attr/sub/**\"]\n",
        ruff.display()
    );
    let plan = repo.plan(&toml);
    let out = repo.plait(&["run", plan.to_str().unwrap(), "-j", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();

    // Outside the user's checkout, so walking up from it reaches nothing of the user's.
    let make = worktree_of(&repo, &run, "make");
    assert!(!make.starts_with(&repo.path), "{}", make.display());
    let mut up = make.parent();
    while let Some(dir) = up {
        assert!(
            !dir.join("pyproject.toml").exists(),
            "{} has a pyproject.toml above the worktree",
            dir.display()
        );
        up = dir.parent();
    }
    // The files directly inside each directory on the way, and nothing beside.
    assert_eq!(
        files_under(&make)
            .into_iter()
            .filter(|f| !f.starts_with(".ruff_cache"))
            .collect::<Vec<_>>(),
        [
            ".gitignore",
            "conftest.py",
            "pyproject.toml",
            "src/attr/__init__.py",
            "src/attr/_make.py",
            "src/attr/converters.py",
        ]
    );
    let pkg = worktree_of(&repo, &run, "pkg");
    assert_eq!(
        files_under(&pkg)
            .into_iter()
            .filter(|f| !f.starts_with("tools/pkg/.ruff_cache"))
            .collect::<Vec<_>>(),
        [
            ".gitignore",
            "conftest.py",
            "pyproject.toml",
            "tools/pkg/mod.py",
            "tools/pkg/pyproject.toml",
        ]
    );
    // An owned glob: the directories above it, and the files directly inside it.
    let deep = worktree_of(&repo, &run, "deep");
    assert!(deep.join("src/attr/__init__.py").exists());
    assert!(deep.join("src/attr/sub/deep.py").exists());
    assert!(!deep.join("tools/pkg/mod.py").exists());

    // The project's config as committed (79, not the user's uncommitted 120); the nearest
    // one for the nested package (100).
    let show = |path: &str| repo.git(&["show", &format!("plait/{run}/{path}")]);
    assert!(
        show("make:src/attr/_make.py").contains("line-length 79, config ../../pyproject.toml"),
        "{}",
        show("make:src/attr/_make.py")
    );
    assert!(show("pkg:tools/pkg/mod.py").contains("line-length 100, config pyproject.toml"));
    assert!(show("deep:src/attr/sub/deep.py").contains("line-length 79"));
    // The cache went into the worktree, ignored by ruff's own .gitignore: no violation.
    assert!(make.join(".ruff_cache/0.6.0/entry").exists());
    let status = repo.status_json(&[&run]);
    for task in status["tasks"].as_array().unwrap() {
        assert_eq!(task["state"], "done", "{status}");
        assert_eq!(task["violations"], serde_json::json!([]), "{status}");
    }
    // The user's cache and config are as they were.
    assert_eq!(files_under(&repo.path.join(".ruff_cache")), ["0.6.0/mine"]);
    assert!(std::fs::read_to_string(repo.path.join("pyproject.toml"))
        .unwrap()
        .contains("120"));

    // git knows the worktrees where they are, and clean removes them.
    let list = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(
        list.contains(&format!(
            "worktree {}",
            make.canonicalize().unwrap().display()
        )),
        "{list}"
    );
    let out = repo.plait(&["clean", &run, "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!make.exists());
    assert!(
        !make.parent().unwrap().exists(),
        "the run's directory is removed"
    );
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

#[test]
fn worktree_dir_still_chooses_and_without_a_cache_the_git_directory_is_used() {
    let repo = attrs_like();
    let toml = Plan::new()
        .goal("g")
        .exec_all("true")
        .task("a")
        .owns(["docs/conf.py"])
        .to_toml();
    let plan = repo.plan(&toml);
    let chosen = repo.scratch.join("trees");
    let out = repo.plait(&[
        "run",
        plan.to_str().unwrap(),
        "--worktree-dir",
        chosen.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    assert_eq!(worktree_of(&repo, &run, "a"), chosen.join(&run).join("a"));

    // No XDG_CACHE_HOME and no HOME: the run's own directory, as before.
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap()],
        &[("XDG_CACHE_HOME", ""), ("HOME", "")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    let wt = worktree_of(&repo, &run, "a");
    assert!(
        wt.ends_with(format!(".git/plait/runs/{run}/worktrees/a")),
        "{}",
        wt.display()
    );
    // A cache plait cannot write: a warning, and the git directory.
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap()],
        &[("XDG_CACHE_HOME", "/proc/plait-cannot-write")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: cannot make /proc/plait-cannot-write/plait/repo-"),
        "{}",
        stderr(&out)
    );
    let run = stdout(&out).trim().to_string();
    assert!(worktree_of(&repo, &run, "a").ends_with(format!(".git/plait/runs/{run}/worktrees/a")));
    // The dry run says where they would go, and makes nothing there.
    let out = repo.plait(&["run", plan.to_str().unwrap(), "--dry-run"]);
    let cache = std::env::var("XDG_CACHE_HOME").unwrap();
    assert!(
        stdout(&out).contains(&format!("in a worktree under {cache}/plait/repo-")),
        "{}",
        stdout(&out)
    );
}
