//! The agent CLIs plait drives itself, Claude Code and aider: their scripted fakes under
//! `tests/fake/` (a script in, a record of what they were given out), the real CLIs when this
//! machine has them, and what their tests check of every task they run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

use super::{project_root, skip, Plan, TestRepo};

pub const KEY: &str = "sk-test-cli-0123456789";

pub fn fake(name: &str) -> PathBuf {
    project_root().join("tests/fake").join(name)
}

pub fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("src/a/x.txt", "hi\n"),
        ("src/a/other.txt", "keep\n"),
        ("src/b/y.txt", "yo\n"),
        ("README.md", "readme\n"),
    ])
}

/// A plan of two tasks of [`sample`] running `agent`, without a reviewer.
pub fn plan(agent: &str) -> Plan {
    Plan::new()
        .goal("Greet properly")
        .set("defaults", "agent", agent)
        .set("defaults", "timeout", "60s")
        .set("defaults", "max_turns", 7)
        .review_off()
        .task("a")
        .prompt("Say hello in src/a/x.txt")
        .owns(["src/a/"])
        .task("b")
        .prompt("Say hey in src/b/y.txt")
        .owns(["src/b/"])
}

/// [`plan`] on the real Claude Code at `claude`, its model the mock model server at `url`
/// (`[providers.mock]`, Claude Sonnet 4.5).
pub fn claude_on_mock(claude: &Path, url: &str) -> Plan {
    plan("claude-code")
        .set("agents.claude-code", "bin", claude.display().to_string())
        .set("agents.claude-code", "provider", "mock")
        .mock("anthropic", url, "claude-sonnet-4-5")
}

/// A fake CLI set up for a test the way a user installs a tool: a copy of the fake `name`
/// in the `bin/` of a prefix of its own beside the repository, with its script (`entries`)
/// in the prefix too, so that the plan, naming the copy by its path, opens its package.
pub struct Fake {
    /// The copy's path, for the plan's `bin`.
    pub bin: String,
    /// Its script, for `FAKE_<NAME>_SCRIPT`.
    pub script: String,
    /// For `FAKE_<NAME>_RECORD`: a relative directory, which the fake takes under its
    /// task's `$PLAIT_SCRATCH` (see [`record`]).
    pub records: String,
}

/// Writes a fake CLI's copy and script (see [`Fake`]).
pub fn script(repo: &TestRepo, name: &str, entries: Value) -> Fake {
    let dir = repo.scratch.join(format!("{name}-fake"));
    fs::create_dir_all(dir.join("bin")).unwrap();
    let bin = dir.join("bin").join(name);
    fs::copy(fake(name), &bin).unwrap();
    let script = dir.join("script.json");
    fs::write(&script, entries.to_string()).unwrap();
    Fake {
        bin: bin.display().to_string(),
        script: script.display().to_string(),
        records: "fake-records".to_string(),
    }
}

/// The record task `task`'s fake CLI wrote on its first run in the repository's latest run.
pub fn record(repo: &TestRepo, task: &str) -> Value {
    record_of_run(repo, task, 1)
}

/// The record task `task`'s fake CLI wrote on its `n`th run (from 1) in the repository's
/// latest run: in the task's own scratch, plait's `tasks/<task>/scratch/fake-records/`.
pub fn record_of_run(repo: &TestRepo, task: &str, n: usize) -> Value {
    let run = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    let name = if n == 1 {
        format!("{task}.json")
    } else {
        format!("{task}.{n}.json")
    };
    let path = repo
        .path
        .join(".git/plait/runs")
        .join(run)
        .join("tasks")
        .join(task)
        .join("scratch/fake-records")
        .join(name);
    let text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("no record {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The command line a fake CLI recorded.
pub fn argv_of(rec: &Value) -> Vec<&str> {
    let argv = rec["argv"].as_array().unwrap();
    argv.iter().map(|v| v.as_str().unwrap()).collect()
}

/// The argument after `flag`.
pub fn after<'a>(argv: &[&'a str], flag: &str) -> &'a str {
    let i = argv
        .iter()
        .position(|a| *a == flag)
        .unwrap_or_else(|| panic!("no {flag} in {argv:?}"));
    argv[i + 1]
}

