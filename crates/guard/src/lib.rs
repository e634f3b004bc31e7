//! The guard: Claude Code's `PreToolUse` hook, run as `plait guard FILE` before every tool
//! call an agent attempts. It refuses, at the moment of the attempt, an `Edit`, `Write`,
//! `MultiEdit` or `NotebookEdit` outside the task's worktree, inside `.git`, or of a file the
//! task does not own (saying which globs the task owns), and reading (`Read`, `Grep`,
//! `Glob`, `LS`) outside the worktree and the repository. Other tools go ahead, `Bash`
//! among them: its commands build and test inside the task's kernel walls (they write only
//! the worktree and the task's scratch, and what they write to a file the task does not
//! own is reported, never committed), which judge a command by what it does rather than by
//! its words. Claude Code's protocol: the hook reads one JSON object on stdin; exit 2
//! blocks the tool call and its stderr goes back to the model; exit 0 lets it go ahead.
//!
//! Start from [`GuardFile`] (what the guard of one task knows) and [`decide`]. A crate of
//! its own because the hook is a process of its own, started for every tool call: it needs
//! only `core`'s globs, and starts fast for it.
//!
//! ```
//! use plait_guard::{decide, GuardFile, Verdict};
//!
//! let guard = GuardFile {
//!     task: "parser".into(),
//!     worktree: "/work/tree".into(),
//!     owns: vec!["/src/parser/".into()],
//!     read_roots: Vec::new(),
//!     view: None,
//! };
//! let edit = |path: &str| {
//!     format!(r#"{{"tool_name": "Edit", "cwd": "/work/tree", "tool_input": {{"file_path": "{path}"}}}}"#)
//! };
//! assert_eq!(decide(&guard, &edit("/work/tree/src/parser/mod.rs")), Verdict::Allow);
//! assert!(matches!(decide(&guard, &edit("/work/tree/src/lexer.rs")), Verdict::Deny(_)));
//! assert!(matches!(decide(&guard, &edit("/home/me/.bashrc")), Verdict::Deny(_)));
//! ```

#![deny(missing_docs)]

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use plait_core::globs::Globs;

/// The tools that change files, and the input field naming the file.
const EDIT_TOOLS: &[(&str, &str)] = &[
    ("Edit", "file_path"),
    ("Write", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// Whether `tool` is one of Claude Code's tools that change files.
pub fn is_edit_tool(tool: &str) -> bool {
    EDIT_TOOLS.iter().any(|(name, _)| *name == tool)
}

/// What the guard of one task knows, written next to the agent's settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuardFile {
    /// The task's id.
    pub task: String,
    /// The task's worktree.
    pub worktree: PathBuf,
    /// The task's `owns` globs.
    pub owns: Vec<String>,
    /// Directories the agent may read in, besides its worktree (the repository's working
    /// directory). Empty: reads are not judged.
    #[serde(default)]
    pub read_roots: Vec<PathBuf>,
    /// Where the agent's processes see the worktree, as its whole-tree view (the stable
    /// path views are mounted at): a path there is the worktree's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<PathBuf>,
}

/// The tools that read, and the input field naming what they read (absent: the cwd).
const READ_TOOLS: &[(&str, &str)] = &[
    ("Read", "file_path"),
    ("NotebookRead", "notebook_path"),
    ("Grep", "path"),
    ("Glob", "path"),
    ("LS", "path"),
];

/// The guard's answer to one attempted tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The tool call may go ahead.
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
    let cwd = input["cwd"]
        .as_str()
        .map_or_else(|| guard.worktree.clone(), PathBuf::from);
    if let Some(&(_, field)) = READ_TOOLS.iter().find(|(name, _)| *name == tool) {
        return decide_read(guard, &cwd, tool, &input["tool_input"], field);
    }
    match EDIT_TOOLS.iter().find(|(name, _)| *name == tool) {
        Some(&(_, field)) => decide_edit(guard, &cwd, tool, &input["tool_input"], field),
        None => Verdict::Allow,
    }
}

/// Decides a call of the reading `tool`, whose input names what it reads in `field` (and,
/// for `Glob`, in its pattern): each must be readable.
fn decide_read(
    guard: &GuardFile,
    cwd: &Path,
    tool: &str,
    tool_input: &Value,
    field: &str,
) -> Verdict {
    let path = tool_input[field].as_str().filter(|p| !p.is_empty());
    let pattern = tool_input["pattern"].as_str().unwrap_or_default();
    // An absolute glob pattern reads where its literal part leads.
    let glob_root = (tool == "Glob" && pattern.starts_with('/')).then(|| {
        let literal = pattern.split(['*', '?', '[', '{']).next().unwrap_or("/");
        literal
            .rsplit_once('/')
            .map_or("/", |(dir, _)| dir)
            .to_string()
    });
    path.into_iter()
        .chain(glob_root.as_deref())
        .map(|p| read_verdict(guard, cwd, p))
        .find(|v| *v != Verdict::Allow)
        .unwrap_or(Verdict::Allow)
}

