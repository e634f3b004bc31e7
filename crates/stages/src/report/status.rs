//! A run's status as text (`plait status`) and as JSON (`StatusJson`): the header, the
//! sandbox's refusals, the task table (`table`), usage (`usage`) and what attempts cost
//! (`attempts`), violations, failed checks, reviews (`review`), the merge, the merged
//! checks, the landing and what needs a person (`blockers`); and a run's line in
//! `plait runs`.

use std::fmt::Write as _;

use serde::Serialize;

use super::attempts::attempts_line;
use super::blockers::{attention_lines, culprit_lines};
use super::failure::Failure;
use super::review::review_lines;
use super::table::task_table;
use super::usage::usage_line;
use plait_core::git::short;
use plait_core::state::{RunPhase, RunState, TaskRecord, TaskState};

/// The JSON `plait status --json` prints: the run's state plus what needs attention.
#[derive(Serialize)]
pub struct StatusJson<'a> {
    /// The run's record.
    #[serde(flatten)]
    pub state: &'a RunState,
    /// What needs a person, one line each.
    pub attention: Vec<String>,
    /// Each failed task's error, log and the log's last lines.
    pub failures: Vec<Failure>,
}

/// A table of the run's tasks with a header line and, below it, what needs attention.
/// `live` says whether a plait process is still working on an unfinished run.
pub fn status_text(state: &RunState, live: bool) -> String {
    let mut out = String::new();
    header_lines(&mut out, state, live);
    task_table(&mut out, state);
    usage_line(&mut out, state);
    attempts_line(&mut out, state);
    sandbox_lines(&mut out, state);
    violation_lines(&mut out, state);
    for task in &state.tasks {
        super::failure::status_lines(&mut out, &state.id, task);
        failed_check_lines(&mut out, task);
        review_lines(&mut out, task);
    }
    merge_lines(&mut out, state);
    merged_check_lines(&mut out, state);
    culprit_lines(&mut out, state);
    landed_lines(&mut out, state);
    attention_lines(&mut out, state);
    out
}

/// The run's line (id, phase, base, tasks) and the first line of its goal.
fn header_lines(out: &mut String, state: &RunState, live: bool) {
    let _ = writeln!(
        out,
        "run {} · {} · base {} ({}) · {} task(s)",
        state.id,
        phase_text(state, live),
        state.base_name,
        short(&state.base),
        state.tasks.len()
    );
    if !state.goal.is_empty() {
        let _ = writeln!(out, "goal: {}", state.goal.lines().next().unwrap_or(""));
    }
}

/// Where the run is, as the status's first line says it.
fn phase_text(state: &RunState, live: bool) -> &'static str {
    match state.phase {
        RunPhase::Running | RunPhase::Merging if !live => "interrupted (its plait process is gone)",
        RunPhase::Running => "running",
        RunPhase::Merging => "merging",
        RunPhase::Finished if state.cleaned => "finished, cleaned",
        RunPhase::Finished => "finished",
        RunPhase::Interrupted => "interrupted",
    }
}

/// How the tasks' processes ran: one line when all ran alike, else one per kind; then the
/// writes and connections the sandbox refused each task (a connection's words name the
/// setting that allows it).
fn sandbox_lines(out: &mut String, state: &RunState) {
    let mut kinds: Vec<(&str, Vec<&str>)> = Vec::new();
    for task in &state.tasks {
        let Some(sandbox) = &task.sandbox else {
            continue;
        };
        match kinds.iter_mut().find(|(how, _)| *how == sandbox.how) {
            Some((_, tasks)) => tasks.push(&task.id),
            None => kinds.push((&sandbox.how, vec![&task.id])),
        }
    }
    let started = state.tasks.iter().filter(|t| t.sandbox.is_some()).count();
    match kinds.as_slice() {
        [] => {}
        [(how, _)]
            if state
                .tasks
                .iter()
                .any(|t| t.sandbox.as_ref().is_some_and(|s| s.confined)) =>
        {
            let _ = writeln!(out, "\nsandbox: {how}, {started} task(s) confined");
        }
        _ => {
            for (how, tasks) in &kinds {
                let _ = writeln!(out, "\nsandbox: {how}: {}", tasks.join(", "));
            }
        }
    }
    if let Some(env) = &state.environment {
        let mut line = format!("environment: {}", env.layer);
        if !env.setup.is_empty() {
            let _ = write!(line, "; set up by this run ({})", env.setup.join("; "));
        } else if env.layer.starts_with("base layer") && !env.made {
            line.push_str("; kept from an earlier run");
        }
        let _ = writeln!(out, "{line}");
        if !env.failed_at_base.is_empty() {
            let _ = writeln!(
                out,
                "  already failing at the base: {} (see seed-checks/ and merged-checks/at-base/ in the run's directory)",
                env.failed_at_base.join("; ")
            );
        }
        for walled in &env.walled_at_base {
            let _ = writeln!(
                out,
                "  refused by the sandbox at the base, not failing there: {walled}"
            );
        }
    }
    for task in &state.tasks {
        let Some(sandbox) = task.sandbox.as_ref().filter(|s| !s.refused.is_empty()) else {
            continue;
        };
        let writes = sandbox.refused.iter().any(|r| r.starts_with("write to "));
        let hint = if writes {
            " (a path its tools need belongs in [sandbox] writable)"
        } else {
            ""
        };
        let _ = writeln!(out, "\nthe sandbox refused {}{hint}:", task.id);
        for refused in &sandbox.refused {
            let _ = writeln!(out, "  {refused}");
        }
    }
}

