//! Why a failed task failed, where the user looks: its one-line error ("command exited with
//! status 1") rarely says the cause, and the agent's own last words usually do. `plait
//! status`, `plait review` and `status --json` show the last lines of the task's agent log
//! and the log's path. A failure in a project whose dependencies the views lack (an ignored
//! `node_modules/` the plan's `[setup]` does not share) gets a hint saying so.

use std::fmt::Write as _;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::state::{RunState, TaskRecord, TaskState};

/// How many of the log's last non-empty lines a failure shows.
pub const TAIL_LINES: usize = 5;

/// How much of the end of a log is read for its last lines.
const TAIL_BYTES: u64 = 64 * 1024;

/// Characters of one log line shown; a longer line is cut, saying so.
const LINE_CHARS: usize = 400;

/// A failed task's cause as `plait status --json` lists it (`failures`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub task: String,
    /// The task's one-line error.
    pub error: String,
    /// Its agent log.
    pub log: PathBuf,
    /// The log's last non-empty lines, oldest first.
    pub tail: Vec<String>,
}

/// The failed tasks of `state`, each with its error and the last lines of its log.
pub fn failures(state: &RunState) -> Vec<Failure> {
    state
        .tasks
        .iter()
        .filter(|t| t.state == TaskState::Failed)
        .map(failure)
        .collect()
}

/// One failed task's cause.
pub fn failure(task: &TaskRecord) -> Failure {
    Failure {
        task: task.id.clone(),
        error: task.error.clone().unwrap_or_default(),
        log: task.log.clone(),
        tail: log_tail(&task.log, TAIL_LINES),
    }
}

/// The last `n` non-empty lines of the file at `path` (read from its last 64 KiB), oldest
/// first; empty when it does not exist or holds nothing but blank lines.
pub fn log_tail(path: &Path, n: usize) -> Vec<String> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let skipped = len.saturating_sub(TAIL_BYTES);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(skipped)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text
        .lines()
        // The first line read may be the end of a longer one.
        .skip(usize::from(skipped > 0))
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| cut(l))
        .collect()
}

/// `line`, cut to [`LINE_CHARS`] characters.
fn cut(line: &str) -> String {
    match line.char_indices().nth(LINE_CHARS) {
        Some((at, _)) => format!("{} [… cut]", &line[..at]),
        None => line.to_string(),
    }
}

/// Whether a command of the run failed, which a dependency missing from the views could
/// explain: a task's agent or one of its checks, or a merged check.
pub fn commands_failed(state: &RunState) -> bool {
    state
        .tasks
        .iter()
        .any(|t| t.state == TaskState::Failed || t.checks.iter().any(|c| !c.passed))
        || state.merged_checks.iter().any(|c| !c.passed)
}

/// What to add under the failures of the run of `state`, run from the checkout at
/// `workdir` with the plan kept at `kept` (the run's `plan.toml`): the dependency
/// directories of the checkout its `[setup]` leaves out, and how to share or install them
/// ([`crate::plan::missing_setup_hint`]). `None` when no command failed, or the setup
/// leaves nothing out.
pub fn setup_hint(state: &RunState, workdir: &Path, kept: &Path) -> Option<String> {
    if !commands_failed(state) {
        return None;
    }
    let text = std::fs::read_to_string(kept).ok()?;
    let plan = crate::plan::parse(&text, kept).ok()?;
    crate::plan::missing_setup_hint(workdir, &crate::plan::SetupSettings::written(&plan.setup))
}

/// A failed task's part of `plait status`: its error, then its log's path and last lines.
pub(super) fn status_lines(out: &mut String, run: &str, task: &TaskRecord) {
    if task.state != TaskState::Failed {
        return;
    }
    let failure = failure(task);
    let _ = writeln!(out, "\n{} failed: {}", failure.task, failure.error);
    tail_lines(out, run, &failure, "  ");
}

/// A failed task's log in `plait review`, under its `error:` line.
pub(super) fn review_lines(out: &mut String, run: &str, task: &TaskRecord) {
    if task.state != TaskState::Failed {
        return;
    }
    tail_lines(out, run, &failure(task), "");
}

/// The log's path (and the command that prints all of it), then its last lines indented.
fn tail_lines(out: &mut String, run: &str, failure: &Failure, indent: &str) {
    let all = format!("plait log {run} {}", failure.task);
    let log = failure.log.display();
    if !failure.log.is_file() {
        let _ = writeln!(out, "{indent}log {log} is not on this machine");
        return;
    }
    if failure.tail.is_empty() {
        let transcript = crate::state::TaskDir::of_log(&failure.log).transcript();
        let _ = if transcript.is_file() {
            writeln!(
                out,
                "{indent}log {log} is empty; the model's conversation: {all} --transcript"
            )
        } else {
            writeln!(out, "{indent}log {log} is empty")
        };
        return;
    }
    let _ = writeln!(out, "{indent}log {log} (all of it: {all}), its last lines:");
    for line in &failure.tail {
        let _ = writeln!(out, "{indent}    {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_last_non_empty_lines_and_long_ones_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent.log");
        assert!(log_tail(&log, 5).is_empty());
        let long = "x".repeat(LINE_CHARS + 10);
        std::fs::write(&log, format!("one\ntwo\n\n  \nthree  \n{long}\n\n")).unwrap();
        let tail = log_tail(&log, 3);
        assert_eq!(tail[..2], ["two".to_string(), "three".to_string()]);
        assert_eq!(tail[2], format!("{} [… cut]", "x".repeat(LINE_CHARS)));
    }

    #[test]
    fn a_large_log_is_read_from_its_end_only() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent.log");
        let mut text = "filler line\n".repeat(20_000);
        text.push_str("Error: file `` does not exist\n");
        std::fs::write(&log, text).unwrap();
        assert_eq!(
            log_tail(&log, 2),
            ["filler line", "Error: file `` does not exist"]
        );
    }
}
