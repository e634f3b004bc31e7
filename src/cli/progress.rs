//! Showing a run as it goes: on a terminal, a live display — an overall bar with done,
//! running and failed tasks, tokens, cost and an ETA, and a line per running agent; plain
//! lines when stderr is not a terminal; with `--json`, one JSON event per line on stdout.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::mpsc;

use super::ui::{errln, outln};
use plait_core::state::{split_attempt_id, TaskState, Usage};
use plait_run::orchestrator::{Event, GroupEvent, Update};
use plait_stages::bisect::Step;

/// How to show progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Live,
    Lines,
    Json,
}

/// Shows the events of a run until the channel closes.
pub async fn show(mut rx: mpsc::UnboundedReceiver<Update>, total: usize, mode: Mode) {
    let mut tally = Tally::default();
    let mut live = (mode == Mode::Live).then(|| Live::new(total));
    while let Some(update) = rx.recv().await {
        let event = match update {
            Update::Task(event) => event,
            Update::Group(group) => {
                show_group(&group, mode, live.as_ref());
                continue;
            }
            Update::Bisect(step) => {
                show_bisect(&step, mode, live.as_ref());
                continue;
            }
        };
        if let Some((task, _)) = split_attempt_id(&event.task) {
            tally.attempt(task, &event);
            show_attempt(&event, mode, live.as_mut(), &tally);
            continue;
        }
        let newly_final = tally.record(&event);
        match mode {
            Mode::Json => {
                let _ = outln!("{}", Update::Task(event.clone()).to_json());
            }
            Mode::Lines if newly_final => {
                let detail = match (event.state, &event.detail) {
                    (
                        TaskState::Failed
                        | TaskState::Stopped
                        | TaskState::Interrupted
                        | TaskState::Blocked,
                        Some(reason),
                    ) => {
                        format!(": {reason}")
                    }
                    _ => String::new(),
                };
                errln!(
                    "[{:>width$}/{total}] {:<11} {}{detail}",
                    tally.finished,
                    event.state.as_str(),
                    event.task,
                    width = total.to_string().len()
                );
            }
            Mode::Lines => {}
            Mode::Live => {
                if let Some(live) = &mut live {
                    live.update(&event, &tally);
                }
            }
        }
    }
    if let Some(live) = live {
        live.finish();
    }
}

/// One step of a supervisor group: a JSON event, or a line (above the live display).
fn show_group(group: &GroupEvent, mode: Mode, live: Option<&Live>) {
    let line = format!("{:<11} {}: {}", group.stage, group.group, group.detail);
    match (mode, live) {
        (Mode::Json, _) => {
            let _ = outln!("{}", Update::Group(group.clone()).to_json());
        }
        (Mode::Live, Some(live)) => {
            let _ = live.multi.println(line);
        }
        _ => errln!("{line}"),
    }
}

/// One step of the culprit search: a JSON event, or a line (above the live display).
fn show_bisect(step: &Step, mode: Mode, live: Option<&Live>) {
    let line = format!(
        "{:<11} {} ({} check run(s))",
        "bisect", step.detail, step.runs
    );
    match (mode, live) {
        (Mode::Json, _) => {
            let _ = outln!("{}", Update::Bisect(step.clone()).to_json());
        }
        (Mode::Live, Some(live)) => {
            let _ = live.multi.println(line);
        }
        _ => errln!("{line}"),
    }
}

/// An attempt's event (`<task>~<n>`): a JSON event, a line when it ends, or its own line
/// in the live display. Attempts are not tasks in the counts.
fn show_attempt(event: &Event, mode: Mode, live: Option<&mut Live>, tally: &Tally) {
    match mode {
        Mode::Json => {
            let _ = outln!("{}", Update::Task(event.clone()).to_json());
        }
        Mode::Lines if event.state.is_final() => {
            let detail = event
                .detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            errln!("      {:<11} {}{detail}", event.state.as_str(), event.task);
        }
        Mode::Lines => {}
        Mode::Live => {
            if let Some(live) = live {
                live.update(event, tally);
            }
        }
    }
}

/// Counts of the run so far.
#[derive(Default)]
struct Tally {
    states: HashMap<String, TaskState>,
    usage: HashMap<String, Usage>,
    finished: usize,
}

