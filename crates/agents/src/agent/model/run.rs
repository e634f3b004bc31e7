//! The model agent's `run` tool: a shell command line run in the task's whole-tree view
//! (the repository root, every file of the base with the task's edits), inside the task's
//! walls, with its standard input `/dev/null`. Its output (standard output and error
//! together) goes to a log of plait's own, one per command (`runs/<round>-<n>.log` in the
//! task's directory, where the agent cannot write); the model reads the exit status and
//! the output's tail, with a note of what was cut. A command is bounded by its
//! `timeout_s`, by [`MAX_TIMEOUT`] and by what is left of the round's time; one that
//! prints more than [`MAX_OUTPUT`] is stopped. Which command lines may run at all is the
//! plan's `[tools] run`. Like the file tools it never fails the task: every end of a
//! command is a result the model reads.

use std::fmt::Write as _;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::tools::ToolOutcome;
use crate::agent::context::TaskContext;
use crate::agent::exec::task_env;
use plait_core::cancel::Cancel;
use plait_core::state::TaskDir;
use plait_llm::conversation::ToolSpec;
use plait_plan::tools::RunCommands;
use plait_sandbox::shell::{self, Launch, ShellOutcome};

/// The tool's name.
pub const RUN: &str = "run";

/// How long a command may run when the model does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The most a model may ask for one command.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(1800);

/// A command that prints more than this is stopped; its log keeps what it printed.
pub const MAX_OUTPUT: u64 = 64 * 1024 * 1024;

/// The most of a command's output the model reads back: its last bytes.
const TAIL: u64 = 12 * 1024;

/// How often a running command's log is measured against [`MAX_OUTPUT`].
const MEASURE_EVERY: Duration = Duration::from_millis(200);

/// The tool as the model is offered it; the schema names the commands `allowed` when the
/// plan limits them.
pub fn spec(allowed: &RunCommands) -> ToolSpec {
    let command = match allowed {
        RunCommands::Only { .. } => format!(
            "A shell command line (sh -c). Only lines matching one of these may run \
             (`*` matches anything): {}",
            allowed.describe()
        ),
        _ => "A shell command line (sh -c), such as `cargo test` or `make check`".to_string(),
    };
    ToolSpec {
        name: RUN,
        description: "Run a shell command line (sh -c) in the repository root, where every \
            file of the repository is present with this task's edits in place: build, run \
            the tests, try things out. It runs inside this task's walls: it may write only \
            this worktree and a private TMPDIR, and changes it makes to files this task does \
            not own are not kept. No terminal: stdin is /dev/null, so nothing may ask \
            questions; pass flags that keep programs from prompting or paging. The result \
            is the exit status and the last 12 KB of stdout and stderr together (the whole \
            output is kept in a log whose path is given when it is cut). `timeout_s` \
            defaults to 300 and may be at most 1800, never beyond the task's own time left; \
            a command that prints more than 64 MiB is stopped.",
        schema: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": command},
                "timeout_s": {"type": "number", "description": "Seconds the command may run (default 300, at most 1800)"}
            },
            "required": ["command"]
        }),
    }
}

/// What running a command cost, for the task's usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    /// How long the command ran.
    pub elapsed: Duration,
}

/// Runs the `run` call `input` of task `task` as its `n`th command of the round, until
/// `deadline` at the latest; the result, and what it cost when a command started.
pub async fn run(
    task: &TaskContext,
    allowed: &RunCommands,
    input: &Value,
    n: u32,
    deadline: tokio::time::Instant,
) -> (ToolOutcome, Option<Ran>) {
    let request = match Request::read(input, allowed, deadline) {
        Ok(r) => r,
        Err(why) => return (ToolOutcome::error(why), None),
    };
    if task.cancel.is_cancelled() {
        return (ToolOutcome::error("interrupted: the run is stopping"), None);
    }
    if let Err(why) = task.view.ensure().await {
        return (
            ToolOutcome::error(format!(
                "the task's view of the repository is not ready: {why}"
            )),
            None,
        );
    }
    let log = match log_path(task, n) {
        Ok(log) => log,
        Err(why) => return (ToolOutcome::error(why), None),
    };
    let started = Instant::now();
    let (outcome, too_long) = run_bounded(task, &request, &log).await;
    let elapsed = started.elapsed();
    let ended = Ended {
        outcome,
        too_long,
        timeout: request.timeout,
        bounded_by_task: request.bounded_by_task,
        elapsed,
    };
    (ended.result(&request.command, &log), Some(Ran { elapsed }))
}