/// Asserts that `url` is a task's way through plait's gateway:
/// `http://127.0.0.1:<port>/t/<token>`.
pub fn assert_gateway_url(url: &str) {
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("{url}"));
    let (port, token) = rest.split_once("/t/").unwrap_or_else(|| panic!("{url}"));
    assert!(port.parse::<u16>().is_ok(), "{url}");
    assert!(
        token.len() == 32 && token.chars().all(|c| c.is_ascii_hexdigit()),
        "{url}"
    );
}

/// `plait run` of `toml` with the key and a home of its own, as the real CLIs get it.
pub fn run_real(repo: &TestRepo, toml: &str) -> Output {
    let plan_path = repo.plan(toml);
    let home = tempfile::tempdir().unwrap();
    repo.plait_env(
        &["run", plan_path.to_str().unwrap(), "-j", "2"],
        &[
            ("PLAIT_TEST_KEY", KEY),
            ("HOME", home.path().to_str().unwrap()),
        ],
    )
}

/// The real Claude Code CLI: `PLAIT_TEST_CLAUDE`, `claude` on PATH, or the copy `.ci/run`
/// installs under `target/ci-tools`; `None`, the test skipped and saying so, without it.
pub fn real_claude() -> Option<PathBuf> {
    let found = find_claude();
    if found.is_none() {
        skip("the Claude Code CLI is not installed (set PLAIT_TEST_CLAUDE, put `claude` on PATH, or `npm install --prefix target/ci-tools @anthropic-ai/claude-code`)");
    }
    found
}

fn find_claude() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PLAIT_TEST_CLAUDE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let local = project_root().join("target/ci-tools/node_modules/.bin/claude");
    if local.exists() {
        return Some(local);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("claude"))
            .find(|p| p.is_file())
    })
}

/// The real aider: `PLAIT_TEST_AIDER`, or the venv `.ci/run` installs under
/// `target/ci-tools`; `None`, the test skipped and saying so, without it.
pub fn real_aider() -> Option<PathBuf> {
    let found = std::env::var_os("PLAIT_TEST_AIDER")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            let local = project_root().join("target/ci-tools/aider-venv/bin/aider");
            local.exists().then_some(local)
        });
    if found.is_none() {
        skip("aider is not installed (set PLAIT_TEST_AIDER, or `python3 -m venv target/ci-tools/aider-venv && target/ci-tools/aider-venv/bin/pip install aider-chat`)");
    }
    found
}

/// Asserts that a task's processes ran under the kernel's walls, where it has them (the
/// real CLIs must work confined).
pub fn assert_confined(task: &Value) {
    if matches!(
        plait_sandbox::sandbox::support(),
        plait_sandbox::sandbox::Support::Landlock(_)
    ) {
        assert_eq!(task["sandbox"]["confined"], true, "{task}");
    }
    eprintln!(
        "the sandbox refused {}: {}",
        task["id"], task["sandbox"]["refused"]
    );
}

/// [`plan`] on the real Claude Code at `claude` with no provider: its model
/// (Claude Sonnet 4.5), base URL and credential are those of its environment.
pub fn claude_on_its_own(claude: &Path) -> Plan {
    plan("claude-code")
        .set("agents.claude-code", "bin", claude.display().to_string())
        .set("agents.claude-code", "model", "claude-sonnet-4-5")
}

/// `plait ARGS` where the only credential is the Claude Code login in `home` (no key, no
/// config directory of Claude Code's own) and Anthropic's API is at `url`; `env` more.
pub fn plait_on_login(
    repo: &TestRepo,
    args: &[&str],
    home: &Path,
    url: &str,
    env: &[(&str, &str)],
) -> Output {
    let mut all = vec![
        ("HOME", home.to_str().unwrap()),
        ("CLAUDE_CONFIG_DIR", ""),
        ("ANTHROPIC_API_KEY", ""),
        ("ANTHROPIC_BASE_URL", url),
    ];
    all.extend_from_slice(env);
    repo.plait_env(args, &all)
}

/// A home whose Claude Code login (an OAuth access token the mock takes as its bearer)
/// is all there is: no key for plait.
pub fn login_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let own = home.path().join(".claude");
    std::fs::create_dir_all(&own).unwrap();
    let far = (std::time::SystemTime::now() + std::time::Duration::from_secs(30 * 86_400))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let login = json!({"claudeAiOauth": {"accessToken": KEY, "refreshToken": "r", "expiresAt": far,
        "scopes": ["user:inference", "user:profile"], "subscriptionType": "pro"}});
    std::fs::write(own.join(".credentials.json"), login.to_string()).unwrap();
    home
}
