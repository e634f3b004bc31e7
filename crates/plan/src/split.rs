//! Writing a plan from a split rule: `dir:GLOB` makes a task per matching directory,
//! `file:GLOB` a task per matching file, `module:GLOB` a task per module of the code with
//! its tests; each task gets the prompt template filled in.

mod languages;
mod modules;

use std::collections::{BTreeSet, HashSet};

use globset::{GlobBuilder, GlobMatcher};

use super::{AgentSpec, Defaults, PlanError, PlanFile, TaskFile};
use modules::Reach;
use plait_core::git::TreeFile;
use plait_core::globs::escape;

/// How to cut the repository into tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitRule {
    /// One task per directory matching the glob.
    Dir(String),
    /// One task per tracked file matching the glob.
    File(String),
    /// One task per module (Rust, Python, JS/TS) the glob selects, with its tests.
    Module(String),
}

impl SplitRule {
    /// Parses `dir:GLOB`, `file:GLOB` or `module:GLOB`.
    pub fn parse(spec: &str) -> Result<SplitRule, PlanError> {
        let bad = |reason: &str| PlanError::Split {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let (kind, glob) = spec.split_once(':').ok_or_else(|| {
            bad("write it as dir:GLOB, file:GLOB or module:GLOB, e.g. 'dir:src/*'")
        })?;
        let glob = glob.trim_matches('/');
        if glob.is_empty() {
            return Err(bad("the glob after the colon is empty"));
        }
        match kind {
            "dir" => Ok(SplitRule::Dir(glob.to_string())),
            "file" => Ok(SplitRule::File(glob.to_string())),
            "module" => {
                let glob = glob.strip_prefix("./").unwrap_or(glob);
                Ok(SplitRule::Module(glob.to_string()))
            }
            _ => Err(bad("the kind must be `dir`, `file` or `module`")),
        }
    }

    /// The rule as written, e.g. `dir:src/*`.
    pub fn spec(&self) -> String {
        match self {
            SplitRule::Dir(g) => format!("dir:{g}"),
            SplitRule::File(g) => format!("file:{g}"),
            SplitRule::Module(g) => format!("module:{g}"),
        }
    }
}

/// What to put in every task of a split plan.
#[derive(Debug, Clone)]
pub struct SplitSettings {
    /// How the files are split into tasks.
    pub rule: SplitRule,
    /// The prompt template: `{path}` and `{id}` are filled in per task.
    pub template: String,
    /// The run's goal.
    pub goal: String,
    /// The agent every task runs, if named.
    pub agent: Option<AgentSpec>,
    /// The plan's base, if named.
    pub base: Option<String>,
    /// A task every split task comes after (`--first`).
    pub first: Option<Edge>,
    /// A task that comes after every other (`--last`).
    pub last: Option<Edge>,
}

/// A task before or after the split's: the files it owns and what it is told.
#[derive(Debug, Clone, Default)]
pub struct Edge {
    /// The globs of the files it owns.
    pub owns: Vec<String>,
    /// What its agent is told.
    pub prompt: String,
}

/// A split plan, and what it leaves to nobody.
#[derive(Debug, Clone)]
pub struct SplitOutcome {
    /// The plan.
    pub plan: PlanFile,
    /// Test code (`module:` only) that names no module, so no task owns it: the test
    /// modules named as their language names tests (`test_x.py`, `x.test.ts`,
    /// `tests/x.rs`) first, then the code they share (`conftest.py`, `tests/common/mod.rs`),
    /// each sorted.
    pub orphan_tests: Vec<String>,
    /// Data files among the tests (`module:` only; fixtures, `tests/examples/*.toml`:
    /// anything not code of a known language) that no task owns, sorted.
    pub orphan_data: Vec<String>,
    /// Package roots (`module:` only; `__init__.py`, `mod.rs`, `index.ts`, a crate's
    /// `lib.rs`) the glob made tasks of their own, because it splits their package.
    pub root_tasks: Vec<RootTask>,
    /// Tests (`module:` only) named after two or more selected modules in different
    /// tasks, so no task owns them.
    pub shared_name_tests: Vec<SharedNameTest>,
    /// Other tracked files the glob reaches (`module:` only) that no task owns.
    pub unowned: Vec<String>,
}

/// A package's root file and the task of its own that owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootTask {
    /// The root file's path (the first, for a crate's `lib.rs` and `main.rs`).
    pub path: String,
    /// The id of the task that owns it.
    pub task: String,
}

/// A test whose name two or more selected modules share, equally near it: which one it
/// tests is unclear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedNameTest {
    /// The test's path.
    pub test: String,
    /// The modules' paths, sorted.
    pub modules: Vec<String>,
}

