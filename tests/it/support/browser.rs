//! The page in headless Chromium, driven by `tests/browser/drive.mjs` (playwright-core);
//! without node, playwright-core or Chromium the test says it is skipped.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

use super::{project_root, skip, stderr};

/// Node, playwright-core and Chromium, when this machine has them.
pub struct Browser {
    playwright: PathBuf,
    chromium: PathBuf,
}

impl Browser {
    pub fn find() -> Option<Browser> {
        let playwright = std::env::var_os("PLAIT_TEST_PLAYWRIGHT")
            .map(PathBuf::from)
            .unwrap_or_else(|| project_root().join("target/ci-tools"));
        let chromium = std::env::var_os("PLAIT_TEST_CHROMIUM")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
        let node = Command::new("node").arg("--version").output();
        let missing = if !node.is_ok_and(|o| o.status.success()) {
            Some("node is not on PATH")
        } else if !playwright.join("node_modules/playwright-core").is_dir() {
            Some("playwright-core is not installed (set PLAIT_TEST_PLAYWRIGHT, or `npm install --prefix target/ci-tools playwright-core`)")
        } else if !chromium.exists() {
            Some("Chromium is not installed (set PLAIT_TEST_CHROMIUM, or install Debian's `chromium`)")
        } else {
            None
        };
        if let Some(why) = missing {
            skip(why);
            return None;
        }
        Some(Browser {
            playwright,
            chromium,
        })
    }

    /// Starts a script of steps (see drive.mjs); its output is read line by line.
    pub fn start(&self, script: Value, dir: &std::path::Path) -> Drive {
        self.start_with(script, dir, &[])
    }

    /// [`start`](Self::start) with more flags for Chromium.
    pub fn start_with(&self, script: Value, dir: &std::path::Path, flags: &[&str]) -> Drive {
        let path = dir.join(format!("script-{}.json", rand_suffix()));
        std::fs::write(&path, script.to_string()).unwrap();
        let mut child = Command::new("node")
            .arg(project_root().join("tests/browser/drive.mjs"))
            .arg(&path)
            .env("PLAIT_TEST_PLAYWRIGHT", &self.playwright)
            .env("PLAIT_TEST_CHROMIUM", &self.chromium)
            .env("PLAIT_TEST_CHROMIUM_ARGS", flags.join("\n"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start node");
        let lines = BufReader::new(child.stdout.take().unwrap());
        Drive { child, lines }
    }

    /// Runs a script to its end; each step's output.
    pub fn run(&self, script: Value, dir: &std::path::Path) -> Vec<Value> {
        self.run_allowing(script, dir, &[], &[])
    }

    /// [`run`](Self::run) with more flags for Chromium, letting the page's console
    /// report the errors that contain one of `expected`.
    pub fn run_allowing(
        &self,
        script: Value,
        dir: &std::path::Path,
        flags: &[&str],
        expected: &[&str],
    ) -> Vec<Value> {
        let mut drive = self.start_with(script, dir, flags);
        let mut out = Vec::new();
        while let Some(line) = drive.next() {
            out.push(line);
        }
        drive.finish_allowing(&out, expected);
        out
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A script running in the browser.
pub struct Drive {
    child: Child,
    lines: BufReader<ChildStdout>,
}

impl Drive {
    /// The next step's output, `None` at the end.
    pub fn next(&mut self) -> Option<Value> {
        let mut line = String::new();
        if self.lines.read_line(&mut line).ok()? == 0 {
            return None;
        }
        Some(serde_json::from_str(&line).unwrap_or(Value::String(line)))
    }

    /// Waits for the script's end: it must have passed every step, with no error in
    /// the page's console.
    pub fn finish(self, seen: &[Value]) {
        self.finish_allowing(seen, &[])
    }

    /// [`finish`](Self::finish), letting the console report errors that contain one of
    /// `expected`.
    pub fn finish_allowing(self, seen: &[Value], expected: &[&str]) {
        let out = self.child.wait_with_output().unwrap();
        let errors: Vec<&Value> = seen
            .iter()
            .filter(|v| {
                v.get("console_error")
                    .and_then(Value::as_str)
                    .is_some_and(|e| !expected.iter().any(|x| e.contains(x)))
            })
            .collect();
        assert!(
            out.status.success(),
            "the browser script failed: {}\nits steps: {seen:?}",
            stderr(&out)
        );
        assert!(errors.is_empty(), "the page reported errors: {errors:?}");
    }
}

pub fn ready() -> Value {
    json!({"wait_attr": ["body", "data-ready", "true"]})
}

/// Where the tests keep what a person may want to look at after them.
pub fn artifacts() -> PathBuf {
    let dir = project_root().join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
