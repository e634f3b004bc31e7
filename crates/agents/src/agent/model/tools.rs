//! The tools a model worker gets, confined to its task. Reads work for any tracked file:
//! owned files from the worktree, every other file from the base commit, checked out or
//! not. Writes work only for owned paths; any other write is refused with a message that
//! names the owned globs. Absolute paths, `..` and `.git` are refused; binary files are not
//! edited. A tool never fails the task: every problem is an error result the model can read
//! and act on.
//!
//! The worktree is the task's: a process its `run` commands left behind may swap any name in
//! it for a symlink at any moment. So every read and write of it goes through a
//! [`plait_core::beneath::Tree`] opened on the worktree: no link is followed, a read is judged
//! by what was opened (a link shows as `(symlink to X)`, as the base's links do), and a write
//! is a new file renamed over the name, so it never lands outside the worktree.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use git2::{Oid, Repository};
use serde_json::{json, Value};

use plait_core::beneath::{Content, Kind, Step, Tree};
use plait_core::git::{mode, TreeFile};
use plait_core::globs::Globs;
use plait_llm::anthropic::EDITOR;
use plait_llm::conversation::ToolSpec;

const LIST: &str = "list_files";
const SEARCH: &str = "search";
const MAX_LIST: usize = 2000;
const MAX_MATCHES: usize = 200;

/// The tools offered to a worker.
pub fn specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: EDITOR,
            description: "View, create and edit files. `view` shows a file with line numbers \
                (or lists a directory); `create` writes a whole file; `str_replace` replaces \
                `old_str`, which must occur exactly once, with `new_str`; `insert` adds \
                `insert_text` after line `insert_line` (0: at the top). Paths are relative to \
                the repository root.",
            schema: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
                    "path": {"type": "string", "description": "Path relative to the repository root"},
                    "view_range": {"type": "array", "items": {"type": "integer"}, "description": "[first, last] line; last -1 for the end"},
                    "file_text": {"type": "string"},
                    "old_str": {"type": "string"},
                    "new_str": {"type": "string"},
                    "insert_line": {"type": "integer"},
                    "insert_text": {"type": "string"}
                },
                "required": ["command", "path"]
            }),
        },
        ToolSpec {
            name: LIST,
            description: "List the repository's files, optionally only those matching a glob \
                such as `src/**/*.rs`. Files this task owns (may change) are marked (owned).",
            schema: json!({
                "type": "object",
                "properties": {"glob": {"type": "string"}},
            }),
        },
        ToolSpec {
            name: SEARCH,
            description: "Search the repository's text files for a regular expression; \
                optionally only files matching a glob. Prints path:line: text.",
            schema: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "A regular expression"},
                    "glob": {"type": "string"}
                },
                "required": ["pattern"]
            }),
        },
    ]
}

/// What a tool answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// What the model reads.
    pub content: String,
    /// Whether it is an error the model should act on.
    pub is_error: bool,
    /// The tool refused a write outside ownership.
    pub refused_write: bool,
}

impl ToolOutcome {
    pub(super) fn ok(content: impl Into<String>) -> ToolOutcome {
        ToolOutcome {
            content: content.into(),
            is_error: false,
            refused_write: false,
        }
    }

    pub(super) fn error(content: impl Into<String>) -> ToolOutcome {
        ToolOutcome {
            content: content.into(),
            is_error: true,
            refused_write: false,
        }
    }
}

/// What the tools may see and touch for one task.
pub struct Workspace {
    root: PathBuf,
    repo: PathBuf,
    files: Arc<Vec<TreeFile>>,
    owns: Globs,
}

impl Workspace {
    /// The tools of a task whose worktree is `root`, reading files it does not own from the
    /// repository `repo` (`files`: the base commit's, sorted), writing only what `owns` matches.
    pub fn new(root: PathBuf, repo: PathBuf, files: Arc<Vec<TreeFile>>, owns: Globs) -> Workspace {
        Workspace {
            root,
            repo,
            files,
            owns,
        }
    }

