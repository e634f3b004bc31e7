//! The status's table of tasks: one row per task (state, rounds, time, the models it used
//! and what they cost, a note on what it waits for or why it ended), grouped under their
//! groups in a grouped run; under a task run as attempts, a row per attempt (`  a~2`),
//! noting the chosen one and how the others ended; under a task (or attempt) people told
//! something while it ran, a line per message (`told`).

use std::fmt::Write as _;

use super::usage::{cost, seconds, tokens};
use plait_core::state::{RunState, TaskRecord, TaskState, Usage};

/// The table's header line and a row per task, under their groups in a grouped run.
pub(super) fn task_table(out: &mut String, state: &RunState) {
    let conflicted: Vec<&str> = state
        .merge
        .iter()
        .flat_map(|m| m.excluded.iter().map(String::as_str))
        .collect();
    let waiting: Vec<&str> = state
        .merge
        .iter()
        .flat_map(|m| m.waiting.iter().map(String::as_str))
        .collect();
    let indent = if state.groups.is_empty() { 0 } else { 2 };
    let width = state
        .tasks
        .iter()
        .map(|t| t.id.len() + indent)
        .chain(
            state
                .tasks
                .iter()
                .flat_map(|t| &t.attempts)
                .map(|a| a.id.len() + indent + ATTEMPT_INDENT),
        )
        .chain(state.groups.iter().map(|g| g.id.len()))
        .max()
        .unwrap_or(4)
        .max(4);
    let models = if records(state).any(|t| t.usage.as_ref().is_some_and(cached)) {
        Models::Cached
    } else if records(state).any(|t| t.usage.is_some()) {
        Models::Plain
    } else {
        Models::None
    };
    let mut model_header = match models {
        Models::None => String::new(),
        Models::Plain => format!("  {:>8}  {:>8}", "TOKENS", "COST"),
        Models::Cached => format!("  {:>8}  {:>8}  {:>6}", "TOKENS", "COST", "CACHED"),
    };
    let runs = records(state).any(|t| t.usage.as_ref().is_some_and(|u| u.runs > 0));
    if runs {
        let _ = write!(model_header, "  {:>10}", "RUNS");
    }
    // What each task comes after, when any task of the run does.
    let waits = state
        .tasks
        .iter()
        .map(|t| t.after.join(",").chars().count().min(WAITS_WIDTH))
        .max()
        .filter(|&w| w > 0)
        .map(|w| w.max("WAITS".len()));
    if let Some(w) = waits {
        let _ = write!(model_header, "  {:<w$}", "WAITS");
    }
    let _ = writeln!(
        out,
        "\n{:<width$}  {:<10}  {:>5}  {:>5}  {:>7}{model_header}  NOTE",
        "TASK", "STATE", "FILES", "VIOL", "TIME"
    );
    let columns = (models, runs, waits);
    let rows: Vec<(&str, Vec<String>)> = state
        .tasks
        .iter()
        .map(|task| {
            let note = task_note(state, task, (&conflicted, &waiting));
            let mut lines = vec![task_row(task, note, columns, width - indent)];
            lines.extend(super::told::status_lines(task, TOLD_INDENT));
            // Its attempts under it, indented: the chosen one says so, the others how
            // they ended.
            for (attempt, n) in task.attempts.iter().zip(1..) {
                let note = super::attempts::attempt_note(task, n);
                let w = width - indent - ATTEMPT_INDENT;
                let row = task_row(attempt, note, columns, w);
                lines.push(format!("{:ATTEMPT_INDENT$}{row}", ""));
                lines.extend(super::told::status_lines(
                    attempt,
                    ATTEMPT_INDENT + TOLD_INDENT,
                ));
            }
            (task.id.as_str(), lines)
        })
        .collect();
    write_rows(out, state, &rows, width);
}

/// How far an attempt's row is indented under its task's.
const ATTEMPT_INDENT: usize = 2;

/// How far the lines of what a task was told are indented under its row.
const TOLD_INDENT: usize = 4;

/// Every task's record and every attempt's.
fn records(state: &RunState) -> impl Iterator<Item = &TaskRecord> {
    state.tasks.iter().flat_map(TaskRecord::with_attempts)
}

/// The task rows (each with its attempts' under it), flat, or under their groups' lines in
/// a grouped run.
fn write_rows(out: &mut String, state: &RunState, rows: &[(&str, Vec<String>)], width: usize) {
    if state.groups.is_empty() {
        for row in rows.iter().flat_map(|(_, lines)| lines) {
            let _ = writeln!(out, "{row}");
        }
        return;
    }
    for group in &state.groups {
        let _ = writeln!(out, "{:<width$}  {}", group.id, group_note(group));
        for id in &group.tasks {
            if let Some((_, lines)) = rows.iter().find(|(t, _)| t == id) {
                for row in lines {
                    let _ = writeln!(out, "  {row}");
                }
            }
        }
    }
}

