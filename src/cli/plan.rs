//! `plait plan`: write a plan from a split rule.

use std::path::{Path, PathBuf};

use clap::Args;

use super::error::Context as _;
use super::ui::{err, errln, out, outln};
use super::CommandError;
use plait::ops;
use plait::ops::split::SplitRequest;
use plait_plan::{AgentSpec, ExecCommand};

/// Write a plan: by a manager model for a goal, or a task per directory, file or module
/// matching a split rule
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  plait plan --goal 'Move every module under src/ from log to tracing' --include 'Cargo.toml' -o plait.toml
  plait plan --split 'dir:src/*' --prompt 'Move {path} from log to tracing' --exec './migrate.sh' -o plait.toml
  plait plan --split 'module:src/*' --prompt 'Move {path} from log to tracing' --agent claude-code \
    --first /Cargo.toml --first-prompt 'Add tracing to the dependencies' \
    --last /Cargo.toml --last-prompt 'Remove log from the dependencies' -o plait.toml
  plait plan --split 'file:lib/**/*.py' --prompt 'Format {path}' --exec 'ruff format \"$PLAIT_FILE\"' > plait.toml
  plait plan --split 'module:src/*' --prompt 'Format {path}' --each '*.rs' \\
    --exec-each 'rustfmt --edition 2021 --emit stdout < {file} > \"$PLAIT_SCRATCH/out\" && cp \"$PLAIT_SCRATCH/out\" {file}' -o plait.toml
  plait plan --split 'module:src/*' --prompt 'Document {path}' --agent anthropic -o plait.toml
  plait plan --check plait.toml     # validate a plan alone, as `plait run` would

SPEC is dir:GLOB (a task per matching directory; a matching directory inside another gets
its own task), file:GLOB (a task per tracked file) or module:GLOB (a task per module of the
code, with its tests). Globs match repository-relative paths; `*` stays within one
directory, `**` crosses directories. TEMPLATE may use {path} (the task's directory or file,
or the module's) and {id}.

module: finds Rust modules under each crate's src/ (x.rs, x/mod.rs, x.rs with x/; lib.rs
and main.rs make one task), Python packages (directories with __init__.py) and modules,
with their .pyi stubs, and JS/TS modules (directories and files under src/, or under the
package). GLOB selects a module when it matches the module's path or a directory above it
('module:src/*': the crate's top-level modules; 'module:**' or 'module:.': every top-level
module); a module inside a selected one stays with it: 'module:pkg' is one task for the
package, 'module:pkg/*' a task per module in it, and its __init__.py (mod.rs, index.ts) a
task of its own. Tests go with the module they name: tests/x.rs, benches/x.rs,
tests/test_x.py (x.py, else _x.py), x_test.py, x.test.ts, __tests__/x.ts, tests/x.test.ts,
tests/x/; of several modules with that name, the nearest selected one. The plan's header
lists the package roots that are tasks of their own, the tests that name no module (test
modules first), counts the data files among the tests apart, and lists the tests named
after selected modules in different tasks and the files the glob reaches that no task
owns.

--first GLOB --first-prompt TEXT adds a task `first` owning GLOB that every split task
comes after (`[defaults] after`): they start from its result. --last GLOB --last-prompt
TEXT adds a task `last` that comes after every other (`after = [\"*\"]`). Either may own a
split task's files again: it runs before or after them, never beside them.

--exec runs once per task: $PLAIT_FILE is its file only when it owns exactly one (plait
plan warns otherwise), $PLAIT_OWNED and $PLAIT_FILES list them all (one per line, and
NUL-separated). --exec-each runs once per owned file, {file} quoted for the shell, and
--each keeps it to the files a glob matches (plait plan warns when it would also run on
files of another kind, such as a LICENSE in a module of .rs files). rustfmt given a path
follows the file's `mod x;` into files the task does not hold (and fails there: a lib.rs
task), so the example gives it the file on stdin, which it formats alone, with the
repository's rustfmt.toml (found from the worktree's root, where it is context).

A dependency directory of your checkout that git ignores and a tracked lockfile fills
(node_modules/ beside package-lock.json, .venv/ beside uv.lock) goes into the plan's
[setup] include, so that every task's view has it.

