//! `plait guard`: the `PreToolUse` hook plait gives each `claude-code` agent.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::ui::errln;
use plait_guard::{judge_hook, Verdict};

/// Judge one tool call a claude-code agent attempts (its PreToolUse hook; plait sets it up)
///
/// Reads Claude Code's hook input (JSON) on stdin. Exit 0 lets the call go ahead; exit 2
/// refuses it, with the reason on stderr for the model: an Edit, Write, MultiEdit or
/// NotebookEdit of a file outside the task's worktree, inside .git, or not matching the
/// task's `owns` globs; a read outside the worktree and the repository. Bash commands go
/// ahead: the task's kernel walls confine them.
#[derive(Debug, Args)]
pub struct GuardArgs {
    /// The task's guard file (written by plait next to the agent's settings)
    pub guard_file: PathBuf,
}

pub fn cmd_guard(args: GuardArgs) -> ExitCode {
    // Inside a task's walls: the user's git config is out of reach.
    plait_core::git::without_user_config();
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        errln!("plait guard: cannot read the hook input: {e}");
        return ExitCode::from(2);
    }
    match judge_hook(&args.guard_file, &input) {
        Verdict::Allow => ExitCode::SUCCESS,
        Verdict::Deny(reason) => {
            errln!("{reason}");
            ExitCode::from(2)
        }
    }
}