impl Tally {
    /// Takes an attempt's event: its usage counts until its task's (which adds up every
    /// attempt's once picked) arrives.
    fn attempt(&mut self, task: &str, event: &Event) {
        let picked = self.usage.contains_key(task);
        if let (Some(u), false) = (&event.usage, picked) {
            self.usage.insert(event.task.clone(), u.clone());
        }
    }

    /// Takes an event; true when it brought its task to an end.
    fn record(&mut self, event: &Event) -> bool {
        let before = self.states.insert(event.task.clone(), event.state);
        if let Some(u) = &event.usage {
            // A task's usage counts its attempts'.
            let prefix = format!("{}~", event.task);
            self.usage.retain(|id, _| !id.starts_with(&prefix));
            self.usage.insert(event.task.clone(), u.clone());
        }
        let was_final = before.is_some_and(|s| s.is_final());
        let newly = event.state.is_final() && !was_final;
        if newly {
            self.finished += 1;
        } else if was_final && !event.state.is_final() {
            // Sent back by its group's supervisor.
            self.finished -= 1;
        }
        newly
    }

    fn count(&self, pred: impl Fn(TaskState) -> bool) -> usize {
        self.states.values().filter(|s| pred(**s)).count()
    }

    fn summary(&self) -> String {
        let done = self.count(|s| s == TaskState::Done);
        let failed = self.count(|s| {
            matches!(
                s,
                TaskState::Failed | TaskState::Rejected | TaskState::Stopped | TaskState::Blocked
            )
        });
        let running =
            self.count(|s| !s.is_final() && s != TaskState::Pending && s != TaskState::Interrupted);
        let mut text = format!("{done} done · {running} running · {failed} failed");
        if !self.usage.is_empty() {
            let tokens: u64 = self
                .usage
                .values()
                .map(|u| {
                    u.input_tokens
                        + u.output_tokens
                        + u.cache_creation_input_tokens
                        + u.cache_read_input_tokens
                })
                .sum();
            let cost: Option<f64> = self.usage.values().map(|u| u.cost_usd).sum();
            let _ = write!(text, " · {tokens} tokens");
            match cost {
                Some(c) => {
                    let _ = write!(text, " · ${c:.4}");
                }
                None => text.push_str(" · cost unknown"),
            }
        }
        text
    }
}

/// The line above the live display for a task that ended or was interrupted: its state,
/// and its detail when that says more. None for a task done, and for one a resume takes
/// up again (its interruption cleared: `resume` named it already).
fn ended_line(event: &Event) -> Option<String> {
    let state = event.state.as_str();
    match event.detail.as_deref().map(str::trim) {
        _ if event.state == TaskState::Done => None,
        None | Some("") if event.state == TaskState::Interrupted => None,
        None | Some("") => Some(format!("{} {state}", event.task)),
        Some(detail) if detail == state => Some(format!("{} {state}", event.task)),
        Some(detail) => Some(format!("{} {state}: {detail}", event.task)),
    }
}

struct Live {
    multi: MultiProgress,
    overall: ProgressBar,
    lines: BTreeMap<String, ProgressBar>,
}

impl Live {
    fn new(total: usize) -> Live {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let overall = multi.add(ProgressBar::new(total as u64));
        overall.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} tasks  {msg}  eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        overall.enable_steady_tick(Duration::from_millis(250));
        Live {
            multi,
            overall,
            lines: BTreeMap::new(),
        }
    }

    fn update(&mut self, event: &Event, tally: &Tally) {
        self.overall.set_position(tally.finished as u64);
        self.overall.set_message(tally.summary());
        if event.state.is_final() || event.state == TaskState::Interrupted {
            if let Some(line) = self.lines.remove(&event.task) {
                line.finish_and_clear();
                self.multi.remove(&line);
            }
            if let Some(line) = ended_line(event) {
                let _ = self.multi.println(line);
            }
            return;
        }
        let line = self.lines.entry(event.task.clone()).or_insert_with(|| {
            let bar = self.multi.add(ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template("  {spinner} {prefix:20} {msg} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_prefix(event.task.clone());
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        let tokens = event
            .usage
            .as_ref()
            .map(|u| format!(" · {} tokens", u.input_tokens + u.output_tokens))
            .unwrap_or_default();
        line.set_message(format!("{}{tokens}", event.state.as_str()));
    }

    fn finish(self) {
        for line in self.lines.values() {
            line.finish_and_clear();
        }
        self.overall.finish_and_clear();
        let _ = self.multi.clear();
    }
}
