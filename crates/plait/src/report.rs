//! Stage 9: report. What happened, per task and for the run — state, changes, violations,
//! conflicts, time — as text for people and as JSON for scripts; a task's diff is made by
//! [`diff`]. These functions build strings; only the CLI prints them.

use std::fmt::Write as _;

pub mod diff;
mod failure;
pub mod logs;
mod plan;
mod select;
mod timings;

// The page's data (`serve::data`) reads a task's diff as `report::file_diffs`.
pub use diff::file_diffs;
pub use failure::{commands_failed, failure, failures, log_tail, setup_hint, Failure, TAIL_LINES};
pub use plan::{plan_summary, plan_text, setup_text};
pub use select::needing_attention;
pub use timings::timings_text;

use crate::land::{Blocker, Trouble};
use diff::{diff_text, paint, reset, DiffStyle, BOLD};
use git2::{Oid, Repository};
use serde::Serialize;

use plait_core::git::short;
use plait_core::state::{CulpritSet, RunPhase, RunState, TaskRecord, TaskState, Usage, Verdict};

/// What needs a person before the run can land, one sentence per blocker.
pub fn attention(state: &RunState) -> Vec<String> {
    crate::land::blockers(state)
        .iter()
        .map(|b| blocker_line(b, &state.id))
        .collect()
}

/// One blocker of the gate as the status, the JSON and `plait land` say it.
pub fn blocker_line(blocker: &Blocker, run: &str) -> String {
    let list = |tasks: &[String]| format!("{} task(s)", tasks.len());
    match blocker {
        Blocker::Tasks { trouble, tasks } => {
            let what = match trouble {
                Trouble::Failed => "failed".to_string(),
                Trouble::Violations => "changed files they do not own".to_string(),
                Trouble::Interrupted => format!(
                    "interrupted (their work so far is committed on their branches; `plait resume {run}` goes on)"
                ),
                Trouble::Stopped => "stopped by a budget".to_string(),
                Trouble::NotApproved => {
                    "not approved (changes still requested; left out of the merge)".to_string()
                }
                Trouble::Rejected => "rejected (left out of the merge)".to_string(),
                Trouble::Unchanged => format!(
                    "ended without changing any file they own, though asked to: the agent \
                     changed nothing (`plait log {run} TASK` says what it did; `plait \
                     send-back {run} TASK -m ...` for another round, `plait accept {run} \
                     TASK` if nothing was needed)"
                ),
                Trouble::Blocked => format!(
                    "blocked, never started: a task they come after did not end well \
                     (`plait status {run}` says which; once it is mended or accepted, \
                     `plait send-back {run} TASK` starts one; `plait land {run} --partial` \
                     lands the rest)"
                ),
            };
            format!("{} {what}: {}", list(tasks), tasks.join(", "))
        }
        Blocker::Interrupted => "the run was interrupted".to_string(),
        Blocker::Unfinished(n) => format!("{n} task(s) did not finish"),
        Blocker::BaseChecksFailed(commands) => format!(
            "task checks fail on the base too, before any task: {} (fix the base, or [checks] base = \"ignore\")",
            commands.join("; ")
        ),
        Blocker::MergedChecksFailed(commands) => {
            format!("merged checks failed: {}", commands.join("; "))
        }
        Blocker::GroupsHeld(groups) => {
            let named: Vec<String> = groups
                .iter()
                .map(|(group, why)| format!("{group} ({why})"))
                .collect();
            format!(
                "{} group(s) not approved by their supervisor, left out of the merge: {} (`plait accept {run} GROUP` overrules)",
                groups.len(),
                named.join(", ")
            )
        }
        Blocker::Conflicts { count, excluded } => format!(
            "{count} conflict(s); left out of the merge: {}",
            excluded.join(", ")
        ),
        Blocker::NotFinished => format!("run {run} has not finished"),
        Blocker::Cleaned => format!("run {run} was cleaned; its branches are gone"),
        Blocker::NoMerge => format!("run {run} has no merged result"),
        Blocker::MergedCheckFailed(command) => format!("merged check `{command}` failed"),
        Blocker::Moved { branch } => format!("branch {branch} moved since the run committed to it"),
        Blocker::LeftOutByConflicts(tasks) => {
            format!("left out of the merge by conflicts: {}", tasks.join(", "))
        }
        Blocker::Waiting(tasks) => {
            let each: Vec<String> = tasks
                .iter()
                .map(|(id, cause)| format!("{id} ({cause})"))
                .collect();
            let again: Vec<&str> = tasks
                .iter()
                .filter(|(_, c)| c.missing.is_empty() && !c.moved.is_empty())
                .map(|(id, _)| id.as_str())
                .collect();
            let hint = match again.as_slice() {
                [] => String::new(),
                [one] => format!(
                    "; `plait send-back {run} {one} -m TEXT` runs it again from their work as it is now"
                ),
                _ => format!(
                    "; `plait send-back {run} TASK -m TEXT` runs {} again from their work as it is now",
                    again.join(", ")
                ),
            };
            format!(
                "left out of the merge with what they started from: {}{hint} (`plait land {run} --partial` lands the rest)",
                each.join(", ")
            )
        }
        Blocker::Culprits(sets) => {
            let named: Vec<String> = sets.iter().map(culprit_sentence).collect();
            format!(
                "{}; held out of the merge (`plait land {run} --partial` lands the rest)",
                named.join("; ")
            )
        }
    }
}

