//! The run page's summary of a run (`GET /api/runs/{run}/summary`): the run's header, gate
//! and totals, and per task only what its row shows, so a run of 10,000 tasks is a few
//! hundred bytes a task instead of its whole record; the rest of a task comes with its own
//! page. Also the search over what the rows leave out (changed paths), and what changed
//! between two versions, which the event stream sends instead of the whole summary.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::{json, Value};

use plait_core::state::{RunState, TaskRecord, TaskState, Verdict};

/// How much of a task's error a row carries.
const ERROR_CHARS: usize = 240;

/// One task as its row on the run page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct Row {
    pub id: String,
    pub state: TaskState,
    /// The verdict that counts: a person's over the reviewer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Who gave it: `person`, or the reviewer (`model`, `command`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The reviewer's verdict, when a person's decision overrules it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overruled: Option<Verdict>,
    /// The last round's checks: how many passed, of how many.
    pub checks: [usize; 2],
    /// The commands of the checks that failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    pub files: usize,
    pub violations: usize,
    /// Rounds of changes after the first try.
    pub rounds: u32,
    /// How many times a person sent it back.
    #[serde(skip_serializing_if = "is_zero")]
    pub sent_back: usize,
    /// Input and output tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<[u64; 2]>,
    /// Some of them are plait's estimate (a server sent no usage): shown with `≈`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tokens_estimated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    /// Why it failed, cut to a line's worth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// What holds up the landing in it, as the gate counts it (`land::troubles`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub troubles: Vec<plait_stages::land::Trouble>,
    /// Whether it needs a person: a trouble, a conflict or a culprit. The page's "needs
    /// attention" shows these, and derives nothing itself.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub attention: bool,
    /// In a conflict of a merge.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub conflict: bool,
    /// Held out of the merge by the culprit search.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub culprit: bool,
    /// Left out of a merge.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub excluded: bool,
    /// The commit made by hand on its branch that plait collected, if one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adopted: Option<String>,
    /// The tasks it comes after (`after`), directly.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Those that keep it from starting (state `blocked`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<String>,
    /// Left out of the merge because a task it comes after is not in it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub waiting: bool,
    /// Its wave: 0 when it comes after no task, else one more than the deepest it comes
    /// after (the page orders a run in waves by it).
    #[serde(skip_serializing_if = "is_zero")]
    pub wave: usize,
    /// How many attempts it runs as (`attempts`); 0: it runs once.
    #[serde(skip_serializing_if = "is_zero")]
    pub attempts: usize,
    /// The number of the attempt chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen: Option<u32>,
    /// Who chose it: `checks`, `command`, the judge, `person`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen_by: Option<String>,
    /// Why its agent said there was nothing to do, when it changed nothing for that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nothing_to_do: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A run as its page shows it before a task is opened.
#[derive(Debug)]
pub(super) struct Summary {
    /// `run` (the record without its tasks), `gate`, `attention` and `totals`.
    pub head: serde_json::Map<String, Value>,
    pub rows: Vec<Row>,
}

impl Summary {
    pub fn of(state: &RunState) -> Summary {
        let facts = Facts::of(state);
        let rows = state.tasks.iter().map(|t| facts.row(t)).collect();
        let mut head = serde_json::Map::new();
        head.insert("run".into(), run_head(state));
        head.insert("gate".into(), gate(state));
        head.insert(
            "attention".into(),
            json!(plait_stages::report::attention(state)),
        );
        head.insert("totals".into(), totals(state));
        Summary { head, rows }
    }

    /// The summary's JSON: its head with `live`, the record's `version` (as the `state`
    /// events name it) and the rows as `tasks`.
    pub fn to_json(&self, live: bool, version: &str) -> Result<Vec<u8>, serde_json::Error> {
        let mut out = self.head.clone();
        out.insert("live".into(), json!(live));
        out.insert("version".into(), json!(version));
        out.insert("tasks".into(), serde_json::to_value(&self.rows)?);
        serde_json::to_vec(&out)
    }

    /// What changed from `old` to this one, as a `state` event says it: the head and the
    /// rows that differ; `None` when the tasks themselves changed (added, removed,
    /// reordered), or so many rows did that the page had better read the summary again.
    pub fn changes_since(&self, old: &Summary) -> Option<Vec<&Row>> {
        if old.rows.len() != self.rows.len() {
            return None;
        }
        let mut changed = Vec::new();
        for (new, old) in self.rows.iter().zip(&old.rows) {
            if new.id != old.id {
                return None;
            }
            if new != old {
                changed.push(new);
            }
        }
        (changed.len() <= 500 || changed.len() * 4 <= self.rows.len()).then_some(changed)
    }
}