/// One line about a supervisor group: its merge, its review, whether it went up.
fn group_note(group: &plait_core::state::GroupRecord) -> String {
    let Some(merge) = &group.merge else {
        return format!("{} task(s), not merged yet", group.tasks.len());
    };
    let mut note = format!(
        "{} of {} task(s) merged into {}",
        merge.included.len(),
        group.tasks.len(),
        group.branch
    );
    if !merge.conflicts.is_empty() {
        let _ = write!(
            note,
            " · {} conflict(s) inside, left out: {}",
            merge.conflicts.len(),
            merge.excluded.join(", ")
        );
    }
    let review = match (&group.decision, &group.review) {
        (Some(d), _) => format!("person: {}", d.verdict.as_str()),
        (None, Some(r)) => format!("supervisor: {}", r.verdict.as_str()),
        (None, None) if !group.supervised => "no supervisor".to_string(),
        (None, None) => "not reviewed".to_string(),
    };
    let _ = write!(note, " · {review}");
    if merge.included.is_empty() {
        note.push_str(" · nothing to merge");
    } else if !group.merged_up {
        note.push_str(" · left out of the merge");
    }
    note
}

/// Which model columns the task table has.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Models {
    None,
    /// TOKENS and COST.
    Plain,
    /// TOKENS, COST and CACHED (the share of the input read from the prompt cache).
    Cached,
}

/// Whether a task's model wrote or read the prompt cache.
fn cached(u: &Usage) -> bool {
    u.cache_creation_input_tokens + u.cache_read_input_tokens > 0
}

/// One task's row of the table, its id padded to `width`, ending in `note`; `columns` says
/// which model columns the table has, whether it has RUNS, and WAITS's width.
fn task_row(
    task: &TaskRecord,
    note: String,
    columns: (Models, bool, Option<usize>),
    width: usize,
) -> String {
    let (models, runs, waits) = columns;
    let mut cells = model_cells(task.usage.as_ref(), models);
    if runs {
        let used = task.usage.as_ref().filter(|u| u.runs > 0);
        let cell = used.map_or("-".to_string(), |u| {
            format!("{} ({})", u.runs, seconds(u.run_ms))
        });
        let _ = write!(cells, "  {cell:>10}");
    }
    if let Some(w) = waits {
        // An attempt waits for what its task waits for: said once, on the task's row.
        let attempt = plait_core::state::split_attempt_id(&task.id).is_some();
        let mut after = if attempt {
            String::new()
        } else {
            task.after.join(",")
        };
        if after.chars().count() > w {
            after = after.chars().take(w.saturating_sub(1)).collect::<String>() + "…";
        }
        let _ = write!(cells, "  {after:<w$}");
    }
    let row = format!(
        "{:<width$}  {:<10}  {:>5}  {:>5}  {:>7}{}  {}",
        task.id,
        task.state.as_str(),
        task.changes.len(),
        task.violations.len(),
        task.elapsed_ms()
            .map(seconds)
            .unwrap_or_else(|| "-".to_string()),
        cells,
        note,
    );
    row.trim_end().to_string()
}

/// The widest WAITS cell; longer lists are cut short.
const WAITS_WIDTH: usize = 24;

/// The NOTE cell of a task's row: why it was left out, that it changed nothing, its
/// verdict, or its error (a stopped task's: why it was stopped).
fn task_note(
    state: &RunState,
    task: &TaskRecord,
    (conflicted, waiting): (&[&str], &[&str]),
) -> String {
    let mut note = task.error.clone().unwrap_or_default();
    if waiting.contains(&task.id.as_str()) {
        note = format!(
            "left out of the merge: {}",
            crate::land::waiting_cause(state, task)
        );
    } else if conflicted.contains(&task.id.as_str()) {
        note = "conflict: left out of the merge".to_string();
    } else if task.state == TaskState::Pending && !task.after.is_empty() {
        note = format!("waits for {}", task.after.join(", "));
    } else if task.unchanged() {
        note = "no changes: the agent changed nothing".to_string();
    } else if let (Some(reason), None) = (&task.nothing_to_do, &task.commit) {
        note = format!("nothing to do: {reason}");
    } else if task.state == TaskState::Done && task.commit.is_none() {
        note = "no changes".to_string();
    } else if let Some(verdict) = task.verdict().filter(|_| task.state != TaskState::Stopped) {
        // A stopped task keeps its reason (a person's stop is also its rejection).
        let by = if task.decision.is_some() {
            "person"
        } else {
            "review"
        };
        note = format!("{by}: {}", verdict.as_str());
        if task.rounds > 0 {
            let _ = write!(note, " after {} round(s)", task.rounds);
        }
    }
    note
}

/// The TOKENS, COST and CACHED cells of a task's row, as the table has them.
fn model_cells(usage: Option<&Usage>, models: Models) -> String {
    let mut cells = match (models, usage) {
        (Models::None, _) => return String::new(),
        (_, Some(u)) => format!(
            "  {:>8}  {:>8}",
            format!(
                "{}{}",
                if u.estimated { "≈" } else { "" },
                tokens(
                    u.input_tokens
                        + u.output_tokens
                        + u.cache_creation_input_tokens
                        + u.cache_read_input_tokens
                )
            ),
            cost(u.cost_usd)
        ),
        (_, None) => format!("  {:>8}  {:>8}", "-", "-"),
    };
    if models == Models::Cached {
        let share = usage.and_then(|u| {
            let input = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
            (input > 0).then(|| format!("{}%", u.cache_read_input_tokens * 100 / input))
        });
        let _ = write!(cells, "  {:>6}", share.as_deref().unwrap_or("-"));
    }
    cells
}
