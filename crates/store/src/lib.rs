//! plait's store for runs spread over many machines: [`pg`] (the PostgreSQL record, task
//! queue, change feed and shared rate limits) and [`remote`] (the git remote the base and
//! the tasks' work go through).

#![deny(missing_docs)]

pub mod pg;
pub mod remote;