With --goal and no --split, a manager model (--manager, default anthropic) sees the tracked
files with their sizes, and the contents of files matching --include, and submits tasks;
plait validates them like a hand-written plan and sends the problems back (--corrections
times). The plan's header lists the tracked files no task owns. The workers run --exec,
--agent, or the manager's provider.")]
pub struct PlanArgs {
    /// How to cut the repository into tasks: dir:GLOB, file:GLOB or module:GLOB
    #[arg(long, value_name = "SPEC")]
    pub split: Option<String>,
    /// Prompt template for every task; {path} and {id} are filled in
    #[arg(long, value_name = "TEMPLATE")]
    pub prompt: Option<String>,
    /// Shell command every task runs (the exec agent)
    #[arg(long, value_name = "CMD", conflicts_with = "agent")]
    pub exec: Option<String>,
    /// Shell command every task runs once per owned file, in order: {file} is the file's
    /// path, quoted for the shell (PLAIT_FILE is set to it too)
    #[arg(long, value_name = "CMD", conflicts_with_all = ["exec", "agent"])]
    pub exec_each: Option<String>,
    /// With --exec-each: run it only on the owned files GLOB matches (gitignore-style:
    /// '*.rs' at any depth; repeatable)
    #[arg(long, value_name = "GLOB", requires = "exec_each")]
    pub each: Vec<String>,
    /// Name of the agent every task runs
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// With --split: a task owning these files (a glob; repeat for more) that every split
    /// task comes after, such as the build file a change needs first
    #[arg(long, value_name = "GLOB", requires_all = ["split", "first_prompt"])]
    pub first: Vec<String>,
    /// What the --first task is told
    #[arg(long, value_name = "TEXT", requires = "first")]
    pub first_prompt: Option<String>,
    /// With --split: a task owning these files that comes after every other, such as a
    /// removal once nothing uses what it removes
    #[arg(long, value_name = "GLOB", requires_all = ["split", "last_prompt"])]
    pub last: Vec<String>,
    /// What the --last task is told
    #[arg(long, value_name = "TEXT", requires = "last")]
    pub last_prompt: Option<String>,
    /// What the whole run should achieve (with --split, default: the prompt template;
    /// without, a manager model plans for it)
    #[arg(long, value_name = "TEXT")]
    pub goal: Option<String>,
    /// Branch or commit the tasks start from (default: HEAD)
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Write the plan to FILE instead of stdout
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Validate the plan FILE alone, as `plait run` would, and say what it holds in one
    /// line (exit 0), or its problems (exit 2)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["split", "goal", "prompt", "exec", "exec_each", "agent", "base", "output"])]
    pub check: Option<PathBuf>,
    #[command(flatten)]
    pub manager: super::manage::ManagerArgs,
}

pub fn cmd_plan(dir: &Path, args: PlanArgs) -> Result<(), CommandError> {
    if let Some(path) = &args.check {
        return check_plan(dir, path);
    }
    if let (None, Some(goal)) = (&args.split, &args.goal) {
        return plan_by_manager(dir, goal, &args);
    }
    let Some(spec) = &args.split else {
        return Err(CommandError::usage("`plait plan` needs --split SPEC or --goal TEXT")
            .hint("e.g. plait plan --split 'dir:src/*' --prompt 'Migrate {path}' --exec CMD, or plait plan --goal 'Migrate to tracing'"));
    };
    let Some(template) = &args.prompt else {
        return Err(
            CommandError::usage("`plait plan --split` needs --prompt TEMPLATE")
                .hint("e.g. --prompt 'Format {path}'"),
        );
    };
    plan_by_split(dir, spec, template, &args)
}