/// What the run knows of a task beyond its record.
struct Facts<'a> {
    conflict: HashSet<&'a str>,
    culprit: HashSet<&'a str>,
    excluded: HashSet<&'a str>,
    waiting: HashSet<&'a str>,
    group: HashMap<&'a str, &'a str>,
    wave: HashMap<&'a str, usize>,
}

impl<'a> Facts<'a> {
    fn of(state: &'a RunState) -> Facts<'a> {
        let merges = state
            .merge
            .iter()
            .chain(state.groups.iter().filter_map(|g| g.merge.as_ref()));
        let (mut conflict, mut excluded) = (HashSet::new(), HashSet::new());
        let waiting = state
            .merge
            .iter()
            .flat_map(|m| m.waiting.iter().map(String::as_str))
            .collect();
        for m in merges {
            conflict.extend(
                m.conflicts
                    .iter()
                    .flat_map(|c| c.tasks.iter().map(String::as_str)),
            );
            excluded.extend(m.excluded.iter().map(String::as_str));
        }
        let culprit = state
            .culprits
            .iter()
            .flat_map(|c| &c.sets)
            .flat_map(|s| s.tasks.iter().map(String::as_str))
            .collect();
        let group = state
            .groups
            .iter()
            .flat_map(|g| g.tasks.iter().map(|t| (t.as_str(), g.id.as_str())))
            .collect();
        let wave = state
            .tasks
            .iter()
            .zip(state.waves())
            .filter(|(_, w)| *w > 0)
            .map(|(t, w)| (t.id.as_str(), w))
            .collect();
        Facts {
            conflict,
            culprit,
            excluded,
            waiting,
            group,
            wave,
        }
    }

    fn row(&self, t: &TaskRecord) -> Row {
        let id = t.id.as_str();
        let overruled = match (&t.decision, &t.review) {
            (Some(d), Some(r)) if d.verdict != r.verdict => Some(r.verdict),
            _ => None,
        };
        let by = match (&t.decision, &t.review) {
            (Some(_), _) => Some("person".to_string()),
            (None, Some(r)) => Some(r.by.clone()),
            (None, None) => None,
        };
        let troubles = plait_stages::land::troubles(t);
        // While its attempts run, what they used so far.
        let usage = plait_stages::report::task_usage(t);
        let (conflict, culprit) = (self.conflict.contains(id), self.culprit.contains(id));
        Row {
            attention: !troubles.is_empty() || conflict || culprit,
            troubles,
            id: t.id.clone(),
            state: t.state,
            verdict: t.verdict(),
            by,
            overruled,
            checks: [t.checks.iter().filter(|c| c.passed).count(), t.checks.len()],
            failed: t
                .checks
                .iter()
                .filter(|c| !c.passed)
                .map(|c| c.command.clone())
                .collect(),
            files: t.changes.len(),
            violations: t.violations.len(),
            rounds: t.rounds,
            sent_back: t.sent_back.len(),
            tokens: usage.as_ref().map(|u| [u.input_tokens, u.output_tokens]),
            tokens_estimated: usage.as_ref().is_some_and(|u| u.estimated),
            cost_usd: usage.as_ref().and_then(|u| u.cost_usd),
            started_at: t.started_at,
            finished_at: t.finished_at,
            error: t.error.as_deref().map(cut),
            group: self.group.get(id).map(|g| g.to_string()),
            conflict,
            culprit,
            excluded: self.excluded.contains(id),
            adopted: super::rounds::adopted(t),
            after: t.after.clone(),
            blocked_by: t.blocked_by.clone(),
            waiting: self.waiting.contains(id),
            wave: self.wave.get(id).copied().unwrap_or(0),
            attempts: t.attempts.len(),
            chosen: t.pick.as_ref().map(|p| p.attempt),
            chosen_by: t.pick.as_ref().map(|p| p.by.clone()),
            nothing_to_do: t
                .nothing_to_do
                .as_deref()
                .filter(|_| t.commit.is_none())
                .map(cut),
        }
    }
}

/// `text`'s first line, cut to [`ERROR_CHARS`] characters.
fn cut(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(ERROR_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None if line.len() < text.trim_end().len() => format!("{line} …"),
        None => line.to_string(),
    }
}

/// The run's record without its tasks; the merges' lists of tasks as counts, the groups'
/// as their size.
fn run_head(state: &RunState) -> Value {
    let merge = state.merge.as_ref().map(|m| {
        json!({
            "branch": m.branch,
            "commit": m.commit,
            "tasks_included": m.included.len(),
            "tasks_excluded": m.excluded.len(),
            "conflicts": m.conflicts,
        })
    });
    let groups: Vec<Value> = state
        .groups
        .iter()
        .map(|g| {
            json!({
                "id": g.id,
                "branch": g.branch,
                "tasks": g.tasks.len(),
                "supervised": g.supervised,
                "review": g.review,
                "decision": g.decision,
                "merged_up": g.merged_up,
                "conflicts": g.merge.as_ref().map_or(0, |m| m.conflicts.len()),
            })
        })
        .collect();
    json!({
        "id": state.id,
        "goal": state.goal,
        "phase": state.phase,
        "base": state.base,
        "base_name": state.base_name,
        "created_at": state.created_at,
        "finished_at": state.finished_at,
        "max_cost": state.max_cost,
        "cleaned": state.cleaned,
        "landed": state.landed,
        "merge": merge,
        "merged_checks": state.merged_checks,
        "groups": groups,
        "culprits": state.culprits,
    })
}

/// The gate: green, or the blockers as `plait land` says them; and `landed`, the landing
/// that holds the run's merge as it is now (`land::current_landing`), when one does. The
/// page says "landed" from that alone: after a `--partial` landing the blockers are what
/// it left out, and there is nothing left to land until a decision changes the merge.
pub(super) fn gate(state: &RunState) -> Value {
    let blockers: Vec<String> = plait_stages::land::gate(state, false)
        .iter()
        .map(|b| plait_stages::report::blocker_line(b, &state.id))
        .collect();
    let landed = plait_stages::land::current_landing(state);
    json!({"green": blockers.is_empty(), "blockers": blockers, "landed": landed})
}

/// The tasks by state.
pub(super) fn states(tasks: &[TaskRecord]) -> std::collections::BTreeMap<&'static str, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for t in tasks {
        *counts.entry(t.state.as_str()).or_insert(0) += 1;
    }
    counts
}

