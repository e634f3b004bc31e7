//! A person's decision on a task or a group of a finished run: accept or reject.

use std::path::Path;

use plait_core::git;
use plait_core::state::{now_ms, Decision, Store, Verdict};

use super::OpsError;

/// What was decided.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decided {
    pub run: String,
    /// The task's (or group's) id.
    pub id: String,
    /// `"task"` or `"group"`.
    pub what: &'static str,
    pub verdict: Verdict,
}

impl Decided {
    /// What the decision did, in words: the same line for the command and the page.
    pub fn message(&self) -> String {
        let word = if self.verdict == Verdict::Approve {
            "accepted"
        } else {
            "rejected"
        };
        format!(
            "{} {} of run {} {word}; `plait land {} --into BRANCH` merges again with this decision",
            self.what, self.id, self.run, self.run
        )
    }
}

/// Records `verdict` on task (or group) `id` of run `run` (or the latest run) of the
/// repository at `dir`. A person's acceptance overrules the culprit search: an accepted
/// task held out as a culprit goes back into the merge. Refused while the run is in
/// progress, and for an id the run does not have.
pub fn decide(
    dir: &Path,
    run: Option<&str>,
    id: &str,
    verdict: Verdict,
) -> Result<Decided, OpsError> {
    let repo = git::open(dir)?;
    let store = Store::new(git::plait_dir(&repo));
    let run = store.find(run)?;
    if store.is_running(&run) {
        return Err(OpsError::refused(
            format!("run {run} is still in progress; decide when it has finished"),
            None,
        ));
    }
    let mut state = store.load(&run)?;
    let decision = Some(Decision {
        verdict,
        at: now_ms(),
    });
    let what = if let Some(group) = state.groups.iter_mut().find(|g| g.id == id) {
        group.decision = decision;
        "group"
    } else if let Some(record) = state.task_mut(id) {
        record.decision = decision;
        if verdict == Verdict::Approve {
            if let Some(culprits) = &mut state.culprits {
                culprits.sets.retain(|s| !s.tasks.iter().any(|t| t == id));
            }
        }
        "task"
    } else {
        let groups = if state.groups.is_empty() {
            ""
        } else {
            " or group"
        };
        return Err(OpsError::refused(
            format!("run {run} has no task{groups} `{id}`"),
            Some(format!("`plait status {run}` lists them")),
        ));
    };
    store.save(&state)?;
    Ok(Decided {
        run,
        id: id.to_string(),
        what,
        verdict,
    })
}
