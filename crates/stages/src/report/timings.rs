//! `plait run --timings`: where a run's time went, step by step.

use std::fmt::Write as _;

use plait_core::state::RunState;

/// The run's steps (wall time, one after another) and its tasks' steps (summed over every
/// task and round, so they may add up to more than the tasks' wall time when tasks run at
/// once). `command_started` is when the command began (ms since the epoch): the time before
/// the run's record was made is the plan's reading and checking.
pub fn timings_text(state: &RunState, command_started: Option<u64>) -> String {
    let mut out = String::new();
    let ended = state.finished_at.unwrap_or_else(plait_core::state::now_ms);
    let begun = command_started.unwrap_or(state.created_at);
    let _ = writeln!(
        out,
        "timings ({} in all):",
        secs(ended.saturating_sub(begun))
    );
    let mut rows: Vec<(String, u64, String)> = Vec::new();
    if let Some(started) = command_started {
        rows.push((
            "plan (read, checked, resolved)".into(),
            state.created_at.saturating_sub(started),
            String::new(),
        ));
    }
    let mut accounted = 0;
    for t in state.timings.iter().filter(|t| !t.task) {
        accounted += t.ms;
        rows.push((t.step.clone(), t.ms, String::new()));
    }
    let run_ms = ended.saturating_sub(state.created_at);
    if !state.timings.is_empty() && run_ms > accounted + 5 {
        rows.push((
            "the rest (record, report)".into(),
            run_ms - accounted,
            String::new(),
        ));
    }
    let tasks: Vec<_> = state.timings.iter().filter(|t| t.task).collect();
    if !tasks.is_empty() {
        rows.push(("tasks' steps, summed:".into(), u64::MAX, String::new()));
        for t in tasks {
            let each = t.ms / u64::from(t.count.max(1));
            rows.push((
                format!("  {}", t.step),
                t.ms,
                format!("{}× · {} each", t.count, secs(each)),
            ));
        }
    }
    if state.timings.is_empty() {
        let _ = writeln!(out, "  (this run's record keeps no timings)");
    }
    let width = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    for (step, ms, note) in rows {
        if ms == u64::MAX {
            let _ = writeln!(out, "  {step}");
            continue;
        }
        let line = format!("  {step:<width$}  {:>8}  {note}", secs(ms));
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

fn secs(ms: u64) -> String {
    format!("{:.2}s", ms as f64 / 1000.0)
}
