//! plait's integration tests: one binary, hermetic repositories in temp dirs.

mod cli;
mod collect;
mod land;
mod merge;
mod plan;
mod run;
mod support;
mod workspace;