/// `plait plan --split SPEC --prompt TEMPLATE`: a task per directory, file or module.
fn plan_by_split(
    dir: &Path,
    spec: &str,
    template: &str,
    args: &PlanArgs,
) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    let request = SplitRequest {
        spec,
        template,
        goal: args.goal.clone(),
        agent: worker(args),
        base: args.base.clone(),
        first: edge(&args.first, &args.first_prompt),
        last: edge(&args.last, &args.last_prompt),
    };
    let has_agent = request.agent.is_some();
    let made = ops::split::split(&ctx, request)?;
    let outcome = &made.outcome;
    if !made.setup_shares.is_empty() {
        errln!(
            "note: the plan's [setup] shares {} of your checkout (ignored, installed from a \
             tracked lockfile) into every task's view",
            made.setup_shares.join(", ")
        );
    }
    if !outcome.orphan_tests.is_empty() {
        errln!(
            "note: {} test(s) name no module and go to no task; the plan's header lists them",
            outcome.orphan_tests.len()
        );
    }
    if !outcome.orphan_data.is_empty() {
        errln!(
            "note: {} data file(s) among the tests go to no task; the plan's header counts them",
            outcome.orphan_data.len()
        );
    }
    if !outcome.shared_name_tests.is_empty() {
        errln!(
            "note: {} test(s) are named after two or more selected modules and go to no task; \
             the plan's header lists them with the modules",
            outcome.shared_name_tests.len()
        );
    }
    if !has_agent {
        errln!("note: the plan has no agent; set `agent` under [defaults] before running it");
    }
    for warning in &made.warnings {
        errln!("warning: {warning}");
    }
    match &args.output {
        Some(path) => {
            std::fs::write(path, &made.text).map_err(|e| {
                CommandError::usage(format!("cannot write {}: {e}", path.display()))
            })?;
            errln!(
                "wrote {} with {} task(s)",
                path.display(),
                outcome.plan.tasks.len()
            );
        }
        None => out!("{}", made.text)?,
    }
    Ok(())
}

/// The task `--first` or `--last` asks for, if any.
fn edge(owns: &[String], prompt: &Option<String>) -> Option<plait_plan::split::Edge> {
    (!owns.is_empty()).then(|| plait_plan::split::Edge {
        owns: owns.to_vec(),
        prompt: prompt.clone().unwrap_or_default(),
    })
}

/// `plait plan --check FILE`: the plan validated as `plait run` validates it, nothing
/// created.
fn check_plan(dir: &Path, path: &Path) -> Result<(), CommandError> {
    let text = super::run::read_plan(path)?;
    let ctx = super::context(dir)?;
    let text = ops::config::with_config(&ctx, path, &text)?;
    let planned = ops::run::plan(&ctx, path, &text)?;
    for warning in &planned.warnings {
        errln!("warning: {warning}");
    }
    outln!(
        "{}: valid: {}",
        path.display(),
        plait_stages::report::plan_summary(&planned.resolved)
    )?;
    out!("{}", plait_stages::report::setup_text(&planned.resolved))
}

/// The tasks' agent from `--exec`, `--exec-each` or `--agent`.
fn worker(args: &PlanArgs) -> Option<AgentSpec> {
    if let Some(cmd) = &args.exec_each {
        return Some(AgentSpec::Exec(
            ExecCommand::each_file(cmd.as_str()).on_files(args.each.clone()),
        ));
    }
    match (&args.exec, &args.agent) {
        (Some(cmd), _) => Some(AgentSpec::Exec(ExecCommand::once(cmd.as_str()))),
        (None, Some(name)) => Some(AgentSpec::Named(name.clone())),
        (None, None) => None,
    }
}

/// `plait plan --goal` without a split rule: the manager model plans.
fn plan_by_manager(dir: &Path, goal: &str, args: &PlanArgs) -> Result<(), CommandError> {
    if args.prompt.is_some() {
        return Err(CommandError::usage(
            "--prompt goes with --split; with --goal alone the manager writes each task's prompt",
        ));
    }
    let ctx = super::context(dir)?;
    let request = args.manager.request(goal, worker(args), args.base.clone());
    let managed = super::manage::manage(&ctx, request)?;
    let (toml, planned) = (managed.toml, managed.planned);
    err!("{}", super::manage::summary(&planned));
    if let Some(warning) = planned.resolved.single_file_warning() {
        errln!("warning: {warning}");
    }
    match &args.output {
        Some(path) => {
            std::fs::write(path, &toml).context(format!("cannot write {}", path.display()))?;
            errln!(
                "wrote {}; read it, then: plait run {}",
                path.display(),
                path.display()
            );
        }
        None => out!("{toml}")?,
    }
    Ok(())
}
