//! TEMPORARY stub until the judge lands.
#![allow(missing_docs, dead_code)]
use crate::plan::Reviewer;
use plait_core::cancel::Cancel;
use plait_core::state::{CheckResult, Usage};
use plait_llm::limiter::Limiters;
use plait_sandbox::sandbox::SandboxSettings;
use std::path::{Path, PathBuf};
use std::time::Duration;
pub(crate) struct Candidate<'a> {
    pub number: u32,
    pub agent: String,
    pub diff: String,
    pub checks: &'a [CheckResult],
    pub commit: String,
    pub worktree: PathBuf,
    pub summary: Option<String>,
}
pub(crate) struct PickInput<'a> {
    pub run: &'a str,
    pub goal: &'a str,
    pub task: &'a str,
    pub prompt: &'a str,
    pub owns: &'a [String],
    pub candidates: &'a [Candidate<'a>],
    pub base: String,
    pub dir: PathBuf,
    pub timeout: Duration,
    pub budget: &'a crate::agent::Budget,
    pub sandbox: &'a SandboxSettings,
    pub plait_program: &'a Path,
    pub gateway: Option<&'a crate::agent::RoleGateway>,
}
pub(crate) struct Picked {
    pub chosen: u32,
    pub why: String,
    pub by: String,
    pub note: Option<String>,
    pub usage: Option<Usage>,
}
pub(crate) async fn pick(
    _r: &Reviewer,
    input: &PickInput<'_>,
    _c: &reqwest::Client,
    _l: &Limiters,
    _x: &Cancel,
) -> Picked {
    Picked {
        chosen: input.candidates[0].number,
        why: "stub".into(),
        by: "stub".into(),
        note: None,
        usage: None,
    }
}
