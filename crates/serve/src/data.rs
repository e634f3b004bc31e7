//! The API's reads: the runs, one run with its gate and totals (whole, or summed up for its
//! page), one task with everything a reviewer reads (its attempts side by side among it,
//! `attempts`; what people told it while it ran, and whether it can still be told or
//! stopped), and a task's or an attempt's diff against where it started.
//! Records come through the server's cache (`cache`), read again only when they change.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Json;
use serde_json::{json, Value};

use super::cache::{loaded, store};
use super::summary::{self, states};
use super::{blocking, rounds, ApiError, App};
use plait_core::git;
use plait_core::state::{RunState, Store, TaskRecord};

/// How much of a log the page is sent: its last this many bytes.
const LOG_TAIL: u64 = 256 * 1024;

/// Whether the run's plait process is running now.
fn live(store: &Store, run: &str) -> bool {
    store.is_running(run)
}

/// `GET /api/runs`: every run of the repository, oldest first.
pub(super) async fn runs(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    blocking(move || {
        let (repo, store) = store(&app)?;
        let ids = store
            .list()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let mut runs = Vec::new();
        for id in ids {
            // A damaged record is left out; the others are listed.
            let Ok(state) = store.load(&id) else {
                continue;
            };
            let usage = plait_stages::report::total_usage(&state);
            runs.push(json!({
                "id": state.id,
                "goal": state.goal,
                "phase": state.phase,
                "live": live(store, &state.id),
                "created_at": state.created_at,
                "finished_at": state.finished_at,
                "tasks": state.tasks.len(),
                "states": states(&state.tasks),
                "cost_usd": usage.and_then(|u| u.cost_usd),
                "landed": plait_stages::land::current_landing(&state).is_some(),
            }));
        }
        Ok(Json(json!({
            "repo": git::workdir(&repo),
            "runs": runs,
        })))
    })
    .await
}

/// `GET /api/runs/{run}`: the run's record, what needs a person, the gate and totals.
pub(super) async fn run(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    blocking(move || {
        let (_repo, store) = store(&app)?;
        let loaded = loaded(&app, store, &run)?;
        let state = &loaded.state;
        let live = live(store, &state.id);
        let body = loaded.body("run", live, || {
            serde_json::to_vec(&json!({
                "live": live,
                "attention": plait_stages::report::attention(state),
                "gate": summary::gate(state),
                "totals": summary::totals(state),
                "run": state,
            }))
            .map_err(|e| ApiError::internal(e.to_string()))
        })?;
        Ok(body.respond(&headers))
    })
    .await
}

/// `GET /api/runs/{run}/summary`: what the run page shows before a task is opened (see
/// `summary`).
pub(super) async fn run_summary(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    blocking(move || {
        let (_repo, store) = store(&app)?;
        let loaded = loaded(&app, store, &run)?;
        let live = live(store, &loaded.state.id);
        let body = loaded.body("summary", live, || {
            loaded
                .summary()
                .to_json(live, &loaded.version())
                .map_err(|e| ApiError::internal(e.to_string()))
        })?;
        Ok(body.respond(&headers))
    })
    .await
}

#[derive(serde::Deserialize)]
pub(super) struct SearchQuery {
    #[serde(default)]
    q: String,
}

/// `GET /api/runs/{run}/search?q=TEXT`: the tasks whose id, error, summary or changed
/// paths hold TEXT.
pub(super) async fn search(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
    Query(query): Query<SearchQuery>,
) -> Result<Json<Value>, ApiError> {
    blocking(move || {
        let (_repo, store) = store(&app)?;
        let loaded = loaded(&app, store, &run)?;
        let found = summary::search(&loaded.state, &query.q);
        Ok(Json(json!({"query": query.q, "tasks": found})))
    })
    .await
}

