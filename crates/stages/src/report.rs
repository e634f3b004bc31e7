//! Stage 9: report. What happened, per task and for the run — state, changes, violations,
//! conflicts, time — as text for people and as JSON for scripts. These functions build
//! strings; only the CLI prints them. One file for each thing reported:
//!
//! - `status`: a run's status (`plait status`, its JSON) and its line in `plait runs`,
//!   drawing on `table` (the tasks' table), `usage` (tokens, cost, time), `review` and
//!   `blockers` (what keeps the run from landing);
//! - `review`: what reviewers saw and said (`plait review`, the page's summary);
//! - `attempts`: a task run as several attempts, each one's end and what they cost, for
//!   the status, `plait review` and the page alike;
//! - `told`: what people told a running task's agent and whether it heard it, for the
//!   status, `plait review` and the page alike;
//! - `failure`: why tasks failed, with their logs' last lines; `logs`: a task's logs;
//! - `plan`: a plan before it runs; `timings`: where a run's time went; `select`: which
//!   tasks need a person; [`diff`]: a task's diff.

mod attempts;
mod blockers;
pub mod diff;
mod failure;
pub mod logs;
mod plan;
mod review;
mod select;
mod status;
mod table;
mod timings;
mod told;
mod usage;

pub use attempts::{attempt_costs, attempt_note, AttemptCosts};
pub use blockers::{attention, blocker_line, culprit_sentence, serialize_blockers};
// The page's data (`serve::data`) reads a task's diff as `report::file_diffs`.
pub use diff::file_diffs;
pub use failure::{commands_failed, failure, failures, log_tail, setup_hint, Failure, TAIL_LINES};
pub use plan::{plan_summary, plan_text, setup_text};
pub use review::{review_summary, review_text};
pub use select::needing_attention;
pub use status::{run_line, status_text, StatusJson};
pub use timings::timings_text;
pub use told::heard_note;
pub use usage::{task_usage, total_usage};
