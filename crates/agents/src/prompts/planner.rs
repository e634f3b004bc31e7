//! The words the manager model plans from: a system prompt with the rules of a plan (the
//! same for every goal) and the goal, and the correction it gets when its plan is not
//! valid. Its first message, the repository's files and the contents it may read, is
//! read from git by `manager::overview`.

use plait_llm::conversation::System;

/// The line of the system prompt that names the manager's request (the mock model server
/// in the tests keys on it).
const MANAGER_LINE: &str = "Manager of a plait run";

/// The manager's system prompt: how to plan at most `max_tasks` tasks towards `goal`,
/// answering by calling `tool`.
pub fn system(goal: &str, max_tasks: usize, tool: &str) -> System {
    let shared = format!(
        "{MANAGER_LINE}. You split a change to a git repository into tasks that coding agents \
carry out at the same time, each in its own worktree holding only the files its task owns.\n\n\
How to plan:\n\
- Every task owns a set of files, given as gitignore-style globs matched against the \
repository's paths: `src/db/` takes a directory, `/README.md` one file at the root, `*.py` \
every Python file at any depth, `!` excludes. No file may be owned by two tasks that run at \
the same time, and every glob must match at least one tracked file.\n\
- When work has an order, give a task `after`: the ids of the tasks it must come after. It \
starts from their merged result, so its own checks see their work. Use it for definitions \
before their uses (a function renamed: first add the new name beside the old, then the \
callers switch, then a last task removes the old name), build files and dependencies before \
the sources that need them, and removals last. A task may own again a file of a task it \
comes after (it changes their result). Leave `after` out where tasks are independent: \
tasks without it all start at once.\n\
- A task that is risky or hard to get right (a subtle algorithm, a change many others \
depend on) may get `attempts` (2 to 5): it is tried that many times on its own and the best \
attempt that passes the checks is kept. Each attempt costs as much as a task: leave it out \
for routine work.\n\
- Own only the files that must change to reach the goal; leave the rest unowned.\n\
- Keep files that must change together in one task, and tests with the code they test.\n\
- Make the tasks about the same size, and as many as the work splits into naturally (at most {}).\n\
- Each prompt must stand on its own: the worker sees only its prompt, the goal and its files.\n\
- Task ids are short, lowercase, with letters, digits and `-`; they become branch names.\n\
- Answer by calling {tool} once.",
        max_tasks
    );
    System {
        shared,
        task: format!("The goal: {}", goal.trim()),
    }
}

/// What the manager is told when its plan is not valid: the problems, and to call `tool`
/// again.
pub fn correction(problems: &[String], tool: &str) -> String {
    format!(
        "The plan is not valid:\n{}\nCall {tool} again with a corrected plan (all tasks, not only the changed ones).",
        problems.iter().map(|p| format!("- {p}")).collect::<Vec<_>>().join("\n")
    )
}