    /// Runs one tool call.
    pub fn run(&self, name: &str, input: &Result<Value, String>) -> ToolOutcome {
        let input = match input {
            Ok(v) => v,
            Err(raw) => {
                return ToolOutcome::error(format!(
                    "the tool input is not valid JSON: {}",
                    raw.chars().take(200).collect::<String>()
                ))
            }
        };
        match name {
            EDITOR => self.editor(input),
            LIST => self.list(input),
            SEARCH => self.search(input),
            other => ToolOutcome::error(format!(
                "there is no tool `{other}`; use {EDITOR}, {LIST} or {SEARCH}"
            )),
        }
    }

    /// A file of the base commit: the run's sorted file list is shared by every task, so
    /// looking it up costs no memory of its own.
    fn base(&self, path: &str) -> Option<(Oid, u32)> {
        let i = self
            .files
            .binary_search_by(|f| f.path.as_bytes().cmp(path.as_bytes()))
            .ok()?;
        let file = &self.files[i];
        file.is_blob().then_some((file.oid, file.mode))
    }

    fn owned_globs(&self) -> String {
        self.owns.patterns().join(", ")
    }

    fn editor(&self, input: &Value) -> ToolOutcome {
        let text = |k: &str| input.get(k).and_then(Value::as_str);
        let Some(command) = text("command") else {
            return ToolOutcome::error("`command` is missing: view, create, str_replace or insert");
        };
        let Some(raw) = text("path") else {
            return ToolOutcome::error("`path` is missing");
        };
        let path = match clean_path(raw) {
            Ok(p) => p,
            Err(e) => return ToolOutcome::error(e),
        };
        match command {
            "view" => self.view(&path, input.get("view_range")),
            "create" | "str_replace" | "insert" => {
                if path.is_empty() || !self.owns.matches(&path) {
                    return ToolOutcome {
                        content: format!(
                            "`{raw}` is not owned by this task, so it cannot be changed. \
                             This task may only change files matching: {}. \
                             Leave other files as they are.",
                            self.owned_globs()
                        ),
                        is_error: true,
                        refused_write: true,
                    };
                }
                match self.write(command, &path, input) {
                    Ok(message) => ToolOutcome::ok(message),
                    Err(e) => ToolOutcome::error(e),
                }
            }
            other => ToolOutcome::error(format!(
                "unknown command `{other}`: use view, create, str_replace or insert"
            )),
        }
    }

    /// The worktree, opened for this call: every name in it is resolved beneath this
    /// handle, following no link.
    fn tree(&self) -> Result<Tree, String> {
        Tree::open(&self.root).map_err(|e| format!("the worktree is unreadable: {e}"))
    }

    /// Every file path the task can see: tracked files (less owned ones it deleted) and
    /// files it created.
    fn paths(&self, tree: &Tree) -> BTreeSet<String> {
        let mut on_disk = BTreeSet::new();
        // A directory that cannot be listed hides what is beneath it, as before.
        let _ = tree.walk(&mut |entry| {
            if entry.rel.rsplit('/').next() == Some(".git") {
                return Ok(Step::Skip);
            }
            if entry.kind != Kind::Dir && self.owns.matches(entry.rel) {
                on_disk.insert(entry.rel.to_string());
            }
            Ok(Step::Descend)
        });
        let mut out: BTreeSet<String> = self
            .files
            .iter()
            .filter(|f| f.is_blob())
            .filter(|f| !self.owns.matches(&f.path) || on_disk.contains(&f.path))
            .map(|f| f.path.clone())
            .collect();
        out.append(&mut on_disk);
        out
    }

    /// An owned file as it is in the worktree now, judged by what was opened.
    fn read_owned(&self, tree: &Tree, path: &str) -> Result<Content, String> {
        match tree.read(path) {
            Ok(Some(content)) => Ok(content),
            Ok(None) => match tree.kind(path) {
                Ok(Some(Kind::Dir)) => Err(format!("`{path}` is a directory")),
                Ok(Some(_)) => Err(format!("`{path}` is not a regular file")),
                _ if through_link(tree, path) => Err(link_on_the_way(path)),
                _ if self.base(path).is_some() => {
                    Err(format!("`{path}` was deleted in this worktree"))
                }
                _ => Err(format!("`{path}` does not exist")),
            },
            Err(e) => Err(refusal(path, "read", &e)),
        }
    }