/// A `run` call's input, checked.
struct Request {
    command: String,
    timeout: Duration,
    /// The timeout is what is left of the task's time, shorter than asked.
    bounded_by_task: bool,
}

impl Request {
    fn read(
        input: &Value,
        allowed: &RunCommands,
        deadline: tokio::time::Instant,
    ) -> Result<Request, String> {
        let Some(command) = input.get("command").and_then(Value::as_str) else {
            return Err("`command` is missing: give a shell command line".to_string());
        };
        if command.trim().is_empty() {
            return Err("`command` is empty".to_string());
        }
        if !allowed.allows(command) {
            return Err(format!(
                "`{command}` may not run here: this plan lets the `run` tool run only command \
                 lines matching {} (`*` matches anything)",
                allowed.describe()
            ));
        }
        let asked = match input.get("timeout_s") {
            None | Some(Value::Null) => DEFAULT_TIMEOUT,
            Some(v) => match v.as_f64() {
                Some(s) if s > 0.0 && s.is_finite() => {
                    Duration::from_secs_f64(s.min(MAX_TIMEOUT.as_secs_f64()))
                }
                _ => return Err(format!("`timeout_s` must be a positive number, not {v}")),
            },
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left < Duration::from_secs(1) {
            return Err("no time is left in this task's budget to run a command".to_string());
        }
        Ok(Request {
            command: command.to_string(),
            timeout: asked.min(left),
            bounded_by_task: left < asked,
        })
    }
}

/// The log of the round's `n`th command, in the task's `runs/` (made here, new and empty).
fn log_path(task: &TaskContext, n: u32) -> Result<PathBuf, String> {
    let dir = TaskDir(task.dir().to_path_buf()).runs();
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot make the directory {}: {e}", dir.display()))?;
    let log = dir.join(format!("{}-{n}.log", task.round));
    std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    Ok(log)
}

/// Runs the command into `log`, stopped on the run's interrupt or once its log outgrows
/// [`MAX_OUTPUT`]; how it ended, and whether it was stopped for its output.
async fn run_bounded(task: &TaskContext, request: &Request, log: &Path) -> (ShellOutcome, bool) {
    let env = task_env(task);
    let (fire, cancel) = Cancel::new();
    let launch = Launch {
        dir: &task.worktree,
        env: &env,
        log,
        timeout: request.timeout,
        cancel: &cancel,
        sandbox: &task.sandbox,
    };
    let command = shell::run(&request.command, &launch);
    tokio::pin!(command);
    let too_long = tokio::select! {
        outcome = &mut command => return (outcome, false),
        _ = task.cancel.cancelled() => false,
        _ = outgrown(log) => true,
    };
    let _ = fire.send(true);
    (command.await, too_long)
}

/// Waits until `log` holds more than [`MAX_OUTPUT`] bytes.
async fn outgrown(log: &Path) {
    let mut every = tokio::time::interval(MEASURE_EVERY);
    loop {
        every.tick().await;
        if std::fs::metadata(log).is_ok_and(|m| m.len() > MAX_OUTPUT) {
            return;
        }
    }
}

/// How a command ended, with what bounded it.
struct Ended {
    outcome: ShellOutcome,
    /// Stopped for printing more than [`MAX_OUTPUT`].
    too_long: bool,
    timeout: Duration,
    bounded_by_task: bool,
    elapsed: Duration,
}

impl Ended {
    /// The tool result: how the command ended, then its output's tail and what was cut.
    fn result(&self, command: &str, log: &Path) -> ToolOutcome {
        let (status, is_error) = self.status();
        let mut content = format!(
            "$ {command}\n{status} after {:.1} s\n",
            self.elapsed.as_secs_f64()
        );
        content.push_str(&output_tail(log));
        ToolOutcome {
            content,
            is_error,
            refused_write: false,
        }
    }

