//! Hermetic test repositories: a temp dir, `git init`, no global or system git config,
//! fixed author and dates, and helpers to run the library and the real binary.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Once};

use plait::orchestrator::{self, RunSettings};
use plait::plan;
use plait_core::state::RunState;
use tempfile::TempDir;

static INIT: Once = Once::new();

/// Makes git and libgit2 ignore this machine's configuration. Every test calls it first.
pub fn init() {
    INIT.call_once(|| {
        for (k, v) in [
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_AUTHOR_NAME", "Test Author"),
            ("GIT_AUTHOR_EMAIL", "author@example.com"),
            ("GIT_COMMITTER_NAME", "Test Author"),
            ("GIT_COMMITTER_EMAIL", "author@example.com"),
            ("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z"),
            ("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z"),
            ("GIT_TERMINAL_PROMPT", "0"),
        ] {
            std::env::set_var(k, v);
        }
        let empty = std::env::temp_dir().join("plait-tests-no-config");
        let _ = fs::create_dir_all(&empty);
        // A user config of the tests' own (the tests that want another set theirs): every
        // process of a task may read the tests' directories (their scripts, fixtures and
        // plans beside each repository), as a user lists their data in `[sandbox] readable`.
        // The tests of the read wall set a home and a config of their own.
        let config =
            std::env::temp_dir().join(format!("plait-tests-config-{}", std::process::id()));
        let _ = fs::create_dir_all(config.join("plait"));
        let _ = fs::write(
            config.join("plait/config.toml"),
            format!("[sandbox]\nreadable = [\"{}\"]\n", tests_root().display()),
        );
        std::env::set_var("XDG_CONFIG_HOME", &config);
        // Worktrees go under the user's cache: one of this test process's own, and those
        // of test processes that have ended are removed.
        let tmp = std::env::temp_dir();
        if let Ok(entries) = fs::read_dir(&tmp) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let pid = [
                    "plait-tests-cache-",
                    "plait-tests-config-",
                    "plait-tests-root-",
                ]
                .iter()
                .find_map(|p| name.strip_prefix(p));
                if let Some(pid) = pid {
                    if !Path::new("/proc").join(pid).exists() {
                        let _ = fs::remove_dir_all(entry.path());
                    }
                }
            }
        }
        let cache = tmp.join(format!("plait-tests-cache-{}", std::process::id()));
        let _ = fs::create_dir_all(&cache);
        std::env::set_var("XDG_CACHE_HOME", &cache);
        for level in [
            git2::ConfigLevel::Global,
            git2::ConfigLevel::XDG,
            git2::ConfigLevel::System,
            git2::ConfigLevel::ProgramData,
        ] {
            // SAFETY: called once, before any repository is opened by the tests.
            unsafe {
                let _ = git2::opts::set_search_path(level, &empty);
            }
        }
    });
}

/// Where this test process's repositories and their scratch directories are made.
pub fn tests_root() -> PathBuf {
    let root = std::env::temp_dir().join(format!("plait-tests-root-{}", std::process::id()));
    let _ = fs::create_dir_all(&root);
    root
}

/// The project's root, where `fixtures/` lives.
pub fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

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

    /// Runs the real `plait` binary in the repository.
    pub fn plait(&self, args: &[&str]) -> Output {
        plait_in(&self.path, args)
    }

    /// Runs the real `plait` binary in the repository with extra environment variables.
    pub fn plait_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        init();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_plait"));
        cmd.args(args).current_dir(&self.path).env("NO_COLOR", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run plait")
    }

    /// Asserts that no file of plait's own under the git directory holds `secret` (an API
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

    /// `plait status ARGS --json`, parsed.
    pub fn status_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["status"];
        all.extend_from_slice(args);
        all.push("--json");
        let out = self.plait(&all);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("plait status --json: {e}: {}", stderr(&out)))
    }

    /// Validates and runs a plan through the library; returns the final state.
    pub fn run(&self, toml: &str, jobs: usize) -> RunState {
        self.run_with_env(toml, jobs, &|_| None)
    }

    /// Like [`TestRepo::run`], with `env` as the environment the plan sees.
    pub fn run_with_env(
        &self,
        toml: &str,
        jobs: usize,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> RunState {
        let plan_path = self.plan(toml);
        let repo = plait_core::git::open(&self.path).unwrap();
        let parsed = plan::parse(toml, &plan_path).unwrap();
        let resolved = plan::resolve_with_env(&repo, parsed, &plan_path, env).unwrap();
        let settings = RunSettings {
            store: None,
            remote: None,
            repo: self.path.clone(),
            plan: Arc::new(resolved),
            plan_path,
            plan_text: toml.to_string(),
            jobs,
            worktree_root: None,
            max_cost: self.max_cost.get(),
            groups: None,
            plait_program: std::path::PathBuf::from(env!("CARGO_BIN_EXE_plait")),
        };
        let prepared = orchestrator::prepare(settings).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(orchestrator::execute(
                prepared,
                None,
                plait_core::cancel::Cancel::new().1,
            ))
            .unwrap()
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

/// Runs the real `plait` binary in `dir`.
pub fn plait_in(dir: &Path, args: &[&str]) -> Output {
    init();
    Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("run plait")
}

/// Polls `done` every 20 ms until it holds; fails the test, saying `what` did not happen,
/// after 30 s. For waiting on an event (a file, a process gone, a state) instead of a time.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "waited 30 s in vain: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
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

/// Installs a seccomp filter that makes the system calls numbered `calls` fail with
/// `errno`, as a kernel or a container that lacks them does; for `pre_exec`.
pub fn deny_calls(calls: &[u32], errno: i32) -> std::io::Result<()> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    const ALLOW: u32 = 0x7fff_0000;
    const ERRNO: u32 = 0x0005_0000;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    // The system call's number; then, for each call, a jump to the refusal at the end. On
    // the stack: this runs between fork and exec, where nothing may allocate.
    const MOST: usize = 8;
    assert!(calls.len() <= MOST, "at most {MOST} calls");
    let mut filter = [op(RET_K, 0, 0, ALLOW); MOST + 3];
    filter[0] = op(LD_W_ABS, 0, 0, 0);
    for (i, &nr) in calls.iter().enumerate() {
        filter[1 + i] = op(JEQ_K, (calls.len() - i) as u8, 0, nr);
    }
    let len = calls.len() + 3;
    filter[len - 2] = op(RET_K, 0, 0, ALLOW);
    filter[len - 1] = op(RET_K, 0, 0, ERRNO | errno as u32);
    let program = libc::sock_fprog {
        len: len as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: plain system calls; `program` outlives them.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &program as *const libc::sock_fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The task of id `id` in a run's JSON (`plait status --json`, the page's summary): the
/// element of its `tasks` with that id.
pub fn task_json(run: &serde_json::Value, id: &str) -> serde_json::Value {
    run["tasks"]
        .as_array()
        .expect("a list of tasks")
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no task {id} in {run:#}"))
        .clone()
}
