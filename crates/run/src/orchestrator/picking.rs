//! The pick: which of a task's attempts becomes the task, and making it so. The judge
//! (`judge`) is the plan's: the first that passed (`checks`), a command that names one, or
//! the task's reviewer comparing those that passed side by side. The chosen attempt's
//! work is then the task's (`choose`): its branch moves to the attempt's commit, and its
//! record takes the attempt's changes, checks and review, with every attempt's usage.
//!
//! Below `attempts`, which runs the attempts and calls these; above the task's shared
//! state.

use std::sync::Arc;

use git2::Oid;

use super::shared::fail_task;
use super::shared::Slot;
use super::Shared;
use plait_core::state::{now_ms, Pick, TaskDir, TaskRecord, Usage};
use plait_plan::PickSpec;
use plait_stages::merge::run::mergeable;
use plait_stages::review::checks::{CheckJob, Lineage};
use plait_stages::review::pick::{self as judging, Candidate, PickInput};

/// The attempt chosen, by whom and why.
pub(super) struct Choice {
    pub(super) attempt: u32,
    pub(super) by: String,
    pub(super) why: String,
    pub(super) candidates: Vec<u32>,
    pub(super) note: Option<String>,
    pub(super) usage: Option<Usage>,
}

impl Choice {
    /// Attempt `n` of `task`, the first to pass.
    pub(super) fn by_checks(n: u32, task: &TaskRecord) -> Choice {
        let reviewed = task.attempt_no(n).is_some_and(|a| a.review.is_some());
        Choice {
            attempt: n,
            by: "checks".to_string(),
            why: format!(
                "the first attempt whose checks{} passed",
                if reviewed { " and review" } else { "" }
            ),
            candidates: vec![n],
            note: None,
            usage: None,
        }
    }
}

/// The attempt of `task` that passed first, by when it ended: done, its checks green, its
/// review an approval (or none), nothing outside what it owns, and a change when one was
/// asked for.
pub(super) fn first_passed(task: &TaskRecord) -> Option<u32> {
    task.attempts
        .iter()
        .zip(1..)
        .filter(|(a, _)| passed(a))
        .min_by_key(|(a, _)| a.finished_at.unwrap_or(u64::MAX))
        .map(|(_, n)| n)
}

/// Whether an attempt passed, and may become the task: every check green (exit 0; one
/// that fails as it does on the base is still red, so an attempt that gets nothing right
/// is never taken over one that does), and mergeable with a change.
pub(super) fn passed(attempt: &TaskRecord) -> bool {
    mergeable(attempt) && !attempt.unchanged() && attempt.checks.iter().all(|c| c.passed)
}

/// The judge's choice among task `index`'s attempts that passed, all having ended; `None`
/// when none passed.
pub(super) async fn judge(shared: &Arc<Shared>, index: usize, pick: &PickSpec) -> Option<Choice> {
    let record = shared.record(index);
    let candidates: Vec<u32> = record
        .attempts
        .iter()
        .zip(1..)
        .filter(|(a, _)| passed(a))
        .map(|(_, n)| n)
        .collect();
    let only = |n: u32, why: &str| Choice {
        attempt: n,
        by: pick.name().to_string(),
        why: why.to_string(),
        candidates: candidates.clone(),
        note: None,
        usage: None,
    };
    match (candidates.as_slice(), pick) {
        ([], _) => None,
        ([n], _) => Some(only(*n, "the only attempt that passed")),
        (_, PickSpec::Checks) => {
            let n = first_passed(&record)?;
            Some(Choice::by_checks(n, &record))
        }
        (_, PickSpec::Command(command)) => {
            Some(by_command(shared, index, command, candidates).await)
        }
        (_, PickSpec::Review) => Some(by_review(shared, index, candidates).await),
    }
}

