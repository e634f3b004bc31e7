//! plait's integration tests: one binary, hermetic repositories in temp dirs.

mod check;
mod claude_code;
mod cli;
mod collect;
mod culprits;
mod distributed;
mod firstday;
mod gate;
mod groups;
mod land;
mod lineage;
mod manager;
mod merge;
mod mock;
mod mock_selftest;
mod model;
mod per_file;
mod pg;
mod plan;
mod review;
mod run;
mod sandbox;
mod serve;
mod split;
mod support;
mod workspace;
