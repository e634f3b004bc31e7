//! Stage 5: review. Each task's branch is judged before it may be merged: the `[checks]`
//! commands run against a full checkout of it, and a reviewer — a model answering through
//! `submit_review`, or a command — reads its diff and the check results. A failing check
//! or a request for changes sends the worker back to its worktree for another round
//! (bounded; what it is told is `prompts::feedback`); a rejection keeps the branch out of the merge. The merged branch gets its own
//! checks; all of it together is the gate `plait land` obeys.

pub mod checkout;
pub mod checks;
mod layers;
pub mod pick;
pub mod reviewer;
