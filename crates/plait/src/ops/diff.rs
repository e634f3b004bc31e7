//! What a run's task, group or merge changed: the use case behind `plait diff`. It finds
//! the two commits to compare; the caller says the diff its own way
//! (`report::diff::diff_text`).

use git2::Oid;

use plait_stages::context::Context;

use super::OpsError;

/// Whose changes are asked for.
pub struct DiffRequest<'a> {
    /// The run, as the user named it (a prefix of its id will do).
    pub run: &'a str,
    /// A task's id, an attempt's (`<task>~<n>`), a group's (`group-<k>`), or `merged` for
    /// the run's merge.
    pub what: &'a str,
    /// For a task that started from the tasks it comes after: against the run's base
    /// instead of its start.
    pub from_base: bool,
}

/// The two ends of the changes asked for.
#[derive(Debug, Clone)]
pub struct Ends {
    /// The run's full id.
    pub run: String,
    /// Where the changes start: the run's base, or a task's start.
    pub base: Oid,
    /// Where they end; `None` for a task that committed nothing.
    pub tip: Option<Oid>,
}

/// The base and tip of what the request names (see [`DiffRequest`]).
pub fn ends(ctx: &Context, request: DiffRequest<'_>) -> Result<Ends, OpsError> {
    let store = ctx.store();
    let run = store.find(Some(request.run))?;
    let state = store.load(&run)?;
    let oid = |text: &str| Oid::from_str(text).map_err(|e| OpsError::Repo(e.into()));
    let mut base = oid(&state.base)?;
    let tip = if request.what == "merged" {
        match &state.merge {
            Some(m) => Some(m.commit.clone()),
            None => {
                return Err(OpsError::NotMerged {
                    run,
                    what: "run".to_string(),
                })
            }
        }
    } else if let Some(group) = state.groups.iter().find(|g| g.id == request.what) {
        match &group.merge {
            Some(m) => Some(m.commit.clone()),
            None => {
                return Err(OpsError::NotMerged {
                    what: group.id.clone(),
                    run,
                })
            }
        }
    } else {
        let Some(task) = state.record(request.what) else {
            return Err(OpsError::NoTask {
                groups: !state.groups.is_empty(),
                id: request.what.to_string(),
                run,
            });
        };
        if let (Some(start), false) = (&task.start, request.from_base) {
            base = oid(start)?;
        }
        task.commit.clone()
    };
    Ok(Ends {
        run,
        base,
        tip: tip.as_deref().map(oid).transpose()?,
    })
}