    /// The status line, and whether the command did not end by itself.
    fn status(&self) -> (String, bool) {
        let timeout = humantime::format_duration(Duration::from_secs(self.timeout.as_secs()));
        match &self.outcome {
            ShellOutcome::Exited(code) => (format!("exit status {code}"), false),
            _ if self.too_long => (
                format!(
                    "stopped: it printed more than {} MiB (its process group was killed)",
                    MAX_OUTPUT / (1024 * 1024)
                ),
                true,
            ),
            ShellOutcome::TimedOut if self.bounded_by_task => (
                format!(
                    "timed out after {timeout}, all the time this task had left (its process \
                     group was killed)"
                ),
                true,
            ),
            ShellOutcome::TimedOut => (
                format!(
                    "timed out after {timeout} (its process group was killed); give a larger \
                     `timeout_s` (at most {} s) or run less",
                    MAX_TIMEOUT.as_secs()
                ),
                true,
            ),
            ShellOutcome::Signalled => ("killed by a signal".to_string(), true),
            ShellOutcome::Interrupted => ("interrupted: the run is stopping".to_string(), true),
            ShellOutcome::NotStarted(why) => (format!("not started: {why}"), true),
            ShellOutcome::OverLimit(code, limit) => {
                let ended = code.map_or_else(
                    || "killed by a signal".to_string(),
                    |c| format!("exit status {c}"),
                );
                (format!("{ended}: {limit}"), false)
            }
        }
    }
}

/// The last [`TAIL`] bytes of `log` from a line's start, with a line saying how much was
/// cut before them and where the whole output is; "(no output)" for none.
fn output_tail(log: &Path) -> String {
    let Ok(mut file) = std::fs::File::open(log) else {
        return format!("(its output could not be read from {})\n", log.display());
    };
    let len = file.metadata().map_or(0, |m| m.len());
    if len == 0 {
        return "(no output)\n".to_string();
    }
    let from = len.saturating_sub(TAIL);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_ok() {
        let _ = file.take(TAIL).read_to_end(&mut bytes);
    }
    let mut cut = from;
    if from > 0 {
        // Start at a line's beginning when a line ends in the tail.
        if let Some(i) = bytes.iter().position(|&b| b == b'\n') {
            if i + 1 < bytes.len() {
                bytes.drain(..=i);
                cut += i as u64 + 1;
            }
        }
    }
    let mut out = String::new();
    if cut > 0 {
        let _ = writeln!(
            out,
            "... {} cut; the whole output is in {}",
            size(cut),
            log.display()
        );
    }
    out.push_str(&String::from_utf8_lossy(&bytes));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Bytes for a person: `812 bytes`, `4.1 KB`, `1.2 MB`.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.1} KB", b as f64 / 1e3),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadline(secs: u64) -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_secs(secs)
    }

    #[tokio::test]
    async fn the_timeout_is_bounded_by_the_most_and_the_time_left() {
        let any = RunCommands::Any;
        let read = |input: Value, left: u64| Request::read(&input, &any, deadline(left));
        let r = read(json!({"command": "make"}), 3600).unwrap();
        assert_eq!((r.timeout, r.bounded_by_task), (DEFAULT_TIMEOUT, false));
        let r = read(json!({"command": "make", "timeout_s": 99999}), 3600).unwrap();
        assert_eq!(r.timeout, MAX_TIMEOUT);
        let r = read(json!({"command": "make", "timeout_s": 600}), 60).unwrap();
        assert!(r.bounded_by_task && r.timeout <= Duration::from_secs(60));
        assert!(read(json!({"command": "make", "timeout_s": -1}), 60).is_err());
        assert!(read(json!({"command": " "}), 60).is_err());
        let late = read(json!({"command": "make"}), 0).err().unwrap();
        assert!(late.contains("no time is left"), "{late}");
    }

    #[test]
    fn a_long_output_is_cut_at_a_line_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0-1.log");
        let mut text = String::new();
        for i in 0..100_000 {
            let _ = writeln!(text, "line {i}");
        }
        std::fs::write(&log, &text).unwrap();
        let tail = output_tail(&log);
        let first = tail.lines().next().unwrap();
        assert!(first.starts_with("... ") && first.contains(" MB cut; the whole output is in "));
        assert!(tail.lines().nth(1).unwrap().starts_with("line "), "{tail}");
        assert!(tail.ends_with("line 99999\n"));
        assert!(tail.len() < TAIL as usize + 200);
        std::fs::write(&log, "").unwrap();
        assert_eq!(output_tail(&log), "(no output)\n");
    }
}
