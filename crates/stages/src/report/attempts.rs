//! A task run as several attempts (`attempts = N`), as people read it: how each attempt
//! ended or that it was chosen (the status's rows under the task, `plait review`, the
//! page), and what the attempts cost beside the chosen one. One wording for every surface.

use std::fmt::Write as _;

use super::usage::cost;
use plait_core::state::{RunState, TaskRecord, Verdict};

/// How attempt `n` of `task` ended, in a few words: `chosen (BY: WHY)`, or why it was not
/// (its error, a failed check, the review's verdict, writes outside what it owns, no
/// change), or that it passed and the judge took another.
pub fn attempt_note(task: &TaskRecord, n: u32) -> String {
    let Some(attempt) = task.attempt_no(n) else {
        return String::new();
    };
    if let Some(pick) = task.pick.as_ref().filter(|p| p.attempt == n) {
        return format!("chosen ({}: {})", pick.by, pick.why);
    }
    if let Some(error) = &attempt.error {
        return error.clone();
    }
    if let Some(failed) = attempt.checks.iter().find(|c| !c.passed) {
        return format!("its check `{}` {}", failed.command, failed.failure_word());
    }
    if let Some(review) = attempt
        .review
        .as_ref()
        .filter(|r| r.verdict != Verdict::Approve)
    {
        return format!("review: {}", review.verdict.as_str());
    }
    if !attempt.violations.is_empty() {
        return "it wrote outside what it owns".to_string();
    }
    if attempt.unchanged() {
        return "no changes: the agent changed nothing".to_string();
    }
    if let (Some(reason), None) = (&attempt.nothing_to_do, &attempt.commit) {
        return format!("nothing to do: {reason}");
    }
    match &task.pick {
        Some(pick) if pick.candidates.contains(&n) => {
            format!("passed; attempt {} was chosen", pick.attempt)
        }
        _ => String::new(),
    }
}

/// What a task's attempts cost, in USD (`None` where a price is unknown).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttemptCosts {
    /// All its attempts together.
    pub attempts: Option<f64>,
    /// The chosen one; `None` too before the pick.
    pub chosen: Option<f64>,
    /// The judge's (`pick = "review"` by a model).
    pub judge: Option<f64>,
}

/// What `task`'s attempts cost; `None` when it has none or none of them used a model.
pub fn attempt_costs(task: &TaskRecord) -> Option<AttemptCosts> {
    let all = task.attempts_usage(None)?;
    Some(AttemptCosts {
        attempts: all.cost_usd,
        chosen: task
            .chosen()
            .and_then(|a| a.usage.as_ref())
            .and_then(|u| u.cost_usd),
        judge: task
            .pick
            .as_ref()
            .and_then(|p| p.usage.as_ref())
            .and_then(|u| u.cost_usd),
    })
}

/// The status's line on the run's attempts: how many tasks ran as how many, and, when
/// their prices are known, what all the attempts cost against the chosen ones.
pub(super) fn attempts_line(out: &mut String, state: &RunState) {
    let tasks: Vec<&TaskRecord> = state
        .tasks
        .iter()
        .filter(|t| !t.attempts.is_empty())
        .collect();
    if tasks.is_empty() {
        return;
    }
    let count: usize = tasks.iter().map(|t| t.attempts.len()).sum();
    let chosen = tasks.iter().filter(|t| t.pick.is_some()).count();
    let _ = write!(
        out,
        "\nattempts: {} task(s) ran as {count} attempt(s), {chosen} chosen",
        tasks.len()
    );
    let costs: Vec<AttemptCosts> = tasks.iter().filter_map(|t| attempt_costs(t)).collect();
    let add = |of: &dyn Fn(&AttemptCosts) -> Option<f64>| -> Option<f64> {
        costs.iter().map(of).sum::<Option<f64>>()
    };
    let all = add(&|c| c.attempts);
    if !costs.is_empty() && all.is_some() {
        let _ = write!(out, "; they cost {}", cost(all));
        // What the chosen ones cost, over the tasks that chose one.
        let picked: Option<f64> = tasks
            .iter()
            .filter(|t| t.pick.is_some())
            .filter_map(|t| attempt_costs(t))
            .map(|c| c.chosen)
            .sum();
        if chosen > 0 && picked.is_some() {
            let _ = write!(out, ", the chosen {}", cost(picked));
        }
        let judges = add(&|c| Some(c.judge.unwrap_or(0.0)));
        if judges.is_some_and(|j| j > 0.0) {
            let _ = write!(out, ", the judges {}", cost(judges));
        }
    }
    out.push('\n');
}