/// The run's totals: tasks by state, files, violations, tokens, cost and time.
pub(super) fn totals(state: &RunState) -> Value {
    let usage = plait_stages::report::total_usage(state).unwrap_or_default();
    let elapsed = state
        .finished_at
        .unwrap_or_else(plait_core::state::now_ms)
        .saturating_sub(state.created_at);
    json!({
        "tasks": state.tasks.len(),
        "states": states(&state.tasks),
        "changed_files": state.tasks.iter().map(|t| t.changes.len()).sum::<usize>(),
        "violations": state.tasks.iter().map(|t| t.violations.len()).sum::<usize>(),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "usage_estimated": usage.estimated,
        "cost_usd": usage.cost_usd,
        "elapsed_ms": elapsed,
    })
}

/// The tasks whose id, error, summary or changed paths, or an attempt's id or error,
/// contain `query` (ignoring case).
pub(super) fn search<'a>(state: &'a RunState, query: &str) -> Vec<&'a str> {
    let query = query.trim().to_lowercase();
    if query.is_empty() {
        return state.tasks.iter().map(|t| t.id.as_str()).collect();
    }
    let has = |text: &str| text.to_lowercase().contains(&query);
    state
        .tasks
        .iter()
        .filter(|t| {
            has(&t.id)
                || t.error.as_deref().is_some_and(has)
                || t.summary.as_deref().is_some_and(has)
                || t.changes.iter().chain(&t.violations).any(|c| has(&c.path))
                || t.attempts
                    .iter()
                    .any(|a| has(&a.id) || a.error.as_deref().is_some_and(has))
        })
        .map(|t| t.id.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_cut_to_its_first_line_and_a_line_s_worth() {
        assert_eq!(cut("short"), "short");
        assert_eq!(cut("first\nsecond"), "first …");
        let long = "x".repeat(500);
        assert_eq!(cut(&long).chars().count(), ERROR_CHARS + 1);
        assert!(cut(&"é".repeat(300)).ends_with('…'));
    }
}
