//! Steering one task of a running run: `plait tell RUN TASK -m TEXT` and `plait stop RUN
//! TASK [--keep]` (and the page's box and button). The request is handed to the run's own
//! process through its directory (`plait_run::steer`) and its answer waited for.

use std::time::Duration;

use plait_core::state::now_ms;
use plait_run::steer::{self, Ask, Request};
use plait_stages::context::Context;

use super::OpsError;

/// How long the run's answer is waited for.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// What a person asks of one task of a running run.
pub struct SteerRequest<'a> {
    /// The run, as the user named it (a prefix of its id will do).
    pub run: &'a str,
    /// The task (or an attempt of one, `<task>~<n>`).
    pub task: &'a str,
    /// What is asked: a message to tell it, or a stop.
    pub ask: Ask,
    /// Where from: `command line` or `page`.
    pub by: &'a str,
}

/// What became of a request.
#[derive(Debug, Clone)]
pub struct Steered {
    /// The run's full id.
    pub run: String,
    /// The run's answer; `None` when it did not answer in time (it takes the request
    /// when it next looks).
    pub answer: Option<String>,
}

/// Hands the request to the run's process and waits for its answer. Refused for a run that
/// is not going, a task it does not have, one that has ended, and what the run refuses.
pub async fn steer(ctx: &Context, request: SteerRequest<'_>) -> Result<Steered, OpsError> {
    let store = ctx.store();
    let run = store.find(Some(request.run))?;
    let state = store.load(&run)?;
    let doing = match request.ask {
        Ask::Tell { .. } => "tell a task",
        Ask::Stop { .. } => "stop a task",
    };
    if !store.is_running(&run) {
        return Err(OpsError::NotGoing {
            run,
            phase: state.phase.as_str(),
            doing,
        });
    }
    let Some(record) = state.record(request.task) else {
        return Err(OpsError::NoTask {
            groups: false,
            run,
            id: request.task.to_string(),
        });
    };
    if record.state.is_final() {
        return Err(OpsError::Steer(format!(
            "task {} has ended ({})",
            record.id,
            record.state.as_str()
        )));
    }
    if let Ask::Tell { text } = &request.ask {
        if text.trim().is_empty() {
            return Err(OpsError::Steer(
                "the message is empty: say what the agent should do".to_string(),
            ));
        }
    }
    let asked = Request {
        task: request.task.to_string(),
        ask: request.ask,
        by: request.by.to_string(),
        at: now_ms(),
    };
    let dir = store.run(&run);
    let path = steer::submit(&dir, &asked).map_err(|source| OpsError::Io {
        path: dir.requests(),
        source,
    })?;
    match steer::await_answer(&path, ANSWER_WAIT).await {
        Some(answer) if answer.ok => Ok(Steered {
            run,
            answer: Some(answer.message),
        }),
        Some(answer) => Err(OpsError::Steer(answer.message)),
        None => Ok(Steered { run, answer: None }),
    }
}
