//! A task's logs as `plait log` prints them: the task checks' logs of every round, each
//! under its command and round, and the model transcript read back as a conversation (as
//! `plait serve` shows it); and reading a growing log from where the last read stopped,
//! for `--follow`.

use std::fmt::Write as _;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use plait_core::state::TaskRecord;
use plait_llm::readable::Entry;

/// One task check's log of one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLog {
    /// The round it judged (`PLAIT_ROUND`: 0 for the first try).
    pub round: u32,
    /// Its place in `[checks] task`, from 1.
    pub index: u32,
    /// The command, as the log's first line (`$ CMD`) says it.
    pub command: String,
    /// The log's file.
    pub path: PathBuf,
}

/// The task checks' logs of `task`, round by round, in the order they ran: the
/// `checks-<round>/check-<n>.log` files of its directory.
pub fn check_logs(task: &TaskRecord) -> Vec<CheckLog> {
    let Some(dir) = task.log.parent() else {
        return Vec::new();
    };
    let mut logs = Vec::new();
    for (round, round_dir) in numbered(dir, plait_core::state::TaskDir::CHECKS_PREFIX, "") {
        for (index, path) in numbered(&round_dir, "check-", ".log") {
            let head = std::fs::read_to_string(&path).unwrap_or_default();
            let first = head.lines().next().unwrap_or("");
            let command = first.strip_prefix("$ ").unwrap_or(first).to_string();
            logs.push(CheckLog {
                round,
                index,
                command,
                path,
            });
        }
    }
    logs
}

/// The entries of `dir` named `<prefix><n><suffix>`, by `n`.
fn numbered(dir: &Path, prefix: &str, suffix: &str) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = name
                .strip_prefix(prefix)?
                .strip_suffix(suffix)?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .collect();
    found.sort();
    found
}

