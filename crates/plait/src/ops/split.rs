//! Writing a plan from a split rule: the use case behind `plait plan --split`. A task per
//! directory, file or module the rule matches at the base, its prompt from a template; the
//! plan's TOML carries a header saying how it was made and what no task owns, and why.

use std::fmt::Write as _;
use std::path::Path;

use plait_plan::split::{split as split_files, Edge, SplitOutcome, SplitRule, SplitSettings};
use plait_plan::{self as plan, AgentSpec};
use plait_stages::context::Context;

use super::OpsError;

/// What a split is asked.
pub struct SplitRequest<'a> {
    /// The rule (`dir:src/*`, `file:lib/**/*.py`, `module:src/*`).
    pub spec: &'a str,
    /// Each task's prompt, `{path}` and `{id}` filled in.
    pub template: &'a str,
    /// What the whole run should achieve (default: the template, said of the whole glob).
    pub goal: Option<String>,
    /// The tasks' agent, if chosen.
    pub agent: Option<AgentSpec>,
    /// The commit the tasks start from (default: HEAD).
    pub base: Option<String>,
    /// A task owning these files that comes before every other, and its prompt.
    pub first: Option<Edge>,
    /// A task owning these files that comes after every other, and its prompt.
    pub last: Option<Edge>,
}

/// A plan written from a split rule.
pub struct Split {
    /// Its TOML, with the header.
    pub text: String,
    /// What the split found (the plan among it).
    pub outcome: SplitOutcome,
    /// The checkout's paths the plan's suggested `[setup]` shares into every view.
    pub setup_shares: Vec<String>,
    /// What a run of it should be warned of (an exec command reading `$PLAIT_FILE` where a
    /// task owns several files, or files of another kind than most).
    pub warnings: Vec<String>,
}

/// Splits the tracked files at the request's base by its rule (see the module's doc).
pub fn split(ctx: &Context, request: SplitRequest<'_>) -> Result<Split, OpsError> {
    let rule = SplitRule::parse(request.spec)?;
    let repo = ctx.repo()?;
    let files = super::manage::base_files(&repo, request.base.as_deref())?;
    let settings = SplitSettings {
        rule,
        template: request.template.to_string(),
        goal: request
            .goal
            .unwrap_or_else(|| default_goal(request.template, request.spec)),
        agent: request.agent,
        base: request.base,
        first: request.first,
        last: request.last,
    };
    let mut outcome = split_files(&files, &settings)?;
    let mut setup_shares = Vec::new();
    if let Some(setup) = plan::suggested_setup(ctx.workdir(), &files) {
        setup_shares = setup.include.clone();
        outcome.plan.setup = setup;
    }
    let text = plan::to_toml(&outcome.plan, &split_header(request.spec, &outcome));
    let warnings = exec_warnings(&repo, &outcome.plan);
    Ok(Split {
        text,
        outcome,
        setup_shares,
        warnings,
    })
}

/// What a run of `plan` should be warned of when its exec command reads `$PLAIT_FILE` and
/// some task owns more than one file, or its per-file command would run on files of
/// another kind than most; the plan is resolved as `plait run` would only when it has an
/// exec agent.
fn exec_warnings(repo: &git2::Repository, plan: &plan::PlanFile) -> Vec<String> {
    let exec = |spec: &Option<AgentSpec>| matches!(spec, Some(AgentSpec::Exec(_)));
    if !exec(&plan.defaults.agent) && !plan.tasks.iter().any(|t| exec(&t.agent)) {
        return Vec::new();
    }
    let Ok(resolved) = plan::resolve(repo, plan.clone(), Path::new("the split plan")) else {
        return Vec::new();
    };
    [
        resolved.single_file_warning(),
        resolved.mixed_files_warning(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The comment at the top of a split plan: how it was made, and what no task owns and why.
fn split_header(spec: &str, outcome: &SplitOutcome) -> String {
    let mut header = format!(
        "plait plan, made by --split '{spec}'\n{} task(s); edit freely, then: plait run <this file>",
        outcome.plan.tasks.len()
    );
    let roots: Vec<String> = outcome
        .root_tasks
        .iter()
        .map(|r| format!("{}: task {}", r.path, r.task))
        .collect();
    header.push_str(&listing(
        "Package roots, each a task of its own (the glob splits their packages):",
        &roots,
    ));
    header.push_str(&listing(
        "Tests that name no module; no task owns them:",
        &outcome.orphan_tests,
    ));
    if !outcome.orphan_data.is_empty() {
        let _ = write!(
            header,
            "\n{} data file(s) among the tests (not code); no task owns them: {}",
            outcome.orphan_data.len(),
            data_places(&outcome.orphan_data)
        );
    }
    let shared: Vec<String> = outcome
        .shared_name_tests
        .iter()
        .map(|t| format!("{} (named after {})", t.test, t.modules.join(" and ")))
        .collect();
    header.push_str(&listing(
        "Tests named after two or more selected modules; no task owns them:",
        &shared,
    ));
    header.push_str(&listing(
        "Files the glob reaches that no task owns:",
        &outcome.unowned,
    ));
    header
}

/// Lines for the plan's header: `title`, then `paths` one per line (at most 30).
fn listing(title: &str, paths: &[String]) -> String {
    const SHOWN: usize = 30;
    if paths.is_empty() {
        return String::new();
    }
    let mut out = format!("\n{title}");
    for path in paths.iter().take(SHOWN) {
        out.push_str("\n  ");
        out.push_str(path);
    }
    if paths.len() > SHOWN {
        let _ = write!(out, "\n  ... and {} more", paths.len() - SHOWN);
    }
    out
}

/// Where `files` are, in one line: `tests/examples/*.toml (50), tests/data/*.json (2)`,
/// the places holding most first, at most three.
fn data_places(files: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut places: std::collections::BTreeMap<String, usize> = Default::default();
    for file in files {
        let (dir, name) = file.rsplit_once('/').unwrap_or(("", file));
        let kind = match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => format!("*.{ext}"),
            _ => "*".to_string(),
        };
        let place = match dir {
            "" => kind,
            _ => format!("{dir}/{kind}"),
        };
        *places.entry(place).or_default() += 1;
    }
    let mut places: Vec<(String, usize)> = places.into_iter().collect();
    places.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut line: Vec<String> = places
        .iter()
        .take(SHOWN)
        .map(|(place, n)| format!("{place} ({n})"))
        .collect();
    if places.len() > SHOWN {
        line.push(format!("{} more place(s)", places.len() - SHOWN));
    }
    line.join(", ")
}

/// The goal of a split plan when none is given: the template, said of the whole glob.
fn default_goal(template: &str, spec: &str) -> String {
    let glob = spec.split_once(':').map_or(spec, |(_, g)| g);
    template
        .replace("{path}", glob)
        .replace("{id}", "each task")
}
