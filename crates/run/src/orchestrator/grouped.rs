//! Driving a grouped run's supervisors: their reviews of the groups' merges, the lines
//! that report each level, and the rounds their requests for changes send tasks back for
//! (the groups and their merges themselves are `groups`).

use std::fmt::Write as _;
use std::sync::Arc;

use super::{RunError, Shared};
use plait_agents::prompts;
use plait_core::state::{RunState, Verdict};
use plait_stages::groups;
use plait_stages::report::diff::{diff_text, DiffStyle};
use plait_stages::review::reviewer::{self, ReviewInput};

/// Runs the supervisors' reviews of the groups that have a merge with changes and no review
/// yet, all at once; their reviews go into `state`.
pub(crate) async fn review_groups(shared: &Arc<Shared>, state: &mut RunState) {
    let run_dir = shared.store.run_dir(&shared.run);
    let mut jobs = Vec::new();
    for k in 0..state.groups.len() {
        let group = &state.groups[k];
        let Some(merge) = &group.merge else {
            continue;
        };
        if !group.supervised || group.review.is_some() || merge.included.is_empty() {
            continue;
        }
        let reviewer = groups::supervisor(&shared.plan, state, k);
        let dir = run_dir.join("groups").join(&group.id);
        let _ = std::fs::create_dir_all(&dir);
        let prompt = prompts::supervisor::brief(state, k);
        let owns: Vec<String> = group
            .tasks
            .iter()
            .filter_map(|id| shared.plan.tasks.iter().find(|t| &t.id == id))
            .flat_map(|t| t.owns.patterns().iter().cloned())
            .collect();
        let commit = merge.commit.clone();
        let id = group.id.clone();
        let from = group.from.clone();
        let diff = group_diff(shared, from.as_deref(), &commit).await;
        jobs.push(async move {
            let gateway = match reviewer.gateway() {
                None => None,
                Some(provider) => {
                    let transcript = dir.join("review.jsonl");
                    match shared
                        .role_gateway(&format!("supervisor:{id}"), provider, transcript)
                        .await
                    {
                        Ok(g) => Some(g),
                        Err(why) => {
                            tracing::warn!("{why}; the supervisor goes without it");
                            None
                        }
                    }
                }
            };
            let input = ReviewInput {
                run: &shared.run,
                goal: &shared.plan.goal,
                task: &id,
                prompt: &prompt,
                owns: &owns,
                diff: &diff,
                checks: &[],
                round: 0,
                base: from.unwrap_or_else(|| shared.plan.base.to_string()),
                commit,
                worktree: dir.clone(),
                dir,
                timeout: shared.plan.checks.timeout,
                budget: &shared.budget,
                sandbox: &shared.plan.checks.sandbox,
                plait_program: shared.context.program(),
                gateway: gateway.as_ref(),
            };
            let review = reviewer::review(
                &reviewer,
                &input,
                &shared.client,
                &shared.limiters,
                &shared.cancel,
            )
            .await;
            (k, review)
        });
    }
    let reviews = futures_util::future::join_all(jobs).await;
    for (k, review) in reviews {
        if let Some(r) = &review {
            let detail = format!("supervisor: {} — {}", r.verdict.as_str(), r.summary);
            shared.group_event(&state.groups[k].id, "reviewed", detail);
        }
        state.groups[k].review = review;
    }
}

/// Reports each group's merge (after [`merge_groups`]) or whether it went up (after
/// [`merge_top`]).
pub fn report(shared: &Shared, state: &RunState, top: bool) {
    for group in &state.groups {
        let Some(merge) = &group.merge else {
            continue;
        };
        if top {
            if merge.included.is_empty() {
                continue;
            }
            let (stage, detail) = if group.merged_up {
                ("up", format!("in {}", state.merged_branch()))
            } else {
                let why = group.verdict().map_or("not reviewed", |v| v.as_str());
                ("held", format!("left out of the merge ({why})"))
            };
            shared.group_event(&group.id, stage, detail);
        } else {
            let mut detail = format!(
                "{} of {} task(s) into {}",
                merge.included.len(),
                group.tasks.len(),
                group.branch
            );
            if !merge.conflicts.is_empty() {
                let _ = write!(
                    detail,
                    "; {} conflict(s), left out: {}",
                    merge.conflicts.len(),
                    merge.excluded.join(", ")
                );
            }
            shared.group_event(&group.id, "merged", detail);
        }
    }
}

/// Sends the groups whose supervisor asked for changes back to their tasks: the tasks
/// owning a path the supervisor's comments name, or every merged task of the group when
/// no comment names one of theirs. Each gets one more round with the supervisor's words
/// (and its own review rounds after it); the group's review is cleared so the new merge is
/// reviewed again. Returns whether any task was sent back.
pub async fn send_back(shared: &Arc<Shared>, state: &mut RunState) -> Result<bool, RunError> {
    let mut targets: Vec<(usize, String)> = Vec::new();
    for group in &mut state.groups {
        let asked = group.decision.is_none()
            && group
                .review
                .as_ref()
                .is_some_and(|r| r.verdict == Verdict::RequestChanges);
        let Some(merge) = group.merge.as_ref().filter(|_| asked) else {
            continue;
        };
        let review = group.review.take().expect("a review asking for changes");
        let merged: Vec<usize> = merge
            .included
            .iter()
            .filter_map(|id| shared.plan.tasks.iter().position(|t| &t.id == id))
            .collect();
        let named: Vec<usize> = merged
            .iter()
            .copied()
            .filter(|&i| {
                let owns = &shared.plan.tasks[i].owns;
                review
                    .comments
                    .iter()
                    .any(|c| !c.path.is_empty() && owns.matches(&c.path))
            })
            .collect();
        let text = prompts::feedback::supervisor(group, &review);
        let chosen = if named.is_empty() { merged } else { named };
        let ids: Vec<&str> = chosen
            .iter()
            .map(|&i| shared.plan.tasks[i].id.as_str())
            .collect();
        shared.group_event(&group.id, "sent_back", format!("to {}", ids.join(", ")));
        targets.extend(chosen.into_iter().map(|i| (i, text.clone())));
    }
    if targets.is_empty() {
        return Ok(false);
    }
    shared.dispatch.rework(shared, targets).await?;
    Ok(true)
}

async fn group_diff(shared: &Arc<Shared>, from: Option<&str>, commit: &str) -> String {
    let (context, base) = (shared.context.clone(), shared.plan.base);
    let commit = commit.to_string();
    let from = from.map(str::to_string);
    tokio::task::spawn_blocking(move || {
        let repo = context.repo().map_err(|e| e.to_string())?;
        let base = match from {
            Some(from) => git2::Oid::from_str(&from).map_err(|e| e.to_string())?,
            None => base,
        };
        let tip = git2::Oid::from_str(&commit).map_err(|e| e.to_string())?;
        diff_text(&repo, base, tip, DiffStyle::default()).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|d| d)
    .unwrap_or_else(|e| format!("(the diff could not be made: {e})"))
}
