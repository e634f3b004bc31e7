//! Why a failed task failed, where the user looks: its one-line error ("command exited with
//! status 1") rarely says the cause, and the log of the step that failed usually does.
//! `plait status`, `plait review` and `status --json` name that step (the agent, or the
//! task check that failed) and show the last lines of the log that holds its cause: the
//! agent's log, a model agent's transcript when its log holds nothing, or the failing
//! check's log. A log is "not on this machine" only for a task that ran on another. A
//! failure in a project whose dependencies the views lack (an ignored `node_modules/` the
//! plan's `[setup]` does not share) gets a hint saying so.

use std::fmt::Write as _;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Serialize;

use plait_core::state::{CheckResult, RunState, TaskDir, TaskRecord, TaskState};

/// How many of the log's last non-empty lines a failure shows.
pub const TAIL_LINES: usize = 5;

/// How much of the end of a log is read for its last lines.
const TAIL_BYTES: u64 = 64 * 1024;

/// Characters of one log line shown; a longer line is cut, saying so.
const LINE_CHARS: usize = 400;

/// A failed task's cause as `plait status --json` lists it (`failures`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub(crate) task: String,
    /// The task's one-line error.
    pub error: String,
    /// The step that failed: `agent`, or `check N: \`COMMAND\`` (N from 1).
    pub step: String,
    /// The log that holds the cause: the agent's log, a model agent's transcript when its
    /// log holds nothing, or the failing check's log.
    pub log: PathBuf,
    /// The command that prints all of it (`plait log RUN TASK [--transcript | --checks]`).
    pub show: String,
    /// Whether the task's logs are on this machine (not when it ran on another).
    pub here: bool,
    /// The log's last non-empty lines, oldest first.
    pub tail: Vec<String>,
}

/// The failed tasks of `state`, each with its error and the last lines of its log.
pub fn failures(state: &RunState) -> Vec<Failure> {
    state
        .tasks
        .iter()
        .filter(|t| t.state == TaskState::Failed)
        .map(|t| failure(&state.id, t))
        .collect()
}

/// One failed task of run `run`: the step that failed and the log that holds its cause.
pub fn failure(run: &str, task: &TaskRecord) -> Failure {
    // A task none of whose attempts passed: the cause is the first failed attempt's; a task
    // that ran nothing itself since its pick: the chosen attempt's.
    let failed_attempt = match (&task.pick, task.chosen()) {
        (None, _) => task
            .attempts
            .iter()
            .zip(1..)
            .find(|(a, _)| a.state == TaskState::Failed),
        (Some(pick), Some(chosen)) if !task.log.exists() => Some((chosen, pick.attempt)),
        _ => None,
    };
    if let Some((attempt, n)) = failed_attempt {
        let inner = failure(run, attempt);
        return Failure {
            task: task.id.clone(),
            error: task.error.clone().unwrap_or_default(),
            step: format!("attempt {n}: {}", inner.step),
            ..inner
        };
    }
    let all = format!("plait log {run} {}", task.id);
    let (step, log, show, tail) = match failing_check(task) {
        Some((n, check)) => (
            format!("check {n}: `{}`", check.command),
            check.log.clone(),
            format!("{all} --checks"),
            tail_of_check(check),
        ),
        None => {
            let tail = log_tail(&task.log, TAIL_LINES);
            let transcript = TaskDir::of_log(&task.log).transcript();
            if tail.is_empty() && transcript.is_file() {
                let text =
                    crate::report::logs::transcript_text(&plait_llm::readable::read(&transcript));
                let tail = last_lines(&text, TAIL_LINES);
                (
                    "agent".to_string(),
                    transcript,
                    format!("{all} --transcript"),
                    tail,
                )
            } else {
                ("agent".to_string(), task.log.clone(), all, tail)
            }
        }
    };
    Failure {
        task: task.id.clone(),
        error: task.error.clone().unwrap_or_default(),
        step,
        log,
        show,
        here: ran_here(task),
        tail,
    }
}

/// The first task check of the task's last round that failed through its work, with its
/// number from 1; `None` when its checks passed, or are of an earlier round than the one
/// whose agent failed.
fn failing_check(task: &TaskRecord) -> Option<(usize, &CheckResult)> {
    let (i, check) = task
        .checks
        .iter()
        .enumerate()
        .find(|(_, c)| c.failed_here())?;
    let round = check
        .log
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix(TaskDir::CHECKS_PREFIX))
        .and_then(|n| n.parse::<u32>().ok());
    // Checks by hand (`checks-by-hand-…`) are the task's last word too.
    if round.is_some_and(|r| r < task.rounds) {
        return None;
    }
    Some((i + 1, check))
}