    /// The current content of a visible file.
    fn read(&self, tree: &Tree, path: &str) -> Result<Vec<u8>, String> {
        if self.owns.matches(path) {
            return match self.read_owned(tree, path)? {
                Content::File { bytes, .. } => Ok(bytes),
                Content::Link(target) => Ok(link_text(&target).into_bytes()),
            };
        }
        let Some((oid, file_mode)) = self.base(path) else {
            return Err(format!("`{path}` is not a file in this repository"));
        };
        let repo =
            Repository::open(&self.repo).map_err(|e| format!("cannot open the repository: {e}"))?;
        let blob = repo
            .find_blob(oid)
            .map_err(|e| format!("cannot read `{path}`: {e}"))?;
        if file_mode == mode::LINK {
            return Ok(link_text(blob.content()).into_bytes());
        }
        Ok(blob.content().to_vec())
    }

    fn view(&self, path: &str, range: Option<&Value>) -> ToolOutcome {
        let tree = match self.tree() {
            Ok(t) => t,
            Err(e) => return ToolOutcome::error(e),
        };
        let paths = self.paths(&tree);
        if !paths.contains(path) {
            let prefix = if path.is_empty() {
                String::new()
            } else {
                format!("{path}/")
            };
            // A glob (`src/*.py`, as models write them) lists the files it matches.
            let glob = path
                .contains(['*', '?', '['])
                .then(|| glob_matcher(Some(&Value::from(path))).ok().flatten())
                .flatten();
            let under: Vec<&String> = match &glob {
                Some(m) => paths.iter().filter(|p| m.is_match(p)).collect(),
                None => paths.iter().filter(|p| p.starts_with(&prefix)).collect(),
            };
            if under.is_empty() {
                return ToolOutcome::error(format!(
                    "`{path}` is not a file or directory in this repository{}",
                    if glob.is_some() {
                        ", nor matches any file"
                    } else {
                        ""
                    }
                ));
            }
            let mut out = format!(
                "{} file(s) {} `{}`:\n",
                under.len(),
                if glob.is_some() { "match" } else { "under" },
                if path.is_empty() { "." } else { path }
            );
            for p in under.iter().take(MAX_LIST) {
                out.push_str(p);
                out.push('\n');
            }
            if under.len() > MAX_LIST {
                let _ = writeln!(out, "... and {} more", under.len() - MAX_LIST);
            }
            return ToolOutcome::ok(out);
        }
        let bytes = match self.read(&tree, path) {
            Ok(b) => b,
            Err(e) => return ToolOutcome::error(e),
        };
        let Some(text) = as_text(&bytes) else {
            return ToolOutcome::error(format!(
                "`{path}` is a binary file; it cannot be viewed as text"
            ));
        };
        let lines: Vec<&str> = text.lines().collect();
        let (first, last) = match range.and_then(Value::as_array) {
            Some(r) if r.len() == 2 => {
                let first = r[0].as_i64().unwrap_or(1).max(1) as usize;
                let last = match r[1].as_i64() {
                    Some(-1) | None => lines.len(),
                    Some(n) => (n.max(0) as usize).min(lines.len()),
                };
                (first, last)
            }
            _ => (1, lines.len()),
        };
        let mut out = String::new();
        for (i, line) in lines
            .iter()
            .enumerate()
            .take(last)
            .skip(first.saturating_sub(1))
        {
            let _ = writeln!(out, "{:>6}\t{line}", i + 1);
        }
        ToolOutcome::ok(out)
    }