/// The task `task` of `state`.
fn task_of<'a>(state: &'a RunState, task: &str) -> Result<&'a TaskRecord, ApiError> {
    state
        .task(task)
        .ok_or_else(|| ApiError::not_found(format!("run {} has no task `{task}`", state.id)))
}

/// `GET /api/runs/{run}/tasks/{task}`: what a reviewer reads of one task.
pub(super) async fn task(
    State(app): State<Arc<App>>,
    UrlPath((run, task)): UrlPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    blocking(move || {
        let (repo, store) = store(&app)?;
        let loaded = loaded(&app, store, &run)?;
        let state = &loaded.state;
        let record = task_of(state, &task)?;
        let plan = plan_task(&store.run(&state.id).plan(), &task, record.attempts.len());
        let conflicts: Vec<&plait_core::state::Conflict> = state
            .merge
            .iter()
            .chain(state.groups.iter().filter_map(|g| g.merge.as_ref()))
            .flat_map(|m| &m.conflicts)
            .filter(|c| c.tasks.iter().any(|t| t == &task))
            .collect();
        let checks: Vec<Value> = record
            .checks
            .iter()
            .map(|c| {
                json!({
                    "command": c.command,
                    "passed": c.passed,
                    "exit_code": c.exit_code,
                    "ms": c.ms,
                    "refused": c.refused,
                    "at_base": c.at_base,
                    "as_on_base": c.as_on_base,
                    "beyond_base": c.beyond_base,
                    "output": tail(&c.log).unwrap_or_else(|| c.tail.clone()),
                })
            })
            .collect();
        let task_dir = store.run(&state.id).task(&task);
        let agents = plan.as_ref().map_or(&[][..], |p| &p.attempt_agents);
        // What `ops::steer` takes: a task of a going run that has not ended.
        let steerable = live(store, &state.id)
            && !record.state.is_final()
            && record.state != plait_core::state::TaskState::Interrupted;
        Ok(Json(json!({
            "task": record,
            "steerable": steerable,
            "told": told(record),
            "prompt": plan.as_ref().map(|p| p.prompt.clone()),
            "agent": plan.as_ref().map(|p| p.agent.clone()),
            "attempts": super::attempts::of(record, agents),
            "owns": plan.map(|p| p.owns).unwrap_or_default(),
            "group": state.group_of(&task).map(|g| g.id.clone()),
            "conflicts": conflicts,
            "culprit": state.culprits.as_ref().is_some_and(|c| c.blames(&task)),
            "checks": checks,
            "rounds": rounds::rounds(record, task_dir.path()),
            "branch": super::branches::of_task(&repo, state, record),
            "adopted": rounds::adopted(record),
            "transcript": plait_llm::readable::read(&task_dir.transcript()),
            // A task run as attempts ran nothing itself: its chosen attempt's log.
            "log": tail(&record.log)
                .or_else(|| record.chosen().and_then(|a| tail(&a.log)))
                .unwrap_or_default(),
            "violation_diffs": violation_diffs(&task_dir.violations()),
        })))
    })
    .await
}

/// What people told a task and its attempts while they ran (each attempt's after the
/// task's, named in `to`), with whether its agent heard it (`report::heard_note`).
fn told(task: &TaskRecord) -> Vec<Value> {
    task.with_attempts()
        .flat_map(|record| {
            let to = (record.id != task.id).then_some(record.id.as_str());
            record.told.iter().map(move |told| {
                json!({
                    "to": to,
                    "text": told.text,
                    "by": told.by,
                    "at": told.at,
                    "way": told.way,
                    "round": told.round,
                    "heard_at": told.heard_at,
                    "heard": plait_stages::report::heard_note(record, told),
                })
            })
        })
        .collect()
}

/// What the run's copy of its plan says of a task.
struct PlanTask {
    prompt: String,
    /// Its agent, in one line.
    agent: String,
    owns: Vec<String>,
    /// Each of its attempts' agent, first to last.
    attempt_agents: Vec<String>,
}

