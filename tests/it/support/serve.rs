//! `plait serve` for the tests: the real binary serving a repository on 127.0.0.1, spoken
//! to over plain HTTP, the small project of three tasks its tests run, and a run of it that
//! goes on while the test steers it (`Going`).

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{init, stderr, stdout, until_exists, wait_until, Plan, TestRepo};

pub fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("lib/a.txt", "a\n"),
        ("lib/b.txt", "b\n"),
        ("lib/c.txt", "c\n"),
    ])
}

/// Each task writes `v1` to its file, or, told a comment with `SHOUT`, `V2`.
pub const AGENT: &str = "printf '%s\\n' \"$PLAIT_FEEDBACK\"; if printf '%s' \"$PLAIT_FEEDBACK\" | grep -q SHOUT; then echo V2 > lib/$PLAIT_TASK.txt; else echo v1 > lib/$PLAIT_TASK.txt; fi";

/// Runs `toml` with the real binary; the run's id.
pub fn run(repo: &TestRepo, toml: &str) -> String {
    let plan = repo.plan(toml);
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "plait run: {}",
        stderr(&out)
    );
    stdout(&out).trim().to_string()
}

/// `plait serve --port 0` in a repository, stopped when dropped.
pub struct Served {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub token: String,
}

impl Served {
    pub fn start(repo: &TestRepo, args: &[&str]) -> Served {
        init();
        let mut child = Command::new(env!("CARGO_BIN_EXE_plait"))
            .arg("serve")
            .args(["--port", "0"])
            .args(args)
            .current_dir(&repo.path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start plait serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("plait serve printed {line:?}"))
            .to_string();
        let mut served = Served {
            child,
            addr,
            token: String::new(),
        };
        let (status, page) = served.request("GET", "/", &[], None);
        assert_eq!(status, 200);
        served.token = page
            .split("name=\"plait-token\" content=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("the page carries the token")
            .to_string();
        served
    }

    /// One HTTP/1.1 request with `headers` (a `Host` among them replaces the right one);
    /// the status and the body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            let _ = writeln!(head, "Host: {}\r", self.addr);
        }
        for (k, v) in headers {
            let _ = writeln!(head, "{k}: {v}\r");
        }
        if !body.is_empty() {
            head.push_str("Content-Type: application/json\r\n");
        }
        let _ = writeln!(head, "Content-Length: {}\r\n\r", body.len());
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let text = String::from_utf8_lossy(&response).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }

    /// `GET path`, as JSON.
    pub fn get(&self, path: &str) -> Value {
        let (status, body) = self.request("GET", path, &[], None);
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    /// `POST path` with the token.
    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let token = self.token.clone();
        let (status, text) = self.request("POST", path, &[("X-Plait-Token", &token)], Some(&body));
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A run of tasks `a` and `b` of [`sample`] going in `plait run -j 2` (the real binary, a
/// child process). In its first round each agent says `started.<task>` in its log and
/// waits for `go` in [`marks`] ([`release`]), then writes `v1`; in a later round (told a
/// comment) it prints its environment, each line after `ENV.<task> `, and writes `v2`.
/// Dropped, it releases the agents and ends the run.
///
/// [`marks`]: Going::marks
/// [`release`]: Going::release
pub struct Going {
    child: Option<Child>,
    marks: tempfile::TempDir,
    repo: PathBuf,
}

impl Going {
    /// Starts the run in `repo` and waits until both agents have started.
    pub fn start(repo: &TestRepo) -> Going {
        init();
        let marks = tempfile::tempdir().unwrap();
        let agent = format!(
            "if [ -n \"$PLAIT_FEEDBACK\" ]; then env | sed \"s/^/ENV.$PLAIT_TASK /\"; echo v2 > lib/$PLAIT_TASK.txt; \
             else echo started.$PLAIT_TASK; {wait}; echo v1 > lib/$PLAIT_TASK.txt; fi",
            wait = until_exists(&marks.path().join("go"))
        );
        let toml = Plan::new()
            .goal("g")
            .review_off()
            .exec_all(&agent)
            .task("a")
            .owns(["lib/a.txt"])
            .task("b")
            .owns(["lib/b.txt"])
            .to_toml();
        let plan = repo.plan(&toml);
        let child = Command::new(env!("CARGO_BIN_EXE_plait"))
            .args(["run", plan.to_str().unwrap(), "-j", "2"])
            .current_dir(&repo.path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start plait run");
        let going = Going {
            child: Some(child),
            marks,
            repo: repo.path.clone(),
        };
        for task in ["a", "b"] {
            let started = format!("started.{task}");
            wait_until(&format!("the agent of {task} started"), || {
                !going.printed(&started).is_empty()
            });
        }
        going
    }

    /// The file `name` in the agents' directory.
    pub fn mark(&self, name: &str) -> PathBuf {
        self.marks.path().join(name)
    }

    /// Lets the agents waiting for `go` go on.
    pub fn release(&self) {
        std::fs::write(self.mark("go"), "").unwrap();
    }

    /// Releases the agents and waits for the run's end; `plait run`'s output.
    pub fn end(&mut self) -> Output {
        self.release();
        self.child.take().unwrap().wait_with_output().unwrap()
    }

    /// The environment task `task`'s agent printed in its later round.
    pub fn env_of(&self, task: &str) -> String {
        let mark = format!("ENV.{task} ");
        let lines: Vec<String> = self
            .printed(&mark)
            .iter()
            .map(|l| l[mark.len()..].to_string())
            .collect();
        lines.join("\n")
    }

    /// The lines beginning with `mark` that the run's processes printed.
    fn printed(&self, mark: &str) -> Vec<String> {
        super::printed(&self.repo.join(".git/plait/runs"), mark)
    }
}

impl Drop for Going {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            self.release();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
