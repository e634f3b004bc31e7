//! What a reviewer saw and said: a task's review (`plait review`: its rounds' checks, the
//! reviewer's verdicts, its attempts when it ran as several, what people told it while it
//! ran, and its own work), a group's
//! supervisor review, and the short summary the page shows.

use std::fmt::Write as _;

use git2::{Oid, Repository};

use super::diff::{diff_text, paint, reset, DiffStyle, BOLD};
use plait_core::git::short;
use plait_core::state::{RunState, TaskRecord, TaskState, Verdict};

/// Task by task: the verdict, the comments, the checks and the diff, for `plait review`;
/// with `only`, just the tasks and groups it names.
pub fn review_text(
    repo: &Repository,
    state: &RunState,
    style: DiffStyle,
    only: Option<&[String]>,
) -> Result<String, git2::Error> {
    let mut out = String::new();
    let base = Oid::from_str(&state.base)?;
    let shown = |id: &str| only.is_none_or(|ids| ids.iter().any(|i| i == id));
    for task in state.tasks.iter().filter(|t| shown(&t.id)) {
        task_review_text(&mut out, repo, (&state.id, base), task, style)?;
    }
    for group in state.groups.iter().filter(|g| shown(&g.id)) {
        group_review_text(&mut out, state, group, style);
    }
    Ok(out)
}