/// A command's choice: run like a check in a checkout of the task's start, told the
/// candidates (`PLAIT_CANDIDATES`, `PLAIT_CANDIDATE_<n>`: each one's commit); its last
/// line of output names the attempt. Anything else takes the first candidate, saying why.
async fn by_command(
    shared: &Arc<Shared>,
    index: usize,
    command: &str,
    candidates: Vec<u32>,
) -> Choice {
    let record = shared.record(index);
    let task = shared.task(Slot::from(index));
    let start = shared
        .start(index)
        .map(|s| s.commit)
        .unwrap_or(shared.plan.base);
    let names: Vec<String> = candidates
        .iter()
        .map(|n| format!("PLAIT_CANDIDATE_{n}"))
        .collect();
    let mut env: Vec<(&str, String)> = vec![
        ("PLAIT_RUN", shared.run.clone()),
        ("PLAIT_TASK", record.id.clone()),
        ("PLAIT_BASE", start.to_string()),
        (
            "PLAIT_CANDIDATES",
            candidates
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        ),
    ];
    for (name, n) in names.iter().zip(&candidates) {
        let commit = record
            .attempt_no(*n)
            .and_then(|a| a.commit.clone())
            .unwrap_or_else(|| start.to_string());
        env.push((name.as_str(), commit));
    }
    let logs = TaskDir::of_log(&record.log).path().join("pick");
    let commands = [command.to_string()];
    let job = CheckJob {
        commit: start,
        commands: &commands,
        own: &[],
        env,
        logs: &logs,
        timeout: shared.plan.checks.timeout,
        sandbox: &task.check_sandbox,
        lineage: Lineage::Gate,
    };
    let first = candidates[0];
    let mut choice = Choice {
        attempt: first,
        by: "command".to_string(),
        why: String::new(),
        candidates: candidates.clone(),
        note: None,
        usage: None,
    };
    let answer = match shared.checks.run(&job, &shared.cancel).await {
        Err(e) => Err(format!("it could not run: {e}")),
        Ok(results) => match results.first() {
            None => Err("it did not run".to_string()),
            Some(r) if r.exit_code != Some(0) => Err(format!(
                "it exited {}",
                r.exit_code
                    .map_or("by a signal".to_string(), |c| c.to_string())
            )),
            Some(r) => {
                let output = std::fs::read_to_string(&r.log).unwrap_or_else(|_| r.tail.clone());
                named_attempt(&output, &candidates)
            }
        },
    };
    match answer {
        Ok(n) => {
            choice.attempt = n;
            choice.why = format!("`{command}` named attempt {n}");
        }
        Err(problem) => {
            choice.why = "the first attempt that passed".to_string();
            choice.note = Some(format!(
                "`{command}` gave no choice ({problem}); attempt {first} was taken"
            ));
        }
    }
    choice
}

