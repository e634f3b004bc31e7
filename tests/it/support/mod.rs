//! What every test file may use, and the only place they share anything: hermetic
//! repositories (`repo`), plait run as a binary or a library (`plait`), plans written with a
//! builder (`plan`), and the helpers of one concern each, named by their module: the agent
//! CLIs (`agents`), the kernel's walls (`sandbox`), PostgreSQL (`pg`), runs spread over
//! workers (`spread`), `plait serve` (`serve`) and the browser (`browser`), shared
//! repositories and plans (`fixtures`). A test file names `crate::support::…`, never
//! another test file.
//!
//! A test that needs what this machine lacks returns early after [`skip`] says why.

pub mod agents;
pub mod browser;
pub mod fixtures;
#[path = "../../../crates/agents/src/test_flipper.rs"]
pub mod flipper;
pub mod pg;
mod plait;
pub mod plan;
mod repo;
pub mod sandbox;
pub mod serve;
pub mod spread;

pub use plait::{owned_by_task, plait_in, printed, wait_for_running};
pub use plan::Plan;
pub use repo::{git_in, without_worktree_config, TestRepo};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Once;

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
        // A user config of the tests' own, empty as a new user's is: every wall stands as
        // plait sets it, and a test that widens one sets it in its plan (the tests of the
        // read wall set a home and a config of their own).
        let config =
            std::env::temp_dir().join(format!("plait-tests-config-{}", std::process::id()));
        let _ = fs::create_dir_all(config.join("plait"));
        let _ = fs::write(config.join("plait/config.toml"), "");
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

/// A shell loop that waits until `path` exists, looking every 20 ms. It gives up with exit
/// 9 after 6000 looks (two minutes or more), so an agent never outlives a failed test for
/// long.
pub fn until_exists(path: &Path) -> String {
    format!(
        "n=0; until [ -e {} ]; do sleep 0.02; n=$((n+1)); [ $n -gt 6000 ] && exit 9; done; true",
        path.display()
    )
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The task of id `id` in a run's JSON (`plait status --json`, the page's summary): the
/// element of its `tasks` with that id.
pub fn task_json<'a>(run: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    run["tasks"]
        .as_array()
        .expect("a list of tasks")
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no task {id} in {run:#}"))
}

/// Says that the test calling it is skipped and why (`skipped: why` on stderr, which
/// `cargo test -- --nocapture` shows); the test then returns.
pub fn skip(why: impl std::fmt::Display) {
    eprintln!("skipped: {why}");
}

/// A tokio runtime of two worker threads, for tests that drive async code themselves.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
