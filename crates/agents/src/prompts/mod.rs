//! Everything plait tells an agent or a reviewer, in one place, so that the words can be
//! read, compared and changed together. These functions only build text; the stages that
//! send it are its callers. Who is told what:
//!
//! - [`worker`] — a task's worker. A model agent (`agent::model`): a system prompt of
//!   rules, the run's goal and the task, then the task's prompt as the first message, and
//!   a request to go on when a reply was cut off. An agent CLI: the rules on top of its own
//!   system prompt (Claude Code's `--append-system-prompt`; in aider's `--message`, ahead
//!   of the task), the prompt as its message (`claude -p`), and `{prompt}` in a `cli`
//!   agent's arguments. In a later round, the prompt again with the round's feedback.
//! - [`feedback`] — what a worker is told when it goes back for another round: the failing
//!   checks and its reviewer's request for changes, a supervisor's, a person's comment,
//!   the merged checks it breaks, or that its run was interrupted or taken over.
//! - [`reviewer`] — a model reviewer: its job and the goal, the task under review, then
//!   the checks' results and the diff.
//! - [`supervisor`] — a grouped run's supervisor, a reviewer of its group's merge: the
//!   group's brief, each task's status and its worker's summary.
//! - [`planner`] — the manager model: the rules of a plan and the goal, and the correction
//!   when its plan is not valid. Its first message, the repository's files and contents,
//!   is read from git in `manager`.
//!
//! The tools' own descriptions and schemas (the model agent's editor and search,
//! `submit_review`, `submit_plan`) stay with the tools, in `agent::model::tools`,
//! `review::reviewer` and `manager`, as do the guard's refusals and the tools'
//! results: they are the tools' answers, not what plait asks.

pub mod feedback;
pub mod pick;
pub mod planner;
pub mod reviewer;
pub mod supervisor;
pub mod worker;
