//! What a run used, as text: tokens, cost and time, per run (the status's usage line,
//! `total_usage`), per task (`task_usage`, its attempts' while they run) and in the cells
//! of the task table.

use std::fmt::Write as _;

use plait_core::state::{RunState, TaskRecord, Usage};

/// The model usage of all tasks together on one line, if any task used a model.
pub(super) fn usage_line(out: &mut String, state: &RunState) {
    let Some(total) = total_usage(state) else {
        return;
    };
    let first: Vec<u64> = state
        .tasks
        .iter()
        .filter_map(|t| task_usage(t)?.first_token_ms)
        .collect();
    let mean_first = if first.is_empty() {
        "-".to_string()
    } else {
        seconds(first.iter().sum::<u64>() / first.len() as u64)
    };
    let about = if total.estimated { "≈" } else { "" };
    let _ = writeln!(
        out,
        "\nmodel: {} request(s) ({} retried), {about}{} input + {about}{} output tokens, cache {} written / {} read; cost {}{}; first token {} (mean); model time {}{}",
        total.requests,
        total.retries,
        total.input_tokens,
        total.output_tokens,
        total.cache_creation_input_tokens,
        total.cache_read_input_tokens,
        match total.cost_usd { Some(c) => format!("${c:.4}"), None => "unknown (no prices for the model)".to_string() },
        if total.cache_saved_usd != 0.0 { format!(" (the cache saved ${:.4})", total.cache_saved_usd) } else { String::new() },
        mean_first,
        seconds(total.model_ms),
        if total.refused_writes > 0 { format!("; {} write(s) outside ownership refused", total.refused_writes) } else { String::new() },
    );
    if total.estimated {
        let _ = writeln!(
            out,
            "≈ estimated: a server sent no usage with its answers, so plait counted about four \
             bytes a token of what was sent and said (`stream = false` in the provider's \
             [providers] table makes a server that leaves usage out of its streams count)"
        );
    }
    if total.runs > 0 {
        let _ = writeln!(
            out,
            "commands: {} run by model agents, {} in all",
            total.runs,
            seconds(total.run_ms)
        );
    }
}

/// The model usage of all tasks together, if any task used a model; a task whose
/// attempts are still running counts what they used so far.
pub fn total_usage(state: &RunState) -> Option<Usage> {
    let mut used = state.tasks.iter().filter_map(task_usage).peekable();
    used.peek()?;
    let mut total = Usage {
        cost_usd: Some(0.0),
        ..Usage::default()
    };
    for u in used {
        total.add(&u);
    }
    Some(total)
}

/// What `task` used: its own record's usage, or, while its attempts run and nothing is
/// picked yet (the task's usage sums them only then), theirs added up.
pub fn task_usage(task: &TaskRecord) -> Option<std::borrow::Cow<'_, Usage>> {
    match &task.usage {
        Some(u) => Some(std::borrow::Cow::Borrowed(u)),
        None => task.attempts_usage(None).map(std::borrow::Cow::Owned),
    }
}

pub(super) fn tokens(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 10_000 {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

pub(super) fn cost(c: Option<f64>) -> String {
    match c {
        Some(c) => format!("${c:.4}"),
        None => "?".to_string(),
    }
}

pub(super) fn seconds(ms: u64) -> String {
    if ms < 10_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 600_000 {
        format!("{}s", ms / 1000)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}
