//! A task's attempts as its page shows them side by side (`attempts = N`): each one's
//! number, agent (as the run's copy of the plan names it), state, checks with a failed
//! one's last lines, review, files, time and cost, how it ended, and which one was chosen,
//! by whom and why. Each one's diff comes from the task's diff route under the attempt's
//! id (`tasks/<task>~<n>/diff`), against where the task started (`work_of`).

use serde::Serialize;

use plait_core::state::{split_attempt_id, Pick, Review, RunState, TaskRecord, TaskState, Usage};
use plait_stages::report::AttemptCosts;

/// How much of a failed check's log an attempt's card shows: its last lines, at most this
/// many bytes.
const TAIL_LINES: usize = 20;
const TAIL_BYTES: usize = 2000;

/// A task's attempts and the pick, for its page.
#[derive(Debug, Serialize)]
pub(super) struct Attempts<'a> {
    /// Which attempt became the task, by whom and why; `None` before the pick, or when
    /// none passed.
    pick: Option<&'a Pick>,
    list: Vec<Attempt<'a>>,
    /// What the attempts cost, the chosen one, and the judge.
    #[serde(skip_serializing_if = "Option::is_none")]
    costs: Option<Costs>,
    /// What the task cost in all: every attempt, the judge, and its rounds since the pick.
    #[serde(skip_serializing_if = "Option::is_none")]
    total_cost_usd: Option<f64>,
}

/// [`AttemptCosts`], as the page reads it.
#[derive(Debug, Serialize)]
struct Costs {
    attempts: Option<f64>,
    chosen: Option<f64>,
    judge: Option<f64>,
}

impl From<AttemptCosts> for Costs {
    fn from(c: AttemptCosts) -> Costs {
        Costs {
            attempts: c.attempts,
            chosen: c.chosen,
            judge: c.judge,
        }
    }
}

/// One attempt, as its card shows it.
#[derive(Debug, Serialize)]
struct Attempt<'a> {
    n: u32,
    id: &'a str,
    branch: &'a str,
    /// What it ran, as the plan names it; `None` when the run's copy of the plan is gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<String>,
    state: TaskState,
    chosen: bool,
    /// It passed, and the judge could choose it.
    candidate: bool,
    /// How it ended, or that it was chosen (`report::attempt_note`).
    note: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    commit: Option<&'a str>,
    files: usize,
    violations: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    finished_at: Option<u64>,
    checks: Vec<Check<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    review: Option<&'a Review>,
    /// The agent's closing words.
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
}

/// One check of an attempt's last round.
#[derive(Debug, Serialize)]
struct Check<'a> {
    command: &'a str,
    passed: bool,
    /// It failed, and fails on the base too (context, never a pass).
    at_base: bool,
    /// It failed exactly as it does on the base: no attempt's fault.
    as_on_base: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    ms: u64,
    /// The end of a failed check's output.
    #[serde(skip_serializing_if = "Option::is_none")]
    tail: Option<String>,
}

/// `task`'s attempts for its page, `agents[n - 1]` naming attempt `n`'s agent; `None` when
/// it did not run as several.
pub(super) fn of<'a>(task: &'a TaskRecord, agents: &[String]) -> Option<Attempts<'a>> {
    if task.attempts.is_empty() {
        return None;
    }
    let pick = task.pick.as_ref();
    let list = task
        .attempts
        .iter()
        .zip(1..)
        .map(|(a, n)| Attempt {
            n,
            id: &a.id,
            branch: &a.branch,
            agent: agents.get(n as usize - 1).cloned(),
            state: a.state,
            chosen: pick.is_some_and(|p| p.attempt == n),
            candidate: pick.is_some_and(|p| p.candidates.contains(&n)),
            note: plait_stages::report::attempt_note(task, n),
            commit: a.commit.as_deref(),
            files: a.changes.len(),
            violations: a.violations.len(),
            started_at: a.started_at,
            finished_at: a.finished_at,
            checks: a.checks.iter().map(check).collect(),
            review: a.review.as_ref(),
            summary: a.summary.as_deref(),
            usage: a.usage.as_ref(),
        })
        .collect();
    Some(Attempts {
        pick,
        list,
        costs: plait_stages::report::attempt_costs(task).map(Costs::from),
        total_cost_usd: task.usage.as_ref().and_then(|u| u.cost_usd),
    })
}

fn check(c: &plait_core::state::CheckResult) -> Check<'_> {
    let tail = (!c.passed).then(|| {
        let logged = plait_sandbox::shell::tail(&c.log, TAIL_LINES, TAIL_BYTES);
        if logged.trim().is_empty() {
            c.tail.clone()
        } else {
            logged
        }
    });
    Check {
        command: &c.command,
        passed: c.passed,
        at_base: c.at_base,
        as_on_base: c.as_on_base,
        exit_code: c.exit_code,
        ms: c.ms,
        tail,
    }
}

/// The record whose work the diff route shows for `id` (a task's, or an attempt's:
/// `<task>~<n>`) and the commit that work starts from: the task's start (or the run's base),
/// for an attempt too, whose branch starts where its task's does.
pub(super) fn work_of<'a>(state: &'a RunState, id: &str) -> Option<(&'a TaskRecord, &'a str)> {
    if let Some(task) = state.task(id) {
        return Some((task, task.start_or(&state.base)));
    }
    let (task, n) = split_attempt_id(id)?;
    let task = state.task(task)?;
    Some((task.attempt_no(n)?, task.start_or(&state.base)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use plait_core::state::TaskRecord;

    #[test]
    fn an_attempt_s_work_starts_where_its_task_does() {
        let mut state: RunState = serde_json::from_value(serde_json::json!({
            "version": 1, "id": "r1", "goal": "g", "plan": "p", "base": "b0",
            "base_name": "main", "worktree_root": "/w", "phase": "finished", "pid": 1,
            "created_at": 0, "tasks": [],
        }))
        .unwrap();
        let mut task = TaskRecord::pending("r1", "a", "/w/a".into(), 1, "/l".into());
        task.start = Some("s1".into());
        task.attempts = vec![task.attempt("r1", 1, "/w/a~1".into(), "/l1".into())];
        state.tasks.push(task);
        let (record, from) = work_of(&state, "a~1").unwrap();
        assert_eq!((record.branch.as_str(), from), ("plait/r1/a@1", "s1"));
        assert_eq!(work_of(&state, "a").map(|(_, f)| f), Some("s1"));
        assert!(work_of(&state, "a~2").is_none());
        assert!(work_of(&state, "b~1").is_none());
    }
}
