//! The words a worker starts from: a model agent's system prompt, whose first part — the
//! rules and the run's goal — is the same for every task (so providers can cache it once),
//! and whose second part is the task itself: its id, prompt and owned files; an agent CLI's
//! rules on top of its own system prompt; and the message of each round.

use plait_llm::conversation::System;
use std::fmt::Write as _;

const MAX_LISTED: usize = 200;

/// The system prompt for one task; `commands`: the agent has the `run` tool.
pub fn system(
    goal: &str,
    task: &str,
    prompt: &str,
    owns: &[String],
    owned: &[String],
    commands: bool,
) -> System {
    let goal = if goal.trim().is_empty() {
        "(none given; follow your task)"
    } else {
        goal.trim()
    };
    let run = if commands {
        "- `run` runs a command in the repository root, where every file is present with your \
edits: build and run the project's tests with it as you work, and before you finish.\n"
    } else {
        ""
    };
    let shared = format!(
        "You are one of several coding agents working at the same time on one git repository. \
Each agent has its own task and owns its own files; together the tasks reach one goal.\n\n\
The goal of the whole run: {goal}\n\n\
Rules:\n\
- Change only files your task owns. A write to any other file is refused; do not try to work around it.\n\
- You may read any file of the repository with the editor's `view` command, `list_files` and `search`.\n\
- Use paths relative to the repository root, such as `src/main.rs`. Absolute paths, `..` and `.git` are refused.\n\
{run}\
- Make the change your task asks for, completely, and nothing else. Keep the project's style.\n\
- Do not commit; the orchestrator commits your work when you finish.\n\
- When the task is done, stop calling tools and reply with a short summary of what you changed."
    );
    let listed = listing(owned);
    let task_part = format!(
        "Task id: {task}\n\nYour task:\n{prompt}\n\nYou own the files matching: {}\n\nFiles you own now:\n{listed}",
        owns.join(", ")
    );
    System {
        shared,
        task: task_part,
    }
}

/// The owned files, one per line, at most [`MAX_LISTED`] of them.
fn listing(owned: &[String]) -> String {
    let mut listed = owned
        .iter()
        .take(MAX_LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    if owned.len() > MAX_LISTED {
        let _ = write!(listed, "\n... and {} more", owned.len() - MAX_LISTED);
    }
    if listed.is_empty() {
        listed = "(none yet)".to_string();
    }
    listed
}

/// The rules an agent CLI (Claude Code, aider) gets on top of its own system prompt: the
/// run's goal, the task, what it owns, and how to see the rest of the repository.
pub fn cli_rules(goal: &str, task: &str, owns: &[String], owned: &[String]) -> String {
    let goal = if goal.trim().is_empty() {
        "(none given; follow your task)"
    } else {
        goal.trim()
    };
    format!(
        "You are one of several coding agents working at the same time on one git repository, \
each in its own worktree. Each agent has its own task and owns its own files; together the \
tasks reach one goal.\n\n\
The goal of the whole run: {goal}\n\n\
Task id: {task}\n\n\
Rules:\n\
- Change only files your task owns: files matching {}. An edit of any other file is refused; \
do not try to work around it, with the shell or otherwise: what a command writes to a file you \
do not own is never kept. If another file should change, say so in your summary.\n\
- Your working directory shows the whole repository, with your edits in place. Build it and \
run its tests there as you work, and before you finish: any command may run, inside walls \
that let it write only your worktree and a private TMPDIR. Nothing asks questions: keep \
commands from prompting or paging.\n\
- Make the change your task asks for, completely, and nothing else. Keep the project's style.\n\
- Do not commit; the orchestrator commits your work when you finish.\n\
- When the task is done, reply with a short summary of what you changed.\n\n\
Files you own now:\n{}",
        owns.join(", "),
        listing(owned)
    )
}

/// The first user message.
pub fn first_message(prompt: &str) -> String {
    format!("{prompt}\n\nStart by looking at the files you own, then make the change.")
}

/// The first user message of a later round: the worktree holds the earlier work.
pub fn next_round(prompt: &str, round: u32, feedback: &str) -> String {
    format!(
        "{prompt}\n\nThis is round {round} of this task. Your earlier changes are already in the \
worktree. The checks and the reviewer asked for more:\n\n{feedback}\n\nLook at the files again and \
make the changes that answer this."
    )
}

/// What a model agent is told when its reply was cut off by the token limit.
pub const CUT_OFF: &str = "Your reply was cut off by the token limit. Continue where you stopped.";

/// The message of an agent CLI's round (Claude Code's `-p`, aider's task): the task's
/// prompt, or in a later round [`next_round`].
pub fn round_message(prompt: &str, round: u32, feedback: Option<&str>) -> String {
    match feedback {
        Some(feedback) => next_round(prompt, round, feedback),
        None => prompt.to_string(),
    }
}

/// aider's `--message`: it has no system prompt of plait's, so the rules come first.
pub fn aider_message(rules: &str, ask: &str) -> String {
    format!("{rules}\n\nYour task:\n{ask}")
}

/// What `{prompt}` stands for in a `cli` agent's arguments: the task's prompt, then the
/// feedback of a later round.
pub fn placeholder_prompt(prompt: &str, feedback: Option<&str>) -> String {
    match feedback {
        Some(feedback) => format!("{prompt}\n\n{feedback}"),
        None => prompt.to_string(),
    }
}

/// What attempt `n` of `of` is told before its task: others try the same on their own, and
/// one is kept.
pub fn attempt(n: u32, of: u32) -> String {
    format!(
        "This is attempt {n} of {of}: other agents work on this same task on their own, each \
         in a checkout of its own, and only the best attempt is kept. Take the approach you \
         judge best; you need not guess what the others do."
    )
}

/// What a person told a running task, as the agent reads it at its next turn.
pub fn told(messages: &[String]) -> String {
    let mut text = String::from(
        "A person watching this task tells you (follow it; it outranks what you planned):",
    );
    for m in messages {
        text.push_str("\n\n");
        text.push_str(m.trim());
    }
    text
}