/// Decides a call of the editing `tool`, whose input names the file in `field`: it must be
/// in the worktree (or its view), outside `.git`, and owned by the task.
fn decide_edit(
    guard: &GuardFile,
    cwd: &Path,
    tool: &str,
    tool_input: &Value,
    field: &str,
) -> Verdict {
    let Some(path) = tool_input[field].as_str().filter(|p| !p.is_empty()) else {
        return Verdict::Deny(format!("plait guard: {tool} names no file in `{field}`"));
    };
    let owns = match Globs::new(&guard.owns) {
        Ok(g) => g,
        Err(e) => return Verdict::Deny(format!("plait guard: task `{}`: {e}", guard.task)),
    };
    let owned_globs = guard.owns.join(", ");
    let worktree = guard
        .worktree
        .canonicalize()
        .unwrap_or_else(|_| guard.worktree.clone());
    let target = resolve(&cwd.join(path));
    let view = guard
        .view
        .as_ref()
        .map(|v| v.canonicalize().unwrap_or_else(|_| v.clone()));
    let in_view = view.as_ref().and_then(|v| target.strip_prefix(v).ok());
    let Some(relative) = in_view.or_else(|| target.strip_prefix(&worktree).ok()) else {
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

/// Whether the agent may read `path` (relative to `cwd`): inside its worktree or one of
/// the read roots, when the guard has any.
fn read_verdict(guard: &GuardFile, cwd: &Path, path: &str) -> Verdict {
    if guard.read_roots.is_empty() {
        return Verdict::Allow;
    }
    let target = resolve(&cwd.join(path));
    let inside = std::iter::once(&guard.worktree)
        .chain(&guard.read_roots)
        .chain(&guard.view)
        .any(|root| target.starts_with(root.canonicalize().unwrap_or_else(|_| root.clone())));
    if inside {
        Verdict::Allow
    } else {
        Verdict::Deny(format!(
            "plait: reading `{path}` is refused: it is outside the repository. Read files of the \
repository; `git show HEAD:<path>` prints one your worktree does not hold."
        ))
    }
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

/// The guard as a hook: reads the guard file and judges the call in `stdin` (Claude
/// Code's hook input). The command line turns `Deny` into exit 2 with the reason on stderr;
/// plait learns of the refusals from the CLI's own result.
pub fn judge_hook(guard_file: &Path, stdin: &str) -> Verdict {
    let guard: GuardFile = match std::fs::read(guard_file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(g) => g,
        Err(e) => {
            return Verdict::Deny(format!(
                "plait guard: cannot read {}: {e}; every edit is refused until it can",
                guard_file.display()
            ))
        }
    };
    decide(&guard, stdin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(dir: &Path) -> GuardFile {
        GuardFile {
            task: "t1".into(),
            worktree: dir.to_path_buf(),
            owns: vec!["src/a/".into(), "README.md".into()],
            read_roots: Vec::new(),
            view: None,
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
        // The walls judge what a command does; the guard lets every command go ahead.
        for any in [
            "cargo test",
            "cd src && pytest -q | tail",
            "rm -rf src",
            "echo $(id)",
        ] {
            assert_eq!(bash(any), Verdict::Allow, "{any}");
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

    #[test]
    fn reads_stay_in_the_worktree_and_the_repository() {
        let repo = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let repo_root = repo.path().canonicalize().unwrap();
        let worktree = repo_root.join(".git/plait/wt");
        std::fs::create_dir_all(worktree.join("src/a")).unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let mut g = guard(&worktree);
        g.read_roots = vec![repo_root.clone()];
        let secret = outside.path().join("secret").display().to_string();
        let read =
            |tool: &str, field: &str, path: &str| decide(&g, &call(tool, field, path, &worktree));
        assert_eq!(read("Read", "file_path", "src/a/x.rs"), Verdict::Allow);
        let main_file = repo_root.join("README.md").display().to_string();
        assert_eq!(read("Read", "file_path", &main_file), Verdict::Allow);
        assert_eq!(
            read("Grep", "path", "../../.."),
            Verdict::Allow,
            "the repository root"
        );
        for (tool, field, path) in [
            ("Read", "file_path", secret.as_str()),
            ("Read", "file_path", "../../../../x"),
            ("Grep", "path", "/etc"),
            ("LS", "path", "/"),
        ] {
            assert!(
                matches!(read(tool, field, path), Verdict::Deny(ref w) if w.contains("outside the repository")),
                "{tool} {path} must be refused"
            );
        }
        let glob = |pattern: &str| {
            let input = serde_json::json!({"cwd": worktree, "tool_name": "Glob", "tool_input": {"pattern": pattern}});
            decide(&g, &input.to_string())
        };
        assert_eq!(glob("**/*.rs"), Verdict::Allow);
        assert!(matches!(glob("/etc/**/*.conf"), Verdict::Deny(_)));
        let bash = |command: &str| {
            let input = serde_json::json!({"cwd": worktree, "tool_name": "Bash", "tool_input": {"command": command}});
            decide(&g, &input.to_string())
        };
        assert_eq!(bash(&format!("cat {secret}")), Verdict::Allow);
    }
}
