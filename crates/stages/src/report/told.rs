//! What people told a running task's agent (`plait tell`, the page), as people read it
//! afterwards: each message with where it came from, how it reaches the agent and whether
//! the agent has heard it (the status's lines under the task, `plait review`, the page).
//! One wording for every surface.

use std::fmt::Write as _;

use super::usage::seconds;
use plait_core::state::{TaskRecord, Told};

/// Whether `told`'s agent heard it: `heard 0.4s after` (after it was told), `waiting`,
/// or, for a task that ended first, `not heard: the task ended first`.
pub fn heard_note(task: &TaskRecord, told: &Told) -> String {
    match told.heard_at {
        Some(at) => format!("heard {} after", seconds(at.saturating_sub(told.at))),
        None if task.state.is_final() => "not heard: the task ended first".to_string(),
        None => "waiting".to_string(),
    }
}

/// A message's head, `told (page, next turn, heard 0.4s after)`, for the message
/// `told` of `task`; `to` names whom it was told (`a~2`), or is empty.
fn head(task: &TaskRecord, told: &Told, to: &str) -> String {
    let to = if to.is_empty() {
        String::new()
    } else {
        format!(" {to}")
    };
    format!(
        "told{to} ({}, {}, {})",
        told.by,
        told.way,
        heard_note(task, told)
    )
}

/// The status's lines under a task's (or an attempt's) row, indented by `indent`: a line
/// per message, its first line only.
pub(super) fn status_lines(task: &TaskRecord, indent: usize) -> Vec<String> {
    task.told
        .iter()
        .map(|told| {
            let mut lines = told.text.lines();
            let first = lines.next().unwrap_or("");
            let more = if lines.next().is_some() { " …" } else { "" };
            format!("{:indent$}{}: {first}{more}", "", head(task, told, ""))
        })
        .collect()
}

/// The lines `plait review` shows of what people told a task and its attempts (an
/// attempt's named), oldest first, each message whole.
pub(super) fn review_lines(out: &mut String, task: &TaskRecord) {
    for record in task.with_attempts() {
        for told in &record.told {
            let to = if record.id == task.id { "" } else { &record.id };
            let head = head(record, told, to);
            let text = told.text.trim_end().replace('\n', "\n  ");
            let _ = writeln!(out, "{head}: {text}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plait_core::state::TaskState;

    fn told(text: &str, way: &str, heard_at: Option<u64>) -> Told {
        Told {
            text: text.into(),
            by: "page".into(),
            at: 1_000,
            round: 0,
            way: way.into(),
            heard_at,
        }
    }

    fn task() -> TaskRecord {
        let mut task = TaskRecord::pending("r1", "a", "/w/a".into(), 1, "/l".into());
        task.state = TaskState::Running;
        task.told = vec![
            told("Use the Money type", "next turn", Some(1_400)),
            told("Keep the old tokenizer\nand its tests", "next round", None),
        ];
        task
    }

    #[test]
    fn the_status_says_each_message_in_a_line_and_whether_it_was_heard() {
        assert_eq!(
            status_lines(&task(), 2),
            [
                "  told (page, next turn, heard 0.4s after): Use the Money type",
                "  told (page, next round, waiting): Keep the old tokenizer …",
            ]
        );
        let mut ended = task();
        ended.state = TaskState::Stopped;
        assert_eq!(
            heard_note(&ended, &ended.told[1]),
            "not heard: the task ended first"
        );
    }

    #[test]
    fn review_shows_each_message_whole_and_names_an_attempt() {
        let mut task = task();
        let mut attempt = task.attempt("r1", 2, "/w/a~2".into(), "/l".into());
        attempt.state = TaskState::Running;
        attempt.told = vec![told("Only the parser", "next turn", None)];
        task.told.truncate(1);
        task.attempts = vec![attempt];
        let mut out = String::new();
        review_lines(&mut out, &task);
        assert_eq!(
            out,
            "told (page, next turn, heard 0.4s after): Use the Money type\n\
             told a~2 (page, next turn, waiting): Only the parser\n"
        );
        task.attempts[0].told[0].text = "two\nlines".into();
        let mut out = String::new();
        review_lines(&mut out, &task);
        assert!(out.ends_with(": two\n  lines\n"), "{out}");
    }
}