/// A check's last lines: from its log, or the tail its record keeps when the log is gone.
fn tail_of_check(check: &CheckResult) -> Vec<String> {
    let tail = log_tail(&check.log, TAIL_LINES);
    if tail.is_empty() {
        last_lines(&check.tail, TAIL_LINES)
    } else {
        tail
    }
}

/// Whether task `task` ran on this machine: something it wrote or plait wrote for it as it
/// ran (its log, transcript, scratch, worktree) is here. A task a worker on another machine
/// ran has only its record here.
fn ran_here(task: &TaskRecord) -> bool {
    let dir = TaskDir::of_log(&task.log);
    task.log.exists()
        || dir.transcript().exists()
        || dir.scratch().exists()
        || dir.runs().exists()
        || task.worktree.exists()
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
    // The first line read may be the end of a longer one.
    let text = match text.split_once('\n') {
        Some((_, rest)) if skipped > 0 => rest,
        _ => &text,
    };
    last_lines(text, n)
}

/// The last `n` non-empty lines of `text`, oldest first, each cut to [`LINE_CHARS`].
fn last_lines(text: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = text
        .lines()
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
/// ([`plait_plan::missing_setup_hint`]). `None` when no command failed, or the setup
/// leaves nothing out.
pub fn setup_hint(state: &RunState, workdir: &Path, kept: &Path) -> Option<String> {
    if !commands_failed(state) {
        return None;
    }
    let text = std::fs::read_to_string(kept).ok()?;
    let plan = plait_plan::parse(&text, kept).ok()?;
    plait_plan::missing_setup_hint(workdir, &plait_plan::SetupSettings::written(&plan.setup))
}

/// A failed task's part of `plait status`: its error, then where its cause is and the last
/// lines saying it.
pub(super) fn status_lines(out: &mut String, run: &str, task: &TaskRecord) {
    if task.state != TaskState::Failed {
        return;
    }
    let _ = writeln!(
        out,
        "\n{} failed: {}",
        task.id,
        task.error.as_deref().unwrap_or_default()
    );
    causes(out, run, task, "  ");
}

/// A failed task's cause in `plait review`, under its `error:` line.
pub(super) fn review_lines(out: &mut String, run: &str, task: &TaskRecord) {
    if task.state != TaskState::Failed {
        return;
    }
    causes(out, run, task, "");
}

/// Where a failed task's cause is and its last lines: its own; or, when none of its
/// attempts passed (it ran nothing itself), each failed attempt's under the attempt's id.
fn causes(out: &mut String, run: &str, task: &TaskRecord, indent: &str) {
    if task.attempts.is_empty() || task.pick.is_some() {
        return tail_lines(out, task, &failure(run, task), indent);
    }
    for attempt in task
        .attempts
        .iter()
        .filter(|a| a.state == TaskState::Failed)
    {
        let error = attempt.error.as_deref().unwrap_or("failed");
        let _ = writeln!(out, "{indent}{}: {error}", attempt.id);
        tail_lines(out, attempt, &failure(run, attempt), &format!("{indent}  "));
    }
}

/// Where the cause is (and the command that prints all of it), then its last lines
/// indented.
fn tail_lines(out: &mut String, task: &TaskRecord, failure: &Failure, indent: &str) {
    let log = failure.log.display();
    let show = &failure.show;
    if !failure.here {
        let _ = writeln!(
            out,
            "{indent}log {log} is not on this machine: the task ran on another"
        );
        return;
    }
    if failure.step != "agent" {
        let _ = write!(out, "{indent}{} failed; its log {log}", failure.step);
    } else if failure.log != task.log {
        let empty = if task.log.exists() {
            "is empty"
        } else {
            "was not written"
        };
        let _ = write!(
            out,
            "{indent}log {} {empty}; the model's conversation: {log}",
            task.log.display()
        );
    } else if failure.tail.is_empty() {
        let empty = if failure.log.exists() {
            "is empty"
        } else {
            "was not written"
        };
        let _ = writeln!(out, "{indent}log {log} {empty}");
        return;
    } else {
        let _ = write!(out, "{indent}log {log}");
    }
    if failure.tail.is_empty() {
        let _ = writeln!(out, " (all of it: {show}) holds nothing");
        return;
    }
    let _ = writeln!(out, " (all of it: {show}), its last lines:");
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