/// The prompt, agent, ownership and (for `attempts` of them) its attempts' agents of task
/// `task` in the run's copy of its plan. Attempt `n` runs the `n`th of the task's `agents`
/// (or `[defaults] agents` when the task names no `agent`), round and round; without
/// them, the task's agent.
fn plan_task(copy: &Path, task: &str, attempts: usize) -> Option<PlanTask> {
    use plait_plan::AgentSpec;
    let text = std::fs::read_to_string(copy).ok()?;
    let plan = plait_plan::parse(&text, copy).ok()?;
    let spec = plan.tasks.iter().find(|t| t.id == task)?;
    let named = |agent: Option<&AgentSpec>| match agent {
        Some(AgentSpec::Named(name)) => name.clone(),
        Some(AgentSpec::Exec(command)) => format!("exec: {command}"),
        Some(AgentSpec::Cli(spec)) => format!("cli: {}", spec.argv.join(" ")),
        None => "the plan's default model".to_string(),
    };
    let agent = named(spec.agent.as_ref().or(plan.defaults.agent.as_ref()));
    let list = match (&spec.agents, &spec.agent) {
        (Some(list), _) => Some(list),
        (None, None) => plan.defaults.agents.as_ref(),
        (None, Some(_)) => None,
    };
    let attempt_agents = match list.filter(|l| !l.is_empty()) {
        Some(list) => (0..attempts)
            .map(|i| named(Some(&list[i % list.len()])))
            .collect(),
        None => vec![agent.clone(); attempts],
    };
    Some(PlanTask {
        prompt: spec.prompt.clone(),
        agent,
        owns: spec.owns.clone(),
        attempt_agents,
    })
}

/// The diffs of a task's violations, as collect kept them (`collect::violations`): one
/// [`plait_stages::report::diff::FileDiff`] per path; none when it kept none here.
fn violation_diffs(path: &Path) -> Value {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| json!([]))
}

/// The last [`LOG_TAIL`] bytes of the file at `path`.
fn tail(path: &Path) -> Option<String> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let skipped = len.saturating_sub(LOG_TAIL);
    file.seek(SeekFrom::Start(skipped)).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Some(if skipped > 0 {
        format!("[… the first {skipped} bytes left out]\n{text}")
    } else {
        text
    })
}

/// `GET /api/runs/{run}/tasks/{task}/diff`: the task's branch against the run's base; or,
/// for an attempt (`<task>~<n>`), the attempt's branch against where its task started.
pub(super) async fn diff(
    State(app): State<Arc<App>>,
    UrlPath((run, task)): UrlPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    blocking(move || {
        let (repo, store) = store(&app)?;
        let loaded = loaded(&app, store, &run)?;
        let state = &loaded.state;
        // A task that comes after others shows its own work, from its start.
        let Some((record, from)) = super::attempts::work_of(state, &task) else {
            return Err(ApiError::not_found(format!(
                "run {} has no task `{task}`",
                state.id
            )));
        };
        let base = git2::Oid::from_str(from)
            .map_err(|e| ApiError::internal(format!("the task's start: {e}")))?;
        // The branch as it is now (a person may have moved it), else the run's commit.
        let tip = repo
            .find_reference(&plait_core::refs::branch_ref(&record.branch))
            .ok()
            .and_then(|r| r.peel_to_commit().ok())
            .map(|c| c.id())
            .or_else(|| {
                record
                    .commit
                    .as_deref()
                    .and_then(|c| git2::Oid::from_str(c).ok())
            });
        let files = match tip {
            Some(tip) => plait_stages::report::file_diffs(&repo, base, tip)
                .map_err(|e| ApiError::internal(format!("cannot diff task {task}: {e}")))?,
            None => Vec::new(),
        };
        Ok(Json(json!({
            "base": from,
            "tip": tip.map(|t| t.to_string()),
            "files": files,
        })))
    })
    .await
}