/// A task's part of `plait review`: its line, review, failed checks, error and diff.
fn task_review_text(
    out: &mut String,
    repo: &Repository,
    (run, base): (&str, Oid),
    task: &TaskRecord,
    style: DiffStyle,
) -> Result<(), git2::Error> {
    let verdict = match (task.verdict(), &task.decision) {
        (Some(v), Some(_)) => format!("{} (by a person)", v.as_str()),
        (Some(v), None) => format!(
            "{} (by the {} reviewer)",
            v.as_str(),
            task.review.as_ref().map_or("", |r| r.by.as_str())
        ),
        (None, _) => "not reviewed".to_string(),
    };
    let checks = match checks_reached(task) {
        Reached::Counted(passed, total) => format!("checks {passed}/{total} passed"),
        Reached::None => "no task checks".to_string(),
        Reached::Not => "checks not reached".to_string(),
    };
    let _ = writeln!(
        out,
        "{}== {} · {} · {} · {checks} · {} round(s) of changes{}",
        paint(style, BOLD),
        task.id,
        task.state.as_str(),
        verdict,
        task.rounds,
        reset(style)
    );
    super::attempts::review_lines(out, task);
    if let (Some(reason), None) = (&task.nothing_to_do, &task.commit) {
        let _ = writeln!(out, "nothing to do, its agent said: {reason}");
    }
    if let Some(review) = &task.review {
        let _ = writeln!(out, "summary: {}", review.summary);
        if let Some(note) = &review.note {
            let _ = writeln!(out, "note: {note}");
        }
        for c in &review.comments {
            let place = c.place();
            let _ = writeln!(out, "  - {place}{}", c.body);
        }
    }
    for sent in &task.sent_back {
        let _ = writeln!(
            out,
            "sent back by a person (for round {}): {}",
            sent.round, sent.comment
        );
    }
    super::told::review_lines(out, task);
    for c in task.checks.iter().filter(|c| !c.passed) {
        let _ = writeln!(
            out,
            "check `{}` {} (log: {}):",
            c.command,
            c.failure_word(),
            c.log.display()
        );
        for line in c.tail.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    if let Some(error) = &task.error {
        let _ = writeln!(out, "error: {error}");
    }
    super::failure::review_lines(out, run, task);
    if let Some(Ok(start)) = task.start.as_deref().map(Oid::from_str) {
        let _ = writeln!(
            out,
            "started from {} (the work of {} merged onto the base); its own work:",
            short(&start.to_string()),
            task.start_from
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    match own_work(task, base) {
        Some((from, tip)) => out.push_str(&diff_text(repo, from, tip, style)?),
        None => {
            let _ = writeln!(out, "(no changes)");
        }
    }
    out.push('\n');
    Ok(())
}

/// A task's review when it did not approve: verdict, summary, note, the first comments.
pub(super) fn review_lines(out: &mut String, task: &TaskRecord) {
    let Some(review) = task
        .review
        .as_ref()
        .filter(|r| r.verdict != Verdict::Approve)
    else {
        return;
    };
    let _ = writeln!(
        out,
        "\nreview of {} ({}): {}: {}",
        task.id,
        review.by,
        review.verdict.as_str(),
        review.summary
    );
    if let Some(note) = &review.note {
        let _ = writeln!(out, "  note: {note}");
    }
    for c in review.comments.iter().take(10) {
        let place = c.place();
        let _ = writeln!(out, "  - {place}{}", c.body.lines().next().unwrap_or(""));
    }
}

/// The commits between which a task's own work lies: where its branch started (its
/// `start`, or the run's base) and its commit; `None` when it committed nothing.
fn own_work(task: &TaskRecord, base: Oid) -> Option<(Oid, Oid)> {
    let tip = Oid::from_str(task.commit.as_deref()?).ok()?;
    Some((start_of(task, base), tip))
}

/// Where a task's branch started, and each of its attempts': its `start`, or the run's base.
fn start_of(task: &TaskRecord, base: Oid) -> Oid {
    match task.start.as_deref().map(Oid::from_str) {
        Some(Ok(start)) => start,
        _ => base,
    }
}

/// How far a task got with its task checks.
enum Reached {
    /// Its last round's checks ran: how many passed, of how many.
    Counted(usize, usize),
    /// It was judged without any (the plan has no task checks).
    None,
    /// It ended, or stopped, before its checks ran (its agent or collect failed).
    Not,
}

/// How far `task` got with its checks. The record keeps the last round's checks; a task
/// without any that was reviewed or is done was judged without them.
fn checks_reached(task: &TaskRecord) -> Reached {
    if !task.checks.is_empty() {
        let passed = task.checks.iter().filter(|c| c.passed).count();
        return Reached::Counted(passed, task.checks.len());
    }
    let judged =
        task.review.is_some() || matches!(task.state, TaskState::Done | TaskState::Rejected);
    if judged {
        Reached::None
    } else {
        Reached::Not
    }
}

/// The table `plait review` opens with: per task its state, verdict, checks, and the files
/// and lines its own work changes; with `only`, just the tasks it names.
pub fn review_summary(
    repo: &Repository,
    state: &RunState,
    only: Option<&[String]>,
) -> Result<String, git2::Error> {
    let base = Oid::from_str(&state.base)?;
    let shown = |id: &str| only.is_none_or(|ids| ids.iter().any(|i| i == id));
    let mut rows = Vec::new();
    for task in state.tasks.iter().filter(|t| shown(&t.id)) {
        let verdict = match (task.verdict(), &task.decision) {
            (Some(v), Some(_)) => format!("{} (person)", v.as_str()),
            (Some(v), None) => v.as_str().to_string(),
            (None, _) => "not reviewed".to_string(),
        };
        let work = own_work(task, base);
        rows.push(summary_row(repo, task.id.clone(), task, verdict, work)?);
        // Its attempts under it, each its own work from where the task started; the
        // chosen one says so where a verdict goes.
        let from = start_of(task, base);
        for (attempt, n) in task.attempts.iter().zip(1..) {
            let verdict = if task.pick.as_ref().is_some_and(|p| p.attempt == n) {
                "chosen".to_string()
            } else {
                attempt
                    .review
                    .as_ref()
                    .map_or("-".to_string(), |r| r.verdict.as_str().to_string())
            };
            let tip = attempt
                .commit
                .as_deref()
                .and_then(|c| Oid::from_str(c).ok());
            let work = tip.map(|tip| (from, tip));
            rows.push(summary_row(
                repo,
                format!("  {}", attempt.id),
                attempt,
                verdict,
                work,
            )?);
        }
    }
    let header = ["TASK", "STATE", "VERDICT", "CHECKS", "FILES", "+", "-"];
    let mut width = header.map(str::len);
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(header.map(str::to_string)).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let pad = width[i].saturating_sub(cell.chars().count());
            // Names and words to the left, numbers to the right.
            if i < 4 {
                let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(line, "{}{cell}  ", " ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    Ok(out)
}

/// One row of `plait review`'s table: `label` (a task's id, or an attempt's indented),
/// the record's state, `verdict`, its checks, and the files and lines of `work`.
fn summary_row(
    repo: &Repository,
    label: String,
    task: &TaskRecord,
    verdict: String,
    work: Option<(Oid, Oid)>,
) -> Result<[String; 7], git2::Error> {
    let checks = match checks_reached(task) {
        Reached::Counted(passed, total) => format!("{passed}/{total}"),
        Reached::None => "none".to_string(),
        Reached::Not => "not reached".to_string(),
    };
    let (mut files, mut added, mut removed) = (0, 0, 0);
    if let Some((from, tip)) = work {
        for file in super::diff::file_diffs(repo, from, tip)? {
            files += 1;
            added += file.added;
            removed += file.removed;
        }
    }
    Ok([
        label,
        task.state.as_str().to_string(),
        verdict,
        checks,
        files.to_string(),
        format!("+{added}"),
        format!("-{removed}"),
    ])
}

/// A supervisor group's part of `plait review`: verdict, summary, comments, conflicts.
fn group_review_text(
    out: &mut String,
    state: &RunState,
    group: &plait_core::state::GroupRecord,
    style: DiffStyle,
) {
    let verdict = match (group.verdict(), &group.decision) {
        (Some(v), Some(_)) => format!("{} (by a person)", v.as_str()),
        (Some(v), None) => format!("{} (by the supervisor)", v.as_str()),
        (None, _) if !group.supervised => "no supervisor".to_string(),
        (None, _) => "not reviewed".to_string(),
    };
    let _ = writeln!(
        out,
        "{}== {} · tasks {} · {verdict} · {}{}",
        paint(style, BOLD),
        group.id,
        group.tasks.join(", "),
        if group.merged_up {
            "in the merge"
        } else {
            "left out of the merge"
        },
        reset(style)
    );
    if let Some(review) = &group.review {
        let _ = writeln!(out, "summary: {}", review.summary);
        if let Some(note) = &review.note {
            let _ = writeln!(out, "note: {note}");
        }
        for c in &review.comments {
            let _ = writeln!(out, "  - {}{}", c.place(), c.body);
        }
    }
    if let Some(merge) = &group.merge {
        for c in &merge.conflicts {
            let _ = writeln!(
                out,
                "conflict in {} ({}): {}",
                c.path,
                c.kind,
                c.tasks.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "(its diff: plait diff {} {} --stat)",
            state.id, group.id
        );
    }
    out.push('\n');
}
