//! The guard: Claude Code's `PreToolUse` hook, run as `plait guard FILE` before every tool
//! call an agent attempts. It refuses, at the moment of the attempt, an `Edit`, `Write`,
//! `MultiEdit` or `NotebookEdit` outside the task's worktree, inside `.git`, or of a file the
//! task does not own (saying which globs the task owns), and any `Bash` command but a few
//! read-only ones without shell operators; other tools (reading, searching) go ahead. Claude
//! Code's protocol: the hook reads one JSON object on stdin; exit 2 blocks the tool call and
//! its stderr goes back to the model; exit 0 lets it go ahead.

use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plan::globs::Globs;

/// The tools that change files, and the input field naming the file.
const EDIT_TOOLS: &[(&str, &str)] = &[
    ("Edit", "file_path"),
    ("Write", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// What the guard of one task knows, written next to the agent's settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuardFile {
    pub task: String,
    pub worktree: PathBuf,
    /// The task's `owns` globs.
    pub owns: Vec<String>,
    /// Where each refusal is appended, one JSON line each.
    pub refusals: PathBuf,
}

/// The guard's answer to one attempted tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused; the reason is for the model.
    Deny(String),
}

/// Decides one hook call: `input` is the JSON Claude Code sends on stdin.
pub fn decide(guard: &GuardFile, input: &str) -> Verdict {
    let input: Value = match serde_json::from_str(input) {
        Ok(v) => v,
        Err(e) => return Verdict::Deny(format!("plait guard: the hook input is not JSON ({e})")),
    };
    let tool = input["tool_name"].as_str().unwrap_or_default();
    if tool == "Bash" {
        return command_verdict(input["tool_input"]["command"].as_str().unwrap_or_default());
    }
    let Some(&(_, field)) = EDIT_TOOLS.iter().find(|(name, _)| *name == tool) else {
        return Verdict::Allow;
    };
    let Some(path) = input["tool_input"][field]
        .as_str()
        .filter(|p| !p.is_empty())
    else {
        return Verdict::Deny(format!("plait guard: {tool} names no file in `{field}`"));
    };
    let owns = match Globs::new(&guard.owns) {
        Ok(g) => g,
        Err(e) => return Verdict::Deny(format!("plait guard: task `{}`: {e}", guard.task)),
    };
    let cwd = input["cwd"]
        .as_str()
        .map_or_else(|| guard.worktree.clone(), PathBuf::from);
    let owned_globs = guard.owns.join(", ");
    let worktree = guard
        .worktree
        .canonicalize()
        .unwrap_or_else(|_| guard.worktree.clone());
    let target = resolve(&cwd.join(path));
    let Ok(relative) = target.strip_prefix(&worktree) else {
        return Verdict::Deny(format!(
            "plait: `{path}` is outside task `{}`'s worktree ({}). This task may change only files matching: {owned_globs}.",
            guard.task,
            worktree.display()
        ));
    };
    let relative: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if relative.first().is_some_and(|c| c == ".git") || relative.is_empty() {
        return Verdict::Deny(format!(
            "plait: `{path}` is git's own data, which no task may change."
        ));
    }
    let relative = relative.join("/");
    if owns.matches(&relative) {
        Verdict::Allow
    } else {
        Verdict::Deny(format!(
            "plait: task `{}` does not own `{relative}`; it may change only files matching: {owned_globs}. \
Another task owns this file or no task does: leave it unchanged and say in your summary what should change there.",
            guard.task
        ))
    }
}

/// Programs an agent may run, and for `git` its subcommands: all only read.
const READ_ONLY_PROGRAMS: &[&str] = &["git", "ls", "cat", "head", "tail", "wc", "grep", "pwd"];
const READ_ONLY_GIT: &[&str] = &[
    "show",
    "ls-files",
    "ls-tree",
    "log",
    "diff",
    "grep",
    "status",
    "blame",
    "cat-file",
    "rev-parse",
];
/// Options of those programs that write files or run other programs.
const WRITING_OPTIONS: &[&str] = &["--output", "-O", "--open-files-in-pager", "--ext-diff"];

/// Whether a shell command is one of the read-only commands an agent may run: a program
/// from [`READ_ONLY_PROGRAMS`] (for git a subcommand from [`READ_ONLY_GIT`]) with plain
/// arguments, no shell operators, no option that writes.
fn command_verdict(command: &str) -> Verdict {
    let refuse = || {
        Verdict::Deny(format!(
            "plait: `{command}` is refused. Agents here may run only read-only commands, with no \
shell operators: git {}, and {}. Edit files with the edit tools; the project's checks run after \
you finish.",
            READ_ONLY_GIT.join("/"),
            READ_ONLY_PROGRAMS[1..].join(", ")
        ))
    };
    if command.contains(|c: char| ";&|$`<>(){}\\\n\r!".contains(c)) {
        return refuse();
    }
    let Some(words) = split_words(command) else {
        return refuse();
    };
    let program = words.first().map(String::as_str).unwrap_or_default();
    if !READ_ONLY_PROGRAMS.contains(&program) {
        return refuse();
    }
    if program == "git"
        && !words
            .get(1)
            .is_some_and(|s| READ_ONLY_GIT.contains(&s.as_str()))
    {
        return refuse();
    }
    let writes = words[1..]
        .iter()
        .any(|w| WRITING_OPTIONS.iter().any(|o| w.starts_with(o)));
    if writes {
        return refuse();
    }
    Verdict::Allow
}