/// The files each task changed but does not own, task by task.
fn violation_lines(out: &mut String, state: &RunState) {
    for task in state.tasks.iter().filter(|t| !t.violations.is_empty()) {
        let _ = writeln!(
            out,
            "\nviolations in {} (not committed, left in {}):",
            task.id,
            task.worktree.display()
        );
        for v in &task.violations {
            let _ = writeln!(out, "  {} {}", v.kind.letter(), v.path);
        }
    }
}

/// A task's failed checks, each with the last lines of its output.
fn failed_check_lines(out: &mut String, task: &TaskRecord) {
    for c in task.checks.iter().filter(|c| !c.passed) {
        let _ = writeln!(
            out,
            "\ncheck `{}` {} for {} (log: {}):",
            c.command,
            c.failure_word(),
            task.id,
            c.log.display()
        );
        last_lines(out, &c.tail, 10);
    }
}

/// The merged branch, and each conflict with its message and its first hunk lines.
fn merge_lines(out: &mut String, state: &RunState) {
    let Some(merge) = &state.merge else {
        return;
    };
    let _ = writeln!(
        out,
        "\nmerged: {} at {} with {} task(s)",
        merge.branch,
        short(&merge.commit),
        merge.included.len()
    );
    for c in &merge.conflicts {
        let _ = writeln!(
            out,
            "\nconflict ({}) in {} between {}",
            c.kind,
            c.path,
            c.tasks.join(", ")
        );
        if !c.message.is_empty() {
            let _ = writeln!(out, "  {}", c.message.replace('\n', "\n  "));
        }
        for line in c.hunks.lines().take(40) {
            let _ = writeln!(out, "    {line}");
        }
    }
}

/// Each check run on the merged result, with the last lines of a failed one's output.
fn merged_check_lines(out: &mut String, state: &RunState) {
    for c in &state.merged_checks {
        let _ = writeln!(
            out,
            "merged check `{}`: {}",
            c.command,
            if c.passed {
                "passed".to_string()
            } else if c.as_on_base {
                format!(
                    "FAILED, as it also does on the base (log: {})",
                    c.log.display()
                )
            } else if c.at_base {
                format!(
                    "FAILED, and otherwise than on the base (log: {})",
                    c.log.display()
                )
            } else {
                format!("FAILED (log: {})", c.log.display())
            }
        );
        if !c.passed {
            last_lines(out, &c.tail, 10);
        }
    }
}

/// Each branch the run landed on, from which commit to which, and how.
fn landed_lines(out: &mut String, state: &RunState) {
    for land in &state.landed {
        let _ = writeln!(
            out,
            "landed: {} {} → {} ({}{})",
            land.branch,
            short(&land.from),
            short(&land.to),
            if land.fast_forward {
                "fast-forward"
            } else {
                "merge commit"
            },
            if land.partial { ", in part" } else { "" }
        );
    }
}

/// Writes the last `n` lines of `text`, indented.
fn last_lines(out: &mut String, text: &str, n: usize) {
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines[lines.len().saturating_sub(n)..] {
        let _ = writeln!(out, "    {line}");
    }
}

/// One line per run for `plait runs`.
pub fn run_line(state: &RunState) -> String {
    let done = state
        .tasks
        .iter()
        .filter(|t| t.state == TaskState::Done)
        .count();
    let failed = state
        .tasks
        .iter()
        .filter(|t| t.state == TaskState::Failed)
        .count();
    let phase = match state.phase {
        RunPhase::Finished if state.cleaned => "cleaned",
        // As the page says it: the merge as it is now has landed.
        RunPhase::Finished if crate::land::current_landing(state).is_some() => "landed",
        RunPhase::Finished => "finished",
        RunPhase::Running => "running",
        RunPhase::Merging => "merging",
        RunPhase::Interrupted => "interrupted",
    };
    let conflicts = state.merge.as_ref().map_or(0, |m| m.conflicts.len());
    format!(
        "{}  {:<9} {:>4} tasks  {:>4} done  {:>3} failed  {:>3} conflicts  {}",
        state.id,
        phase,
        state.tasks.len(),
        done,
        failed,
        conflicts,
        state.goal.lines().next().unwrap_or("")
    )
}
