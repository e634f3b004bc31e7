//! The API's decisions. `accept`, `reject` and `land` call the same use cases as the
//! commands (`ops::decide`, `ops::land`), in this process, and answer with what the
//! command would say: its message, or its error with the status its kind calls for.
//! `send-back` runs a whole round of an agent, so it runs as `plait send-back` in a
//! process of its own, which outlives a request and is followed through the run's events.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{blocking, data, ApiError, App};
use crate::land::LandOutcome;
use crate::ops;
use crate::state::Verdict;

/// How long a send-back is waited for before the page is told it is under way (its
/// progress then arrives as events).
const SEND_BACK_WAIT: Duration = Duration::from_secs(2);

/// The body of a decision.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DecisionBody {
    /// For `send-back`: what the agent should change.
    #[serde(default)]
    comment: Option<String>,
}

/// The body of a landing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LandBody {
    into: String,
    #[serde(default)]
    partial: bool,
}

/// `POST /api/runs/{run}/tasks/{task}/{accept|reject|send-back}`.
pub(super) async fn decide(
    State(app): State<Arc<App>>,
    UrlPath((run, task, action)): UrlPath<(String, String, String)>,
    body: Option<Json<DecisionBody>>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let run = resolve(&app, &run, Some(&task)).await?;
    match action.as_str() {
        "accept" | "reject" => {
            let verdict = if action == "accept" {
                Verdict::Approve
            } else {
                Verdict::Reject
            };
            let repo = app.settings.repo.clone();
            blocking(move || {
                let decided =
                    ops::decide::decide(&repo, Some(&run), &task, verdict).map_err(ops_error)?;
                let message = decided.message();
                Ok((StatusCode::OK, Json(json!({"message": message}))))
            })
            .await
        }
        "send-back" => {
            let comment = body.comment.unwrap_or_default();
            if comment.trim().is_empty() {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "a send-back needs a comment: say what the agent should change",
                ));
            }
            send_back(&app, &run, &task, &comment).await
        }
        other => Err(ApiError::not_found(format!(
            "no decision `{other}`: accept, reject or send-back"
        ))),
    }
}

/// `POST /api/runs/{run}/land`.
pub(super) async fn land(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
    Json(body): Json<LandBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let run = resolve(&app, &run, None).await?;
    let app = app.clone();
    blocking(move || {
        let env = app.settings.env.clone();
        let env = move |name: &str| env(name);
        let request = ops::land::LandRequest {
            dir: &app.settings.repo,
            run: Some(&run),
            into: &body.into,
            partial: body.partial,
            env: &env,
        };
        // The landing's merge and checks run on a runtime of their own, off the server's.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ApiError::internal(format!("cannot start the landing: {e}")))?;
        let landing = runtime
            .block_on(ops::land::land(&request))
            .map_err(ops_error)?;
        let mut said = landing.notes();
        if let LandOutcome::Refused(refusal) = &landing.outcome {
            let (message, hint) =
                ops::land::refusal_text(&landing.run, &body.into, &landing.state, refusal);
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("{message}\nhint: {hint}"),
            ));
        }
        said.extend(landing.outcome_line());
        Ok((StatusCode::OK, Json(json!({"message": said.join("\n")}))))
    })
    .await
}

/// The status and message of a use case's error, as the command's exit code would say.
fn ops_error(e: ops::OpsError) -> ApiError {
    use ops::{Fault, OpsError};
    let status = match e.fault() {
        Fault::Request => StatusCode::BAD_REQUEST,
        Fault::Waiting => StatusCode::CONFLICT,
        Fault::Plait => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let hint = match &e {
        OpsError::Refused { hint: Some(h), .. } | OpsError::Busy { hint: Some(h), .. } => {
            format!("\nhint: {h}")
        }
        _ => String::new(),
    };
    ApiError::new(status, format!("{e}{hint}"))
}

/// The full id of the run `run` names, which must have task (or group) `task` if one is
/// named: nothing the page sends reaches a command or a path unchecked.
async fn resolve(app: &Arc<App>, run: &str, task: Option<&str>) -> Result<String, ApiError> {
    let (app, run, task) = (app.clone(), run.to_string(), task.map(str::to_string));
    blocking(move || {
        let (_repo, store) = data::store(&app)?;
        let loaded = data::loaded(&app, &store, &run)?;
        let state = &loaded.state;
        if let Some(task) = task {
            if state.task(&task).is_none() && !state.groups.iter().any(|g| g.id == task) {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("run {} has no task `{task}`", state.id),
                ));
            }
        }
        Ok(state.id.clone())
    })
    .await
}

/// `plait -C REPO ARGS…`, its output kept.
fn plait(app: &App, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(&app.settings.plait_program);
    command
        .arg("-C")
        .arg(&app.settings.repo)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .kill_on_drop(false);
    command
}

/// The answer for a command that ended with `code`, having said `stdout` and `stderr`.
fn answer(
    code: Option<i32>,
    stdout: String,
    stderr: String,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let both = [stdout.as_str(), stderr.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    let error = || both.strip_prefix("error: ").unwrap_or(&both).to_string();
    match code {
        Some(0) => Ok((StatusCode::OK, Json(json!({"message": both})))),
        // Finished, but what was asked did not happen (a refused landing) or the run
        // needs attention.
        Some(1) | Some(130) => Err(ApiError::new(StatusCode::CONFLICT, error())),
        Some(2) => Err(ApiError::new(StatusCode::BAD_REQUEST, error())),
        _ => Err(ApiError::internal(error())),
    }
}

/// Starts `plait send-back`: answered with its outcome if it ends quickly, else told it
/// is under way. Its output goes to the task's directory.
async fn send_back(
    app: &Arc<App>,
    run: &str,
    task: &str,
    comment: &str,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let (_, store) = data::store(app)?;
    let task_dir = store.task_dir(run, task);
    if !task_dir.is_dir() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`{task}` is a group of run {run}: send back one of its tasks"),
        ));
    }
    let log_path = task_dir.join("send-back.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| ApiError::internal(format!("{}: {e}", log_path.display())))?;
    let err_log = log
        .try_clone()
        .map_err(|e| ApiError::internal(format!("{}: {e}", log_path.display())))?;
    let comment = format!("--comment={comment}");
    let mut child = plait(app, &["send-back", &comment, "--", run, task])
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err_log))
        .spawn()
        .map_err(|e| ApiError::internal(format!("cannot run plait send-back: {e}")))?;
    match tokio::time::timeout(SEND_BACK_WAIT, child.wait()).await {
        Ok(status) => {
            let status = status.map_err(|e| ApiError::internal(format!("plait send-back: {e}")))?;
            let said = std::fs::read_to_string(&log_path).unwrap_or_default();
            match status.code() {
                // The round ran (1: the run needs attention, as it may have before).
                Some(0) | Some(1) => Ok((
                    StatusCode::OK,
                    Json(json!({"message": format!(
                        "task {task} of run {run} went back for one more round and has ended it"
                    )})),
                )),
                code => answer(code, String::new(), last_error(&said)),
            }
        }
        Err(_) => {
            // It goes on; its end is reaped here, its progress read from the run's events.
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            Ok((
                StatusCode::ACCEPTED,
                Json(json!({"message": format!(
                    "task {task} of run {run} was sent back for one more round; its progress shows here as it goes"
                )})),
            ))
        }
    }
}

/// The error lines of a command's output (from its `error:` line on).
fn last_error(output: &str) -> String {
    match output.find("error: ") {
        Some(at) => output[at..].trim().to_string(),
        None => output.trim().to_string(),
    }
}
