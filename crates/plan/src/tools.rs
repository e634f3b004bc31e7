//! The plan's `[tools]` table: what the tools of a model agent may do beyond its files.
//! Today that is `run`, the command lines its `run` tool may run, as globs over the whole
//! line (`*` matches anything, spaces and `/` included). Absent: any command, inside the
//! task's walls; an empty list: the tool is not offered. The walls, not these globs, keep a
//! command to the task: `cargo *` also matches `cargo test; make`.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

/// The `[tools]` table as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsFile {
    /// Globs over the whole command line that a model agent's `run` tool may run, such as
    /// `["cargo *", "npm test"]` (default: any command; `[]`: no `run` tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Vec<String>>,
}

impl ToolsFile {
    pub(super) fn is_empty(&self) -> bool {
        self.run.is_none()
    }
}

/// Which command lines a model agent's `run` tool may run, resolved.
#[derive(Debug, Clone, Default)]
pub enum RunCommands {
    /// Any command (`[tools] run` absent).
    #[default]
    Any,
    /// Only lines matching one of these globs.
    Only {
        /// The globs as written.
        patterns: Vec<String>,
        /// The globs compiled.
        set: GlobSet,
    },
    /// No `run` tool (`run = []`).
    Off,
}

impl RunCommands {
    /// `[tools] run` resolved; each glob that does not parse is a problem naming the key,
    /// and the tool is then off.
    pub fn resolve(file: &ToolsFile, problems: &mut Vec<String>) -> RunCommands {
        let Some(patterns) = &file.run else {
            return RunCommands::Any;
        };
        if patterns.is_empty() {
            return RunCommands::Off;
        }
        let mut builder = GlobSetBuilder::new();
        let mut bad = false;
        for pattern in patterns {
            let glob = GlobBuilder::new(pattern.trim())
                .literal_separator(false)
                .backslash_escape(true)
                .build();
            match glob {
                Ok(glob) if !pattern.trim().is_empty() => {
                    builder.add(glob);
                }
                Ok(_) => {
                    bad = true;
                    problems.push("[tools] run: a pattern is empty".to_string());
                }
                Err(e) => {
                    bad = true;
                    problems.push(format!(
                        "[tools] run: `{pattern}` is not a valid glob: {}",
                        e.kind()
                    ));
                }
            }
        }
        match builder.build() {
            Ok(set) if !bad => RunCommands::Only {
                patterns: patterns.iter().map(|p| p.trim().to_string()).collect(),
                set,
            },
            Ok(_) => RunCommands::Off,
            Err(e) => {
                problems.push(format!("[tools] run: the patterns do not build: {e}"));
                RunCommands::Off
            }
        }
    }

    /// Whether the `run` tool is offered at all.
    pub fn offered(&self) -> bool {
        !matches!(self, RunCommands::Off)
    }

    /// Whether `command` (its whole line, surrounding blanks aside) may run.
    pub fn allows(&self, command: &str) -> bool {
        match self {
            RunCommands::Any => true,
            RunCommands::Only { set, .. } => set.is_match(command.trim()),
            RunCommands::Off => false,
        }
    }

    /// In words: "any command", "no `run` tool", or the patterns, each in backquotes.
    pub fn describe(&self) -> String {
        match self {
            RunCommands::Any => "any command".to_string(),
            RunCommands::Off => "no `run` tool".to_string(),
            RunCommands::Only { patterns, .. } => patterns
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(run: Option<&[&str]>) -> (RunCommands, Vec<String>) {
        let file = ToolsFile {
            run: run.map(|r| r.iter().map(|s| s.to_string()).collect()),
        };
        let mut problems = Vec::new();
        (RunCommands::resolve(&file, &mut problems), problems)
    }

    #[test]
    fn a_star_matches_spaces_and_slashes_over_the_whole_line() {
        let (run, problems) = resolved(Some(&["cargo *", "npm test", "python3 -m unittest*"]));
        assert!(problems.is_empty(), "{problems:?}");
        assert!(run.allows("cargo test -p core --lib"));
        assert!(run.allows("  npm test "));
        assert!(run.allows("python3 -m unittest discover -s tests/unit"));
        assert!(!run.allows("npm test --watch"));
        assert!(!run.allows("rm -rf target && cargo test"));
        assert_eq!(
            run.describe(),
            "`cargo *`, `npm test`, `python3 -m unittest*`"
        );
    }

    #[test]
    fn absent_is_any_command_and_empty_is_no_tool() {
        let (any, _) = resolved(None);
        assert!(any.offered() && any.allows("make"));
        let (off, problems) = resolved(Some(&[]));
        assert!(!off.offered() && !off.allows("make") && problems.is_empty());
    }

    #[test]
    fn a_bad_glob_is_a_problem_naming_the_key() {
        let (run, problems) = resolved(Some(&["cargo [test", "  "]));
        assert!(!run.offered());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("[tools] run: `cargo [test`"),
            "{problems:?}"
        );
    }
}