/// Words of a command with simple quoting (`'...'`, `"..."`); `None` if a quote is open.
fn split_words(command: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    if quote.is_some() {
        return None;
    }
    words.extend(word);
    Some(words)
}

/// `path` made absolute without `.` and `..`, with symbolic links resolved as far as the
/// path exists, so a link cannot lead out of the worktree.
fn resolve(path: &Path) -> PathBuf {
    let mut lexical = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    let mut existing = lexical.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return lexical,
        }
    }
}

/// Runs the guard as a hook: reads the guard file and stdin, records a refusal, and returns
/// the exit code (0 allow, 2 block) with the reason on stderr.
pub fn run_hook(guard_file: &Path, stdin: &str) -> i32 {
    let guard: GuardFile = match std::fs::read(guard_file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(g) => g,
        Err(e) => {
            eprintln!(
                "plait guard: cannot read {}: {e}; every edit is refused until it can",
                guard_file.display()
            );
            return 2;
        }
    };
    match decide(&guard, stdin) {
        Verdict::Allow => 0,
        Verdict::Deny(reason) => {
            let input: Value = serde_json::from_str(stdin).unwrap_or(Value::Null);
            let tool = input["tool_name"].as_str().unwrap_or_default();
            if !EDIT_TOOLS.iter().any(|(name, _)| *name == tool) {
                eprintln!("{reason}");
                return 2;
            }
            let line = serde_json::json!({
                "tool": input["tool_name"],
                "input": input["tool_input"],
                "reason": reason,
            });
            if let Ok(mut file) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&guard.refusals)
            {
                let _ = writeln!(file, "{line}");
            }
            eprintln!("{reason}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(dir: &Path) -> GuardFile {
        GuardFile {
            task: "t1".into(),
            worktree: dir.to_path_buf(),
            owns: vec!["src/a/".into(), "README.md".into()],
            refusals: dir.join("refusals.jsonl"),
        }
    }

    fn call(tool: &str, field: &str, path: &str, cwd: &Path) -> String {
        serde_json::json!({
            "hook_event_name": "PreToolUse",
            "cwd": cwd,
            "tool_name": tool,
            "tool_input": { field: path },
        })
        .to_string()
    }

    #[test]
    fn owned_paths_pass_and_others_are_refused_with_the_globs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src/a")).unwrap();
        let g = guard(&root);
        let ok = |tool, field, path: &str| decide(&g, &call(tool, field, path, &root));
        assert_eq!(ok("Edit", "file_path", "src/a/x.rs"), Verdict::Allow);
        assert_eq!(
            ok(
                "Write",
                "file_path",
                &root.join("src/a/new/y.rs").display().to_string()
            ),
            Verdict::Allow
        );
        assert_eq!(
            ok("NotebookEdit", "notebook_path", "README.md"),
            Verdict::Allow
        );
        assert_eq!(ok("Read", "file_path", "/etc/passwd"), Verdict::Allow);
        let Verdict::Deny(why) = ok("MultiEdit", "file_path", "src/b.rs") else {
            panic!("src/b.rs is not owned")
        };
        assert!(
            why.contains("`src/b.rs`") && why.contains("src/a/, README.md"),
            "{why}"
        );
        for outside in [
            "../elsewhere.rs",
            "/tmp/x.rs",
            "src/a/../../../x",
            ".git/config",
        ] {
            assert!(
                matches!(ok("Write", "file_path", outside), Verdict::Deny(_)),
                "{outside} must be refused"
            );
        }
        assert!(matches!(ok("Write", "content", "x"), Verdict::Deny(_)));
        let bash = |command: &str| {
            let input =
                serde_json::json!({"tool_name": "Bash", "tool_input": {"command": command}});
            decide(&g, &input.to_string())
        };
        for fine in [
            "git show HEAD:src/b.rs",
            "git ls-files",
            "grep -rn 'fn main' src",
            "cat README.md",
        ] {
            assert_eq!(bash(fine), Verdict::Allow, "{fine}");
        }
        for bad in [
            "rm -rf src",
            "git commit -am x",
            "git show HEAD:a > b",
            "cat a; rm b",
            "git diff --output=/tmp/x",
            "git -c core.pager=sh show",
            "echo $(id)",
            "grep 'open",
            "",
        ] {
            assert!(
                matches!(bash(bad), Verdict::Deny(_)),
                "{bad} must be refused"
            );
        }
        assert!(matches!(decide(&g, "not json"), Verdict::Deny(_)));
    }

    #[test]
    fn a_symlink_out_of_the_worktree_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("src/a")).unwrap();
        let g = guard(&root);
        let verdict = decide(&g, &call("Write", "file_path", "src/a/x.rs", &root));
        assert!(
            matches!(verdict, Verdict::Deny(ref why) if why.contains("outside")),
            "{verdict:?}"
        );
    }
}