/// The lines `plait review` shows under a task run as attempts: how it was picked, then a
/// line per attempt (`*` marks the chosen), its state, checks, cost and how it ended.
pub(super) fn review_lines(out: &mut String, task: &TaskRecord) {
    if task.attempts.is_empty() {
        return;
    }
    let head = match &task.pick {
        Some(pick) => format!(
            "attempt {} chosen by {}: {}",
            pick.attempt, pick.by, pick.why
        ),
        None if task.state.is_final() => "no attempt chosen".to_string(),
        None => "no attempt chosen yet".to_string(),
    };
    let _ = writeln!(out, "attempts: {} · {head}", task.attempts.len());
    if let Some(note) = task.pick.as_ref().and_then(|p| p.note.as_ref()) {
        let _ = writeln!(out, "  note: {note}");
    }
    let priced = task.attempts.iter().any(|a| a.usage.is_some());
    let rows: Vec<[String; 5]> = task
        .attempts
        .iter()
        .zip(1..)
        .map(|(a, n)| {
            let chosen = task.pick.as_ref().is_some_and(|p| p.attempt == n);
            let passed = a.checks.iter().filter(|c| c.passed).count();
            let checks = match a.checks.len() {
                0 => "no checks".to_string(),
                total => format!("checks {passed}/{total}"),
            };
            let spent = match (priced, &a.usage) {
                (false, _) => String::new(),
                (true, Some(u)) => cost(u.cost_usd),
                (true, None) => "-".to_string(),
            };
            [
                if chosen { "*" } else { " " }.to_string(),
                a.id.clone(),
                a.state.as_str().to_string(),
                checks,
                spent,
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let widths = [1, width(1), width(2), width(3), width(4)];
    for (row, n) in rows.iter().zip(1..) {
        let mut line = format!("  {}", row[0]);
        for (cell, w) in row.iter().zip(widths).skip(1) {
            let _ = write!(line, " {cell:<w$} ");
        }
        let _ = writeln!(out, "{}{}", line.trim_end(), note_cell(task, n));
    }
    if let Some((branch, _)) = task.attempts[0].branch.rsplit_once('@') {
        let _ = writeln!(out, "  each one's work is on its branch: {branch}@N");
    }
    if let Some(c) = attempt_costs(task).filter(|c| c.attempts.is_some()) {
        let total = task.usage.as_ref().and_then(|u| u.cost_usd);
        let _ = write!(out, "  cost: the attempts {}", cost(c.attempts));
        if task.pick.is_some() {
            let _ = write!(out, ", the chosen {}", cost(c.chosen));
        }
        if let Some(judge) = c.judge.filter(|j| *j > 0.0) {
            let _ = write!(out, ", the judge {}", cost(Some(judge)));
        }
        if total.is_some() {
            let _ = write!(out, "; the task {} in all", cost(total));
        }
        out.push('\n');
    }
}

/// `  NOTE` after an attempt's row, or nothing when there is nothing to say.
fn note_cell(task: &TaskRecord, n: u32) -> String {
    let note = attempt_note(task, n);
    if note.is_empty() {
        note
    } else {
        format!("  {note}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plait_core::state::{CheckResult, Pick, TaskState, Usage};

    fn attempt(task: &TaskRecord, n: u32, state: TaskState, cost: Option<f64>) -> TaskRecord {
        let mut a = task.attempt("r1", n, format!("/w/a~{n}").into(), "/l".into());
        a.state = state;
        a.usage = cost.map(|c| Usage {
            cost_usd: Some(c),
            ..Usage::default()
        });
        a
    }

    fn picked() -> TaskRecord {
        let mut task = TaskRecord::pending("r1", "a", "/w/a".into(), 1, "/l".into());
        let mut one = attempt(&task, 1, TaskState::Failed, Some(0.5));
        one.checks.push(CheckResult {
            command: "make test".into(),
            passed: false,
            exit_code: Some(1),
            tail: "boom".into(),
            log: "/l/c".into(),
            ms: 1,
            refused: Vec::new(),
            at_base: false,
            as_on_base: false,
            beyond_base: Vec::new(),
        });
        let two = attempt(&task, 2, TaskState::Done, Some(0.25));
        let mut three = attempt(&task, 3, TaskState::Stopped, Some(0.125));
        three.error = Some("stopped: attempt 2 was chosen".into());
        task.attempts = vec![one, two, three];
        task.pick = Some(Pick {
            attempt: 2,
            by: "checks".into(),
            why: "the first attempt whose checks passed".into(),
            candidates: vec![2],
            note: None,
            at: 1,
            usage: None,
        });
        task.state = TaskState::Done;
        task
    }

    #[test]
    fn each_attempt_says_it_was_chosen_or_how_it_ended() {
        let task = picked();
        assert_eq!(
            attempt_note(&task, 2),
            "chosen (checks: the first attempt whose checks passed)"
        );
        assert_eq!(attempt_note(&task, 1), "its check `make test` failed");
        assert_eq!(attempt_note(&task, 3), "stopped: attempt 2 was chosen");
        assert_eq!(attempt_note(&task, 4), "");
    }

    #[test]
    fn the_attempts_cost_beside_the_chosen_one() {
        let task = picked();
        let costs = attempt_costs(&task).unwrap();
        assert_eq!(costs.attempts, Some(0.875));
        assert_eq!(costs.chosen, Some(0.25));
        assert_eq!(costs.judge, None);
        let mut state: RunState = serde_json::from_value(serde_json::json!({
            "version": 1, "id": "r1", "goal": "g", "plan": "p", "base": "b",
            "base_name": "main", "worktree_root": "/w", "phase": "finished", "pid": 1,
            "created_at": 0, "tasks": [],
        }))
        .unwrap();
        state.tasks.push(task);
        let mut out = String::new();
        attempts_line(&mut out, &state);
        assert_eq!(
            out,
            "\nattempts: 1 task(s) ran as 3 attempt(s), 1 chosen; they cost $0.8750, the chosen $0.2500\n"
        );
    }

    #[test]
    fn review_lists_the_candidates_with_the_chosen_marked() {
        let mut out = String::new();
        review_lines(&mut out, &picked());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "attempts: 3 · attempt 2 chosen by checks: the first attempt whose checks passed"
        );
        assert!(lines[1].starts_with("    a~1  failed"), "{out}");
        assert!(lines[1].ends_with("its check `make test` failed"), "{out}");
        assert!(lines[2].starts_with("  * a~2  done"), "{out}");
        assert!(lines[2].contains("$0.2500"), "{out}");
        assert_eq!(lines[4], "  each one's work is on its branch: plait/r1/a@N");
        assert_eq!(
            lines[5], "  cost: the attempts $0.8750, the chosen $0.2500",
            "{out}"
        );
    }
}