/// One task's share of the repository.
struct Share {
    /// What `{path}` becomes: the directory, file or module's main path.
    path: String,
    /// What the task id is made from.
    name: String,
    owns: Vec<String>,
    /// Whether it is a package's root file alone (`module:` only).
    root: bool,
}

/// Cuts the tracked `files` into a plan by `settings.rule`.
pub fn split(files: &[TreeFile], settings: &SplitSettings) -> Result<SplitOutcome, PlanError> {
    let spec = settings.rule.spec();
    let bad = |reason: String| PlanError::Split {
        spec: spec.clone(),
        reason,
    };
    let mut outcome = SplitOutcome {
        plan: PlanFile::default(),
        orphan_tests: Vec::new(),
        orphan_data: Vec::new(),
        root_tasks: Vec::new(),
        shared_name_tests: Vec::new(),
        unowned: Vec::new(),
    };
    let shares = match &settings.rule {
        SplitRule::File(glob) => by_file(files, &matcher(glob).map_err(bad)?),
        SplitRule::Dir(glob) => by_dir(files, &matcher(glob).map_err(bad)?),
        SplitRule::Module(glob) => {
            let reach = match glob.as_str() {
                "." => Reach::All,
                _ => Reach::Glob(matcher(glob).map_err(bad)?),
            };
            let found = modules::split_modules(files, &reach).map_err(bad)?;
            outcome.orphan_tests = found.orphan_tests;
            outcome.orphan_data = found.orphan_data;
            outcome.shared_name_tests = found.shared_name_tests;
            outcome.unowned = found.unowned;
            found
                .units
                .into_iter()
                .map(|u| Share {
                    path: u.path,
                    name: u.name,
                    owns: u.owns,
                    root: u.root,
                })
                .collect()
        }
    };
    if shares.is_empty() {
        let reason = "it matches no tracked file or directory at the base";
        return Err(bad(reason.to_string()));
    }
    let roots: Vec<(usize, String)> = shares
        .iter()
        .enumerate()
        .filter(|(_, s)| s.root)
        .map(|(i, s)| (i, s.path.clone()))
        .collect();
    outcome.plan = plan_of(shares, settings);
    // The split's tasks follow `--first`'s, in the order of the shares.
    let skip = usize::from(settings.first.is_some());
    outcome.root_tasks = roots
        .into_iter()
        .map(|(i, path)| RootTask {
            path,
            task: outcome.plan.tasks[skip + i].id.clone(),
        })
        .collect();
    Ok(outcome)
}

fn matcher(glob: &str) -> Result<GlobMatcher, String> {
    Ok(GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map_err(|e| e.kind().to_string())?
        .compile_matcher())
}

fn by_file(files: &[TreeFile], matcher: &GlobMatcher) -> Vec<Share> {
    files
        .iter()
        .filter(|f| f.is_blob() && matcher.is_match(&f.path))
        .map(|f| Share {
            path: f.path.clone(),
            name: f.path.clone(),
            owns: vec![format!("/{}", escape(&f.path))],
            root: false,
        })
        .collect()
}

fn by_dir(files: &[TreeFile], matcher: &GlobMatcher) -> Vec<Share> {
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
            Share {
                path: dir.to_string(),
                name: dir.to_string(),
                owns,
                root: false,
            }
        })
        .collect()
}

fn plan_of(shares: Vec<Share>, settings: &SplitSettings) -> PlanFile {
    let mut used = HashSet::new();
    let task = TaskFile::new;
    let mut tasks: Vec<TaskFile> = shares
        .into_iter()
        .map(|share| {
            let id = unique_id(&share.name, &mut used);
            task(
                id.clone(),
                fill(&settings.template, &share.path, &id),
                share.owns,
            )
        })
        .collect();
    // The split's tasks come after `--first` (through the defaults); `--last` after all.
    let mut after = None;
    if let Some(first) = &settings.first {
        let id = unique_id("first", &mut used);
        after = Some(vec![id.clone()]);
        tasks.insert(0, task(id, first.prompt.clone(), first.owns.clone()));
    }
    if let Some(last) = &settings.last {
        let id = unique_id("last", &mut used);
        let mut t = task(id, last.prompt.clone(), last.owns.clone());
        t.after = Some(vec!["*".to_string()]);
        tasks.push(t);
    }
    PlanFile {
        goal: settings.goal.clone(),
        base: settings.base.clone(),
        defaults: Defaults {
            agent: settings.agent.clone(),
            after,
            ..Defaults::default()
        },
        tasks,
        ..PlanFile::default()
    }
}

/// The directories above `path`, outermost first (the root `""` not included).
fn ancestors(path: &str) -> impl DoubleEndedIterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

/// Whether `path` is strictly inside `dir` (`""` is the root, which holds everything).
fn is_inside(path: &str, dir: &str) -> bool {
    if dir.is_empty() {
        return !path.is_empty();
    }
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