    fn write(&self, command: &str, path: &str, input: &Value) -> Result<String, String> {
        let tree = self.tree()?;
        let text = |k: &str| input.get(k).and_then(Value::as_str);
        let (new_content, executable) = match command {
            "create" => {
                let Some(body) = text("file_text") else {
                    return Err("`file_text` is missing".to_string());
                };
                // What stands at the name only shapes the answer: the write replaces the
                // name whatever it has become, and never goes through a link.
                let executable = match tree.kind(path) {
                    Ok(Some(Kind::Link)) => return Err(not_editable(path)),
                    Ok(Some(Kind::File { executable })) => executable,
                    Ok(_) => false,
                    Err(e) => return Err(refusal(path, "write", &e)),
                };
                (body.to_string(), executable)
            }
            "str_replace" => {
                let (current, executable) = self.current_text(&tree, path)?;
                let Some(old) = text("old_str").filter(|s| !s.is_empty()) else {
                    return Err("`old_str` is missing or empty".to_string());
                };
                let new = text("new_str").unwrap_or("");
                let replaced = match current.matches(old).count() {
                    0 => return Err(format!("`old_str` was not found in `{path}`; view the file and copy the text exactly")),
                    1 => current.replacen(old, new, 1),
                    n => return Err(format!("`old_str` occurs {n} times in `{path}`; include more lines so it occurs once")),
                };
                (replaced, executable)
            }
            _ => {
                let (current, executable) = self.current_text(&tree, path)?;
                (insert_lines(&current, path, input)?, executable)
            }
        };
        tree.write(path, new_content.as_bytes(), executable)
            .map_err(|e| match through_link(&tree, path) {
                true => link_on_the_way(path),
                false => refusal(path, "write", &e),
            })?;
        Ok(match command {
            "create" => format!("created `{path}`"),
            "str_replace" => format!("replaced the text in `{path}`"),
            _ => format!("inserted the text in `{path}`"),
        })
    }

    /// An owned file's text as opened now, and whether it is executable; a link (whatever
    /// it points at) is refused, never read through.
    fn current_text(&self, tree: &Tree, path: &str) -> Result<(String, bool), String> {
        match self.read_owned(tree, path)? {
            Content::Link(_) => Err(not_editable(path)),
            Content::File { bytes, executable } => as_text(&bytes)
                .map(|t| (t.to_string(), executable))
                .ok_or_else(|| format!("`{path}` is a binary file; it cannot be edited")),
        }
    }

    fn list(&self, input: &Value) -> ToolOutcome {
        let matcher = match glob_matcher(input.get("glob")) {
            Ok(m) => m,
            Err(e) => return ToolOutcome::error(e),
        };
        let tree = match self.tree() {
            Ok(t) => t,
            Err(e) => return ToolOutcome::error(e),
        };
        let paths: Vec<String> = self
            .paths(&tree)
            .into_iter()
            .filter(|p| matcher.as_ref().is_none_or(|m| m.is_match(p)))
            .collect();
        if paths.is_empty() {
            return ToolOutcome::ok("no files match");
        }
        let mut out = String::new();
        for p in paths.iter().take(MAX_LIST) {
            out.push_str(p);
            if self.owns.matches(p) {
                out.push_str(" (owned)");
            }
            out.push('\n');
        }
        if paths.len() > MAX_LIST {
            let _ = writeln!(
                out,
                "... and {} more; narrow it with a glob",
                paths.len() - MAX_LIST
            );
        }
        ToolOutcome::ok(out)
    }

    fn search(&self, input: &Value) -> ToolOutcome {
        let Some(pattern) = input.get("pattern").and_then(Value::as_str) else {
            return ToolOutcome::error("`pattern` is missing");
        };
        let regex = match regex::Regex::new(pattern) {
            Ok(r) => r,
            Err(e) => {
                return ToolOutcome::error(format!(
                    "`pattern` is not a valid regular expression: {e}"
                ))
            }
        };
        let matcher = match glob_matcher(input.get("glob")) {
            Ok(m) => m,
            Err(e) => return ToolOutcome::error(e),
        };
        let tree = match self.tree() {
            Ok(t) => t,
            Err(e) => return ToolOutcome::error(e),
        };
        let mut out = String::new();
        let mut found = 0usize;
        for path in self
            .paths(&tree)
            .into_iter()
            .filter(|p| matcher.as_ref().is_none_or(|m| m.is_match(p)))
        {
            let Ok(bytes) = self.read(&tree, &path) else {
                continue;
            };
            let Some(text) = as_text(&bytes) else {
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    found += 1;
                    if found <= MAX_MATCHES {
                        let shown: String = line.chars().take(300).collect();
                        let _ = writeln!(out, "{path}:{}: {shown}", i + 1);
                    }
                }
            }
        }
        if found == 0 {
            return ToolOutcome::ok("no matches");
        }
        if found > MAX_MATCHES {
            let _ = writeln!(
                out,
                "... {} more matches not shown; narrow the pattern or glob",
                found - MAX_MATCHES
            );
        }
        ToolOutcome::ok(out)
    }
}