/// Every check log of `task` with a heading each (round, command, and how the check
/// ended), then its output.
pub fn checks_text(task: &TaskRecord) -> String {
    let mut out = String::new();
    let logs = check_logs(task);
    let last = logs.iter().map(|l| l.round).max().unwrap_or(0);
    for log in logs {
        let text = std::fs::read(&log.path).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let verdict = outcome(task, &log, &text, last);
        let _ = writeln!(
            out,
            "== round {} · check {} · `{}` · {verdict} · {}",
            log.round,
            log.index,
            log.command,
            log.path.display()
        );
        // The first line is the command, said in the heading.
        let body = text.split_once('\n').map_or("", |(_, rest)| rest);
        out.push_str(body);
        if !body.is_empty() && !body.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// How the check whose log is `log` (holding `text`) ended. The record keeps the results
/// of the last round's checks only; for a check it does not hold, the log says how it
/// ended when that was not an exit (plait's closing `plait: ...` line: a timeout, a
/// signal), and an exit status is not kept anywhere, so it is not guessed.
fn outcome(task: &TaskRecord, log: &CheckLog, text: &str, last: u32) -> String {
    match task.checks.iter().find(|c| c.log == log.path) {
        Some(c) if c.passed => return "passed".to_string(),
        Some(c) => {
            return match c.exit_code {
                Some(code) => format!("failed (exit {code})"),
                None => "failed".to_string(),
            }
        }
        None => {}
    }
    let said = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| l.strip_prefix("plait: "));
    match said {
        Some(how) => how.to_string(),
        None if log.round == last && !task.state.is_final() => "running".to_string(),
        None => "(outcome not recorded)".to_string(),
    }
}

/// A transcript's conversations as text: each one's heading, then who said what, each tool
/// call with its input and each tool's result.
pub fn transcript_text(entries: &[Entry]) -> String {
    let mut out = String::new();
    let mut round = 0;
    for entry in entries {
        if entry.round != round {
            round = entry.round;
            let _ = writeln!(out, "== conversation {round}");
        }
        let tool = entry.tool.as_deref().unwrap_or("?");
        let heading = match entry.kind {
            "tool_call" => format!("{} calls {tool}", entry.role),
            "tool_result" if entry.error => format!("{tool} answers (error)"),
            "tool_result" => format!("{tool} answers"),
            _ => entry.role.to_string(),
        };
        let _ = writeln!(out, "{heading}:");
        let mut body = entry.text.clone();
        if let Some(input) = &entry.input {
            body = serde_json::to_string_pretty(input).unwrap_or_default();
        }
        for line in body.lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// What a file holds past `offset`, and the offset to read from next time. A multi-byte
/// character cut at the end is left for the next read; a file that shrank (replaced) is
/// read again from its start.
pub fn read_from(path: &Path, offset: u64) -> (String, u64) {
    let Ok(mut file) = std::fs::File::open(path) else {
        return (String::new(), offset);
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let start = if len < offset { 0 } else { offset };
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return (String::new(), offset);
    }
    let whole = match std::str::from_utf8(&bytes) {
        Ok(_) => bytes.len(),
        // An incomplete character at the end waits; invalid bytes are shown as they are.
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => bytes.len(),
    };
    let text = String::from_utf8_lossy(&bytes[..whole]).into_owned();
    (text, start + whole as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plait_core::state::CheckResult;

    #[test]
    fn every_rounds_checks_say_how_they_ended_as_far_as_it_is_known() {
        let dir = tempfile::tempdir().unwrap();
        let mut task = TaskRecord::pending(
            "r",
            "t",
            dir.path().join("wt"),
            1,
            dir.path().join("agent.log"),
        );
        let write = |round: u32, n: u32, text: &str| {
            let sub = dir.path().join(format!("checks-{round}"));
            std::fs::create_dir_all(&sub).unwrap();
            let path = sub.join(format!("check-{n}.log"));
            std::fs::write(&path, text).unwrap();
            path
        };
        write(0, 1, "$ make lint\nbad style\n");
        write(0, 2, "$ make test\n\nplait: timed out after 5s\n");
        let last = write(1, 1, "$ make lint\n");
        let failed = write(1, 2, "$ make test\n1 failed\n");
        let result = |log: PathBuf, passed: bool, exit_code: Option<i32>| CheckResult {
            command: String::new(),
            passed,
            exit_code,
            tail: String::new(),
            log,
            ms: 0,
            refused: Vec::new(),
            at_base: false,
            as_on_base: false,
            beyond_base: Vec::new(),
        };
        task.state = plait_core::state::TaskState::Failed;
        task.rounds = 1;
        task.checks = vec![result(last, true, Some(0)), result(failed, false, Some(1))];
        let headings: Vec<String> = checks_text(&task)
            .lines()
            .filter_map(|l| l.strip_prefix("== "))
            .map(|l| l.rsplit_once(" · ").unwrap().0.to_string())
            .collect();
        assert_eq!(
            headings,
            [
                "round 0 · check 1 · `make lint` · (outcome not recorded)",
                "round 0 · check 2 · `make test` · timed out after 5s",
                "round 1 · check 1 · `make lint` · passed",
                "round 1 · check 2 · `make test` · failed (exit 1)",
            ]
        );
    }

    #[test]
    fn a_growing_log_is_read_on_from_where_it_stopped_and_characters_stay_whole() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent.log");
        assert_eq!(read_from(&log, 0), (String::new(), 0));
        std::fs::write(&log, b"one\nt\xc3").unwrap();
        let (text, at) = read_from(&log, 0);
        assert_eq!((text.as_str(), at), ("one\nt", 5));
        std::fs::write(&log, "one\ntä\n").unwrap();
        assert_eq!(read_from(&log, at), ("ä\n".to_string(), 8));
        std::fs::write(&log, "new\n").unwrap();
        assert_eq!(read_from(&log, 8), ("new\n".to_string(), 4));
    }
}
