//! Writing a plan from a split rule: `dir:GLOB` makes a task per matching directory,
//! `file:GLOB` a task per matching file, each with the prompt template filled in.

use std::collections::{BTreeSet, HashSet};

use globset::GlobBuilder;

use super::globs::escape;
use super::{AgentSpec, Defaults, PlanError, PlanFile, TaskFile};
use crate::git::TreeFile;

/// How to cut the repository into tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitRule {
    /// One task per directory matching the glob.
    Dir(String),
    /// One task per tracked file matching the glob.
    File(String),
}

impl SplitRule {
    /// Parses `dir:GLOB` or `file:GLOB`.
    pub fn parse(spec: &str) -> Result<SplitRule, PlanError> {
        let bad = |reason: &str| PlanError::Split {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let (kind, glob) = spec
            .split_once(':')
            .ok_or_else(|| bad("write it as dir:GLOB or file:GLOB, e.g. 'dir:src/*'"))?;
        let glob = glob.trim_matches('/');
        if glob.is_empty() {
            return Err(bad("the glob after the colon is empty"));
        }
        match kind {
            "dir" => Ok(SplitRule::Dir(glob.to_string())),
            "file" => Ok(SplitRule::File(glob.to_string())),
            _ => Err(bad("the kind must be `dir` or `file`")),
        }
    }
}

/// What to put in every task of a split plan.
#[derive(Debug, Clone)]
pub struct SplitSettings {
    pub rule: SplitRule,
    /// The prompt template: `{path}` and `{id}` are filled in per task.
    pub template: String,
    pub goal: String,
    pub agent: Option<AgentSpec>,
    pub base: Option<String>,
}

/// Cuts the tracked `files` into a plan by `settings.rule`.
pub fn split(files: &[TreeFile], settings: &SplitSettings) -> Result<PlanFile, PlanError> {
    let (spec, glob) = match &settings.rule {
        SplitRule::Dir(g) => (format!("dir:{g}"), g),
        SplitRule::File(g) => (format!("file:{g}"), g),
    };
    let matcher = GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map_err(|e| PlanError::Split {
            spec: spec.clone(),
            reason: e.kind().to_string(),
        })?
        .compile_matcher();
    let units: Vec<(String, Vec<String>)> = match &settings.rule {
        SplitRule::File(_) => files
            .iter()
            .filter(|f| f.is_blob() && matcher.is_match(&f.path))
            .map(|f| (f.path.clone(), vec![format!("/{}", escape(&f.path))]))
            .collect(),
        SplitRule::Dir(_) => {
            let dirs: BTreeSet<&str> = files
                .iter()
                .filter(|f| f.is_blob())
                .flat_map(|f| ancestors(&f.path))
                .filter(|d| matcher.is_match(d))
                .collect();
            dirs.iter()
                .map(|dir| {
                    let mut owns = vec![format!("/{}/", escape(dir))];
                    // A matching directory inside this one gets its own task.
                    owns.extend(
                        dirs.iter()
                            .filter(|d| is_inside(d, dir))
                            .map(|d| format!("!/{}/", escape(d))),
                    );
                    (dir.to_string(), owns)
                })
                .collect()
        }
    };
    if units.is_empty() {
        return Err(PlanError::Split {
            spec,
            reason: "it matches no tracked file or directory at the base".to_string(),
        });
    }
    let mut used = HashSet::new();
    let tasks = units
        .into_iter()
        .map(|(path, owns)| {
            let id = unique_id(&path, &mut used);
            TaskFile {
                prompt: fill(&settings.template, &path, &id),
                id,
                owns,
                context: None,
                checkout: None,
                agent: None,
                timeout: None,
                max_turns: None,
                token_budget: None,
            }
        })
        .collect();
    Ok(PlanFile {
        goal: settings.goal.clone(),
        base: settings.base.clone(),
        defaults: Defaults {
            agent: settings.agent.clone(),
            ..Defaults::default()
        },
        tasks,
        providers: Default::default(),
        checks: Default::default(),
        review: None,
        agents: Default::default(),
    })
}

fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

fn is_inside(path: &str, dir: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

fn fill(template: &str, path: &str, id: &str) -> String {
    template.replace("{path}", path).replace("{id}", id)
}

/// A valid task id made from a path, unique among `used`.
fn unique_id(path: &str, used: &mut HashSet<String>) -> String {
    let mut base: String = path
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    while base.contains("--") || base.contains("..") {
        base = base.replace("--", "-").replace("..", ".");
    }
    let mut base = base
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string();
    if base.ends_with(".lock") {
        base.truncate(base.len() - ".lock".len());
    }
    base.truncate(56);
    let base = base.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    let base = if base.is_empty() || super::validate::id_problem(base).is_some() {
        format!("t-{base}")
    } else {
        base.to_string()
    };
    let mut id = base.clone();
    let mut n = 2;
    while !used.insert(id.to_ascii_lowercase()) {
        id = format!("{base}-{n}");
        n += 1;
    }
    id
}