fn glob_matcher(glob: Option<&Value>) -> Result<Option<globset::GlobMatcher>, String> {
    match glob
        .and_then(Value::as_str)
        .filter(|g| !g.trim().is_empty())
    {
        None => Ok(None),
        Some(g) => globset::GlobBuilder::new(g.trim_start_matches("./"))
            .literal_separator(true)
            .build()
            .map(|g| Some(g.compile_matcher()))
            .map_err(|e| format!("`glob` is not valid: {e}")),
    }
}

/// `insert_text` put after line `insert_line` of `current`.
fn insert_lines(current: &str, path: &str, input: &Value) -> Result<String, String> {
    let Some(line) = input.get("insert_line").and_then(Value::as_u64) else {
        return Err("`insert_line` is missing".to_string());
    };
    let Some(insert) = input.get("insert_text").and_then(Value::as_str) else {
        return Err("`insert_text` is missing".to_string());
    };
    let mut lines: Vec<&str> = current.split_inclusive('\n').collect();
    if line as usize > lines.len() {
        return Err(format!(
            "`insert_line` {line} is past the end of `{path}` ({} lines)",
            lines.len()
        ));
    }
    let mut piece = insert.to_string();
    if !piece.ends_with('\n') {
        piece.push('\n');
    }
    if line as usize == lines.len() && lines.last().is_some_and(|l| !l.ends_with('\n')) {
        piece.insert(0, '\n');
    }
    lines.insert(line as usize, &piece);
    Ok(lines.concat())
}

/// How a link is shown: its target, never what it points at.
fn link_text(target: &[u8]) -> String {
    format!("(symlink to {})", String::from_utf8_lossy(target))
}

fn not_editable(path: &str) -> String {
    format!("`{path}` is a symlink; it cannot be edited")
}

/// Why `path` could not be read or written (`what`): a link on the way is named as such.
fn refusal(path: &str, what: &str, e: &io::Error) -> String {
    // (An error the tree already named carries its own words about the link.)
    match matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::EXDEV)) {
        true => link_on_the_way(path),
        false => format!("cannot {what} `{path}`: {e}"),
    }
}

fn link_on_the_way(path: &str) -> String {
    format!(
        "`{path}` passes through a symlink in the worktree; links are not followed, so it is \
         refused"
    )
}

/// Whether a directory on the way to `path` is a link now (only to word an answer: what
/// was refused was decided by the handle, which follows none).
fn through_link(tree: &Tree, path: &str) -> bool {
    let mut prefix = String::new();
    let parts: Vec<&str> = path.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if matches!(tree.kind(&prefix), Ok(Some(Kind::Link))) {
            return true;
        }
    }
    false
}

/// Text, when the bytes are UTF-8 without NULs.
fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes.iter().take(8000).any(|&b| b == 0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// A repository-relative path, or why it is refused.
pub fn clean_path(raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    if raw.starts_with('/') || Path::new(raw).is_absolute() {
        return Err(format!(
            "absolute path `{raw}` refused: give a path relative to the repository root, such as `src/main.rs`"
        ));
    }
    let mut parts = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "`{raw}` refused: `..` may not leave the repository"
                ))
            }
            ".git" => return Err(format!("`{raw}` refused: `.git` is off limits")),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests;