/// The attempt a command's output names on its last line that is not empty.
fn named_attempt(output: &str, candidates: &[u32]) -> Result<u32, String> {
    let last = output
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or("its output was empty")?;
    let n: u32 = last
        .trim_start_matches('#')
        .parse()
        .map_err(|_| format!("its last line `{last}` is not an attempt's number"))?;
    if candidates.contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "it named attempt {n}, which is not among those that passed ({})",
            candidates
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// The task's reviewer compares the candidates side by side and names one.
async fn by_review(shared: &Arc<Shared>, index: usize, candidates: Vec<u32>) -> Choice {
    let record = shared.record(index);
    let task = shared.task(Slot::from(index));
    let reviewer = shared.plan.review.reviewer_for(&task);
    let start = shared
        .start(index)
        .map(|s| s.commit)
        .unwrap_or(shared.plan.base);
    let dir = TaskDir::of_log(&record.log).path().to_path_buf();
    let mut shown = Vec::new();
    for &n in &candidates {
        let Some(attempt) = record.attempt_no(n) else {
            continue;
        };
        let diff = match attempt.commit.as_deref().map(Oid::from_str) {
            Some(Ok(tip)) => shared.diff(start, tip).await,
            _ => String::new(),
        };
        let agent = shared.task(Slot::attempt(index, n)).agent.describe();
        shown.push((n, agent, diff, attempt.clone()));
    }
    let list: Vec<Candidate<'_>> = shown
        .iter()
        .map(|(n, agent, diff, attempt)| Candidate {
            number: *n,
            agent: agent.clone(),
            diff: diff.clone(),
            checks: &attempt.checks,
            commit: attempt.commit.clone().unwrap_or_default(),
            worktree: attempt.worktree.clone(),
            summary: attempt.summary.clone(),
        })
        .collect();
    let gateway = match reviewer.gateway() {
        None => None,
        Some(provider) => {
            let who = format!("pick:{}", record.id);
            shared
                .role_gateway(&who, provider, dir.join("pick.jsonl"))
                .await
                .ok()
        }
    };
    let input = PickInput {
        run: &shared.run,
        goal: &shared.plan.goal,
        task: &record.id,
        prompt: &task.prompt,
        owns: task.owns.patterns(),
        candidates: &list,
        base: start.to_string(),
        dir: dir.clone(),
        timeout: shared.plan.checks.timeout,
        budget: &shared.budget,
        sandbox: &task.check_sandbox,
        plait_program: shared.context.program(),
        gateway: gateway.as_ref(),
    };
    let picked = judging::pick(
        &reviewer,
        &input,
        &shared.client,
        &shared.limiters,
        &shared.cancel,
    )
    .await;
    Choice {
        attempt: picked.chosen,
        by: picked.by,
        why: picked.why,
        candidates,
        note: picked.note,
        usage: picked.usage,
    }
}

/// Makes `choice` task `index`'s: its branch at the chosen attempt's commit (its start,
/// when the attempt changed nothing), the attempt's transcript beside the task's log for
/// the rounds a send-back gives it, and its record the attempt's, with every attempt's
/// usage and the pick.
pub(super) async fn choose(shared: &Arc<Shared>, index: usize, choice: Choice) {
    let record = shared.record(index);
    let Some(attempt) = record.attempt_no(choice.attempt).cloned() else {
        let why = format!(
            "the pick named attempt {}, which it has not",
            choice.attempt
        );
        return fail_task(shared, index, why, None);
    };
    let start = match shared.start(index) {
        Ok(start) => start.commit,
        Err(why) => return fail_task(shared, index, why, None),
    };
    let tip = attempt
        .commit
        .as_deref()
        .and_then(|c| Oid::from_str(c).ok())
        .unwrap_or(start);
    let moved = {
        let (context, branch) = (shared.context.clone(), record.branch.clone());
        let message = format!("plait: attempt {} becomes the task", choice.attempt);
        tokio::task::spawn_blocking(move || -> Result<(), String> {
            let repo = context.repo().map_err(|e| e.to_string())?;
            let refname = plait_core::refs::branch_ref(&branch);
            repo.reference(&refname, tip, true, &message)
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r)
    };
    if let Err(why) = moved {
        let why = format!(
            "could not move its branch to attempt {}: {why}",
            choice.attempt
        );
        return fail_task(shared, index, why, None);
    }
    let from = TaskDir::of_log(&attempt.log).transcript();
    if from.exists() {
        let _ = std::fs::copy(&from, TaskDir::of_log(&record.log).transcript());
    }
    let pick = Pick {
        attempt: choice.attempt,
        by: choice.by,
        why: choice.why,
        candidates: choice.candidates,
        note: choice.note,
        at: now_ms(),
        usage: choice.usage,
    };
    shared.update(index, |t| {
        t.take_attempt(pick);
    });
}

#[cfg(test)]
mod tests {
    use super::named_attempt;

    #[test]
    fn a_command_names_a_candidate_on_its_last_line() {
        assert_eq!(named_attempt("scores...\n3\n\n", &[1, 3]), Ok(3));
        assert_eq!(named_attempt("#1", &[1, 3]), Ok(1));
        assert!(named_attempt("2\n", &[1, 3])
            .unwrap_err()
            .contains("not among those that passed (1, 3)"));
        assert!(named_attempt("best: 3", &[1, 3])
            .unwrap_err()
            .contains("`best: 3`"));
        assert!(named_attempt("  \n", &[1]).is_err());
    }
}
