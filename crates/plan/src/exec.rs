//! The exec agent's command as a plan holds it: run once per task (`exec`), or once per
//! owned file (`exec_each`, with `{file}` filled in); and the warning for a once-per-task
//! command that reads `$PLAIT_FILE`, which is empty in a task that owns several files (a
//! module with its tests, a directory).

use std::fmt;

use super::resolved::{AgentConfig, ResolvedPlan};

/// A shell command an exec agent runs in the task's worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecCommand {
    /// The command line, run by the shell.
    pub command: String,
    /// Once per owned file, in order, `{file}` replaced by the file's path (quoted for the
    /// shell) and `PLAIT_FILE` set to it; otherwise once for the whole task.
    pub each_file: bool,
    /// With `each_file`: the owned files it runs on, as gitignore-style globs (`*.rs`: at
    /// any depth); empty, every owned file.
    pub files: Vec<String>,
}

impl ExecCommand {
    /// A command run once per task (`{ exec = "CMD" }`).
    pub fn once(command: impl Into<String>) -> ExecCommand {
        ExecCommand {
            command: command.into(),
            each_file: false,
            files: Vec::new(),
        }
    }

    /// A command run once per owned file (`{ exec_each = "CMD" }`).
    pub fn each_file(command: impl Into<String>) -> ExecCommand {
        ExecCommand {
            command: command.into(),
            each_file: true,
            files: Vec::new(),
        }
    }

    /// The same per-file command, run only on the owned files `files` matches.
    pub fn on_files(self, files: Vec<String>) -> ExecCommand {
        ExecCommand { files, ..self }
    }

    /// Which of `owned` a per-file command runs on: those its `files` match, else all.
    pub fn files_of<'a>(&self, owned: &'a [String]) -> Vec<&'a String> {
        match plait_core::globs::Globs::new(&self.files) {
            Ok(globs) if !self.files.is_empty() => {
                owned.iter().filter(|f| globs.matches(f)).collect()
            }
            _ => owned.iter().collect(),
        }
    }

    /// The plan's key for it: `exec` or `exec_each`.
    pub(crate) fn key(&self) -> &'static str {
        if self.each_file {
            "exec_each"
        } else {
            "exec"
        }
    }

    /// Whether a once-per-task command reads `$PLAIT_FILE` (or `${PLAIT_FILE}`), which is
    /// set only when the task owns exactly one file.
    pub(crate) fn reads_single_file(&self) -> bool {
        !self.each_file && names_variable(&self.command, "PLAIT_FILE")
    }
}

impl From<&str> for ExecCommand {
    fn from(command: &str) -> ExecCommand {
        ExecCommand::once(command)
    }
}

impl From<String> for ExecCommand {
    fn from(command: String) -> ExecCommand {
        ExecCommand::once(command)
    }
}

/// The command as written (`{file}` shows which form it is).
impl fmt::Display for ExecCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.command)
    }
}

/// Whether `command` expands the shell variable `name`: `$NAME` not followed by another
/// character of a name, or `${NAME` followed by `}` or an operator such as `:-`.
fn names_variable(command: &str, name: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    ["$", "${"].iter().any(|open| {
        let needle = format!("{open}{name}");
        command
            .match_indices(&needle)
            .any(|(i, _)| !command[i + needle.len()..].starts_with(is_name))
    })
}

impl ResolvedPlan {
    /// The warning to give when an `exec` command reads `$PLAIT_FILE` in tasks that own
    /// more than one file, where it is empty: how many, one of them, and the per-file form.
    pub fn single_file_warning(&self) -> Option<String> {
        let mut hit = self.tasks.iter().filter(|t| {
            let reads = matches!(&t.agent, AgentConfig::Exec(c) if c.reads_single_file());
            reads && t.owned.len() > 1
        });
        let first = hit.next()?;
        let more = hit.count();
        let AgentConfig::Exec(command) = &first.agent else {
            return None;
        };
        let tasks = match more {
            0 => "1 task owns".to_string(),
            n => format!("{} tasks own", n + 1),
        };
        Some(format!(
            "the exec command `{command}` reads $PLAIT_FILE, which is set only when a task owns \
             exactly one file, but {tasks} more than one (such as `{}`, with {} files); run it \
             on each file with agent = {{ exec_each = \"CMD {{file}}\" }} (plait plan \
             --exec-each), or read every owned path from the file named by $PLAIT_FILES \
             (NUL-separated) or $PLAIT_OWNED (one per line)",
            first.id,
            first.owned.len()
        ))
    }
}

