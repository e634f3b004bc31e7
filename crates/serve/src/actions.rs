//! The API's decisions and steering. `accept`, `reject`, `send-back` and `land` call the
//! same use cases as the commands (`ops::decide`, `ops::send_back`, `ops::land`), and `tell`
//! and `stop` the one of `plait tell` and `plait stop` (`ops::steer`), in this process, and
//! answer with what the command would say: its message, or its error with the status its
//! kind calls for. A send-back runs a whole round of an agent, which outlives the request:
//! the page follows it through the run's events; a tell or a stop is answered by the run's
//! own process, and what it does shows in the run's record.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{blocking, cache, ApiError, App};
use plait::ops;
use plait_core::state::Verdict;
use plait_core::sync::Locked as _;
use plait_run::steer::Ask;
use plait_stages::land::LandOutcome;

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

/// The body of a message told to a running task (`tell`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TellBody {
    /// What to tell its agent.
    #[serde(default)]
    message: String,
}

/// The body of a stop (`stop`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StopBody {
    /// Collect and judge its work so far instead of leaving it out.
    #[serde(default)]
    keep: bool,
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
            blocking(move || {
                let request = ops::decide::DecideRequest {
                    run: Some(&run),
                    id: &task,
                    verdict,
                };
                let decided =
                    ops::decide::decide(&app.settings.context, request).map_err(ops_error)?;
                let message = plait::words::decided(&decided);
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

/// `POST /api/runs/{run}/tasks/{task}/tell`: tells a running task's agent the body's
/// `message`, as `plait tell` does.
pub(super) async fn tell(
    State(app): State<Arc<App>>,
    UrlPath((run, task)): UrlPath<(String, String)>,
    body: Option<Json<TellBody>>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    steer(&app, &run, &task, Ask::Tell { text: body.message }).await
}

/// `POST /api/runs/{run}/tasks/{task}/stop`: stops a running task (with `keep`, to judge
/// its work so far), as `plait stop` does.
pub(super) async fn stop(
    State(app): State<Arc<App>>,
    UrlPath((run, task)): UrlPath<(String, String)>,
    body: Option<Json<StopBody>>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    steer(&app, &run, &task, Ask::Stop { keep: body.keep }).await
}

/// Hands `ask` for task `task` of run `run` to the run's process, from the page: answered
/// with the run's answer, or (202) told the run has not answered yet. The use case checks
/// the task (an attempt's id, `<task>~<n>`, will do), which reaches the run as data only.
async fn steer(
    app: &Arc<App>,
    run: &str,
    task: &str,
    ask: Ask,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let run = resolve(app, run, None).await?;
    let request = ops::steer::SteerRequest {
        run: &run,
        task,
        ask,
        by: "page",
    };
    let steered = ops::steer::steer(&app.settings.context, request)
        .await
        .map_err(ops_error)?;
    Ok(match steered.answer {
        Some(answer) => (StatusCode::OK, Json(json!({"message": answer}))),
        None => {
            let message = format!(
                "{}; this page shows it when it does",
                plait::words::not_answered(&steered.run)
            );
            (StatusCode::ACCEPTED, Json(json!({"message": message})))
        }
    })
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
        let request = ops::land::LandRequest {
            run: Some(&run),
            into: &body.into,
            partial: body.partial,
        };
        // The landing's merge and checks run on a runtime of their own, off the server's.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ApiError::internal(format!("cannot start the landing: {e}")))?;
        let landing = runtime
            .block_on(ops::land::land(&app.settings.context, request))
            .map_err(ops_error)?;
        let mut said = plait::words::landing_notes(&landing);
        if let LandOutcome::Refused(refusal) = &landing.outcome {
            let (message, hint) =
                plait::words::land_refusal(&landing.run, &body.into, &landing.state, refusal);
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("{message}\nhint: {hint}"),
            ));
        }
        said.extend(plait::words::landing_line(&landing));
        Ok((StatusCode::OK, Json(json!({"message": said.join("\n")}))))
    })
    .await
}

/// The status and message of a use case's error, as the command's exit code would say
/// (`OpsError`'s one classification of whose the failure is).
fn ops_error(e: ops::OpsError) -> ApiError {
    use ops::{Fault, Faulty as _};
    let status = match e.fault() {
        Fault::Request => StatusCode::BAD_REQUEST,
        Fault::Waiting => StatusCode::CONFLICT,
        Fault::Plait => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, e.to_string())
}

/// The full id of the run `run` names, which must have task (or group) `task` if one is
/// named: nothing the page sends reaches a command or a path unchecked.
async fn resolve(app: &Arc<App>, run: &str, task: Option<&str>) -> Result<String, ApiError> {
    let (app, run, task) = (app.clone(), run.to_string(), task.map(str::to_string));
    blocking(move || {
        let (_repo, store) = cache::store(&app)?;
        let loaded = cache::loaded(&app, store, &run)?;
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

/// Sends task `task` back for one more round, in this process: answered with its outcome
/// if the round ends quickly (or is refused), else told it is under way (its progress then
/// arrives as the run's events). The round goes on after the request, under the server's
/// cancellation, and what it came to is written to the task's `send-back.log`.
async fn send_back(
    app: &Arc<App>,
    run: &str,
    task: &str,
    comment: &str,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let log_path = cache::store(app)?
        .1
        .task_dir(run, task)
        .join("send-back.log");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let watch = ops::running::Watch {
        started: Some(started_tx),
        updates: None,
        cancel: app.cancel.clone(),
    };
    let mut round = {
        let (context, run, task, comment) = (
            app.settings.context.clone(),
            run.to_string(),
            task.to_string(),
            comment.to_string(),
        );
        tokio::spawn(async move {
            let request = ops::send_back::SendBackRequest {
                run: &run,
                task: &task,
                comment: &comment,
            };
            let ended = ops::send_back::send_back(&context, request, watch).await;
            let text = match &ended {
                Ok(state) => plait_stages::report::status_text(state, false),
                Err(e) => format!("error: {e}\n"),
            };
            if let Err(e) = std::fs::write(&log_path, text) {
                tracing::warn!("cannot write {}: {e}", log_path.display());
            }
            ended.map(|_| ()).map_err(ops_error)
        })
    };
    // A refusal comes before the round starts; the round's own failure is written to its
    // log as well.
    let warnings = match started_rx.await {
        Ok(started) => started.warnings,
        Err(_) => {
            return match (&mut round).await {
                Ok(Err(e)) => Err(e),
                Ok(Ok(())) => Err(ApiError::internal("the round ended before it started")),
                Err(e) => Err(ApiError::internal(format!("the round failed: {e}"))),
            }
        }
    };
    let mut said = Vec::from_iter(warnings.iter().map(|w| format!("warning: {w}")));
    match tokio::time::timeout(SEND_BACK_WAIT, &mut round).await {
        Ok(joined) => {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(e) => return Err(ApiError::internal(format!("the round failed: {e}"))),
            }
            said.push(format!(
                "task {task} of run {run} went back for one more round and has ended it"
            ));
            Ok((StatusCode::OK, Json(json!({"message": said.join("\n")}))))
        }
        Err(_) => {
            // It goes on; the server waits for it (or for its interruption) before it ends.
            app.rounds.locked().push(round);
            said.push(format!(
                "task {task} of run {run} was sent back for one more round; its progress shows here as it goes"
            ));
            Ok((
                StatusCode::ACCEPTED,
                Json(json!({"message": said.join("\n")})),
            ))
        }
    }
}