/// "`parser` breaks `cargo test` together with `lexer`".
pub fn culprit_sentence(set: &CulpritSet) -> String {
    let quoted = |items: &[String]| -> String {
        let q: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
        match q.as_slice() {
            [] => String::new(),
            [one] => one.clone(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        }
    };
    let checks = if set.checks.is_empty() {
        "the merged checks".to_string()
    } else {
        quoted(&set.checks)
    };
    let culprits = quoted(&set.tasks);
    let verb = if set.tasks.len() == 1 {
        "breaks"
    } else {
        "break"
    };
    if set.partners.is_empty() {
        format!("{culprits} {verb} {checks}")
    } else {
        format!(
            "{culprits} {verb} {checks} together with {}",
            quoted(&set.partners)
        )
    }
}

/// What the culprit search found, in words: one line per finding.
fn culprit_lines(out: &mut String, state: &RunState) {
    let Some(c) = &state.culprits else {
        return;
    };
    let _ = writeln!(
        out,
        "
culprit search ({} check run(s)):",
        c.runs
    );
    for set in &c.sets {
        let _ = writeln!(
            out,
            "  {}; held out of {} (output: {})",
            culprit_sentence(set),
            state.merged_branch(),
            set.logs.display()
        );
    }
    if !c.base_fails.is_empty() {
        let _ = writeln!(
            out,
            "  {} fail(s) on the base alone: no task is to blame",
            c.base_fails
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !c.flaky.is_empty() {
        let _ = writeln!(
            out,
            "  flaky: {} failed, then passed on the same tree; no task is blamed",
            c.flaky
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if c.stopped {
        let _ = writeln!(out, "  interrupted before it ended");
    }
}

/// Serializes blockers as their sentences (the JSON's `gate` and `attention` fields).
pub fn serialize_blockers<S: serde::Serializer>(
    blockers: &[Blocker],
    run: &str,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq as _;
    let mut seq = serializer.serialize_seq(Some(blockers.len()))?;
    for b in blockers {
        seq.serialize_element(&blocker_line(b, run))?;
    }
    seq.end()
}

/// The JSON `plait status --json` prints: the run's state plus what needs attention.
#[derive(Serialize)]
pub struct StatusJson<'a> {
    #[serde(flatten)]
    pub state: &'a RunState,
    pub attention: Vec<String>,
    /// Each failed task's error, log and the log's last lines.
    pub failures: Vec<Failure>,
}

fn seconds(ms: u64) -> String {
    if ms < 10_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 600_000 {
        format!("{}s", ms / 1000)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}

/// The task rows, flat, or under their groups' lines in a grouped run.
fn write_rows(out: &mut String, state: &RunState, rows: &[(&str, String)], width: usize) {
    if state.groups.is_empty() {
        for (_, row) in rows {
            let _ = writeln!(out, "{row}");
        }
        return;
    }
    for group in &state.groups {
        let _ = writeln!(out, "{:<width$}  {}", group.id, group_note(group));
        for id in &group.tasks {
            if let Some((_, row)) = rows.iter().find(|(t, _)| t == id) {
                let _ = writeln!(out, "  {row}");
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

/// A table of the run's tasks with a header line and, below it, what needs attention.
/// `live` says whether a plait process is still working on an unfinished run.
pub fn status_text(state: &RunState, live: bool) -> String {
    let mut out = String::new();
    header_lines(&mut out, state, live);
    task_table(&mut out, state);
    usage_line(&mut out, state);
    sandbox_lines(&mut out, state);
    violation_lines(&mut out, state);
    for task in &state.tasks {
        failure::status_lines(&mut out, &state.id, task);
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

/// The table's header line and a row per task, under their groups in a grouped run.
fn task_table(out: &mut String, state: &RunState) {
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
        .chain(state.groups.iter().map(|g| g.id.len()))
        .max()
        .unwrap_or(4)
        .max(4);
    let models = if state
        .tasks
        .iter()
        .any(|t| t.usage.as_ref().is_some_and(cached))
    {
        Models::Cached
    } else if state.tasks.iter().any(|t| t.usage.is_some()) {
        Models::Plain
    } else {
        Models::None
    };
    let mut model_header = match models {
        Models::None => String::new(),
        Models::Plain => format!("  {:>8}  {:>8}", "TOKENS", "COST"),
        Models::Cached => format!("  {:>8}  {:>8}  {:>6}", "TOKENS", "COST", "CACHED"),
    };
    let runs = state
        .tasks
        .iter()
        .any(|t| t.usage.as_ref().is_some_and(|u| u.runs > 0));
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
    let rows: Vec<(&str, String)> = state
        .tasks
        .iter()
        .map(|task| {
            let note = task_note(state, task, (&conflicted, &waiting));
            let row = task_row(task, note, (models, runs, waits), width - indent);
            (task.id.as_str(), row)
        })
        .collect();
    write_rows(out, state, &rows, width);
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
        let mut after = task.after.join(",");
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
/// verdict, or its error.
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
    } else if task.state == TaskState::Done && task.commit.is_none() {
        note = "no changes".to_string();
    } else if let Some(verdict) = task.verdict() {
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

/// The model usage of all tasks together on one line, if any task used a model.
fn usage_line(out: &mut String, state: &RunState) {
    let Some(total) = total_usage(state) else {
        return;
    };
    let first: Vec<u64> = state
        .tasks
        .iter()
        .filter_map(|t| t.usage.as_ref()?.first_token_ms)
        .collect();
    let mean_first = if first.is_empty() {
        "-".to_string()
    } else {
        seconds(first.iter().sum::<u64>() / first.len() as u64)
    };
    let about = if total.estimated { "≈" } else { "" };
    let _ = writeln!(
        out,
        "\nmodel: {} request(s) ({} retried), {about}{} input + {about}{} output tokens, cache {} written / {} read; cost {}{}; first token {} (mean); model time {}{}",
        total.requests,
        total.retries,
        total.input_tokens,
        total.output_tokens,
        total.cache_creation_input_tokens,
        total.cache_read_input_tokens,
        match total.cost_usd { Some(c) => format!("${c:.4}"), None => "unknown (no prices for the model)".to_string() },
        if total.cache_saved_usd != 0.0 { format!(" (the cache saved ${:.4})", total.cache_saved_usd) } else { String::new() },
        mean_first,
        seconds(total.model_ms),
        if total.refused_writes > 0 { format!("; {} write(s) outside ownership refused", total.refused_writes) } else { String::new() },
    );
    if total.estimated {
        let _ = writeln!(
            out,
            "≈ estimated: a server sent no usage with its answers, so plait counted about four \
             bytes a token of what was sent and said (`stream = false` in the provider's \
             [providers] table makes a server that leaves usage out of its streams count)"
        );
    }
    if total.runs > 0 {
        let _ = writeln!(
            out,
            "commands: {} run by model agents, {} in all",
            total.runs,
            seconds(total.run_ms)
        );
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

/// A task's review when it did not approve: verdict, summary, note, the first comments.
fn review_lines(out: &mut String, task: &TaskRecord) {
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
            } else if c.at_base {
                format!("FAILED, as it does on the base (log: {})", c.log.display())
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

/// What needs a person before the run can land, as a list under its heading.
fn attention_lines(out: &mut String, state: &RunState) {
    let attention = attention(state);
    if !attention.is_empty() {
        let _ = writeln!(out, "\nneeds attention:");
        for a in &attention {
            let _ = writeln!(out, "  - {a}");
        }
    }
}

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
    failure::review_lines(out, run, task);
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

/// The commits between which a task's own work lies: where its branch started (its
/// `start`, or the run's base) and its commit; `None` when it committed nothing.
fn own_work(task: &TaskRecord, base: Oid) -> Option<(Oid, Oid)> {
    let tip = Oid::from_str(task.commit.as_deref()?).ok()?;
    let from = match task.start.as_deref().map(Oid::from_str) {
        Some(Ok(start)) => start,
        _ => base,
    };
    Some((from, tip))
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
        let checks = match checks_reached(task) {
            Reached::Counted(passed, total) => format!("{passed}/{total}"),
            Reached::None => "none".to_string(),
            Reached::Not => "not reached".to_string(),
        };
        let (mut files, mut added, mut removed) = (0, 0, 0);
        if let Some((from, tip)) = own_work(task, base) {
            for file in diff::file_diffs(repo, from, tip)? {
                files += 1;
                added += file.added;
                removed += file.removed;
            }
        }
        rows.push([
            task.id.clone(),
            task.state.as_str().to_string(),
            verdict,
            checks,
            files.to_string(),
            format!("+{added}"),
            format!("-{removed}"),
        ]);
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

/// Writes the last `n` lines of `text`, indented.
fn last_lines(out: &mut String, text: &str, n: usize) {
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines[lines.len().saturating_sub(n)..] {
        let _ = writeln!(out, "    {line}");
    }
}

/// The model usage of all tasks together, if any task used a model.
pub fn total_usage(state: &RunState) -> Option<Usage> {
    let mut used = state
        .tasks
        .iter()
        .filter_map(|t| t.usage.as_ref())
        .peekable();
    used.peek()?;
    let mut total = Usage {
        cost_usd: Some(0.0),
        ..Usage::default()
    };
    for u in used {
        total.add(u);
    }
    Some(total)
}

fn tokens(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 10_000 {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

fn cost(c: Option<f64>) -> String {
    match c {
        Some(c) => format!("${c:.4}"),
        None => "?".to_string(),
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