/// A file's extension as the warning names it: `.rs`, or the whole name when it has none.
fn kind_of(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!(".{ext}"),
        _ => name.to_string(),
    }
}

impl ResolvedPlan {
    /// The warning to give when an `exec_each` command with no `files` will run on owned
    /// files of another kind than most of them (a `LICENSE` or a `README.md` in a module
    /// of `.rs` files): how many, one of them, and the `files` that keeps to the others.
    pub fn mixed_files_warning(&self) -> Option<String> {
        let each: Vec<_> = self
            .tasks
            .iter()
            .filter_map(|t| match &t.agent {
                AgentConfig::Exec(c) if c.each_file && c.files.is_empty() => Some((t, c)),
                _ => None,
            })
            .collect();
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for (task, _) in &each {
            for file in &task.owned {
                *counts.entry(kind_of(file)).or_default() += 1;
            }
        }
        let (main, _) = counts
            .iter()
            .filter(|(kind, _)| kind.starts_with('.'))
            .max_by_key(|(_, n)| **n)?;
        let mut others = each.iter().flat_map(|(task, command)| {
            task.owned
                .iter()
                .filter(|f| &kind_of(f) != main)
                .map(move |f| (task, command, f))
        });
        let (task, command, file) = others.next()?;
        let more = others.count();
        let files = match more {
            0 => "1 owned file is".to_string(),
            n => format!("{} owned files are", n + 1),
        };
        Some(format!(
            "the exec_each command `{command}` runs on every owned file, and {files} not \
             `{main}` (such as `{file}` of task `{}`); to run it on the `{main}` files alone, \
             add files = [\"*{main}\"] to the agent table (plait plan --each '*{main}')",
            task.id
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_reads_plait_file_in_either_spelling() {
        for cmd in [
            "rustfmt \"$PLAIT_FILE\"",
            "rustfmt $PLAIT_FILE",
            "rustfmt ${PLAIT_FILE}",
            "cat ${PLAIT_FILE:-x}",
            "x=$PLAIT_FILE;",
        ] {
            assert!(ExecCommand::once(cmd).reads_single_file(), "{cmd}");
        }
        for cmd in [
            "xargs -0 rustfmt < \"$PLAIT_FILES\"",
            "cat ${PLAIT_FILES}",
            "rustfmt $(cat \"$PLAIT_OWNED\")",
            "echo PLAIT_FILE",
        ] {
            assert!(!ExecCommand::once(cmd).reads_single_file(), "{cmd}");
        }
        assert!(!ExecCommand::each_file("rustfmt \"$PLAIT_FILE\"").reads_single_file());
    }

    #[test]
    fn files_choose_the_owned_files_a_per_file_command_runs_on() {
        let owned: Vec<String> = [
            "src/a/mod.rs",
            "src/a/LICENSE",
            "src/a/b/c.rs",
            "tests/a.rs",
        ]
        .map(String::from)
        .to_vec();
        let all = ExecCommand::each_file("rustfmt {file}");
        assert_eq!(all.files_of(&owned).len(), 4);
        let rs = all.clone().on_files(vec!["*.rs".to_string()]);
        assert_eq!(
            rs.files_of(&owned),
            vec!["src/a/mod.rs", "src/a/b/c.rs", "tests/a.rs"]
        );
        let src = all.on_files(vec!["/src/**/*.rs".to_string()]);
        assert_eq!(src.files_of(&owned), vec!["src/a/mod.rs", "src/a/b/c.rs"]);
        assert_eq!(kind_of("src/a/LICENSE"), "LICENSE");
        assert_eq!(kind_of("src/.hidden"), ".hidden");
        assert_eq!(kind_of("a/b.tar.gz"), ".gz");
    }
}
