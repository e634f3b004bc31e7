//! Planning by a manager model, shared by `plait plan --goal` and `plait run --goal`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::error::Context as _;
use super::ui::errln;
use super::CommandError;
use plait::plan::manager::{self, Manager, PlanRequest, Planned};
use plait::plan::AgentSpec;
use plait_core::cancel::Cancel;
use plait_core::git;
use plait_llm::limiter::Limiter;
use plait_llm::provider::{builtin_kind, resolve_provider, ProviderFile, ProviderSettings};

/// The manager's flags, shared by `plait plan` and `plait run`.
#[derive(Debug, Clone, clap::Args)]
pub struct ManagerArgs {
    /// With --goal: who plans: `anthropic` or `openai` (a model; key and base URL from the
    /// environment), or `claude-code` (the Claude Code CLI, on its login). Default:
    /// `anthropic` with ANTHROPIC_API_KEY set, else `claude-code` when `claude` is on PATH
    #[arg(long, value_name = "NAME")]
    pub manager: Option<String>,
    /// With --goal: the manager's model (default: the provider's)
    #[arg(long = "manager-model", value_name = "MODEL")]
    pub manager_model: Option<String>,
    /// With --goal: files whose contents the manager may read (globs; repeatable)
    #[arg(long, value_name = "GLOB")]
    pub include: Vec<String>,
    /// With --goal: the most tasks the plan may have
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub max_tasks: usize,
    /// With --goal: how many times a plan that is not valid goes back to the manager
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub corrections: u32,
}

impl ManagerArgs {
    pub fn options(
        &self,
        goal: &str,
        worker: Option<AgentSpec>,
        base: Option<String>,
    ) -> ManagerOptions {
        ManagerOptions {
            goal: goal.to_string(),
            manager: self.manager.clone().unwrap_or_else(default_manager),
            model: self.manager_model.clone(),
            include: self.include.clone(),
            max_tasks: self.max_tasks,
            corrections: self.corrections,
            worker,
            base,
        }
    }
}

/// What the command line says about the manager.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    pub goal: String,
    /// A built-in provider (`anthropic`, `openai`); its base URL and key come from the
    /// environment as for workers.
    pub manager: String,
    pub model: Option<String>,
    pub include: Vec<String>,
    pub max_tasks: usize,
    pub corrections: u32,
    /// The workers' agent (default: the manager's provider).
    pub worker: Option<AgentSpec>,
    pub base: Option<String>,
}

/// The manager when `--manager` is not given: the Anthropic API where plait has its key,
/// else Claude Code where it is installed (a login is all it needs), else the API (whose
/// missing key the error then names).
fn default_manager() -> String {
    let keyed = std::env::var("ANTHROPIC_API_KEY").is_ok_and(|k| !k.trim().is_empty());
    let path = std::env::var("PATH").ok();
    if !keyed && plait_sandbox::shell::findable("claude", path.as_deref()) {
        "claude-code".to_string()
    } else {
        "anthropic".to_string()
    }
}

/// Who plans, as the options say.
enum Chosen {
    Model(Box<ProviderSettings>),
    ClaudeCode(std::sync::Arc<plait::plan::ToolSettings>),
}

/// Asks the manager for a plan; returns its TOML (with a header listing what no task owns)
/// and the plan. The transcript is kept under the repository's plait directory.
pub fn plan_by_manager(
    dir: &Path,
    options: &ManagerOptions,
) -> Result<(String, Planned, PathBuf), CommandError> {
    let chosen = check(options)?;
    let env = |name: &str| std::env::var(name).ok();
    let repo = git::open(dir)?;
    let files = super::base_files(&repo, options.base.as_deref())?;
    let request = PlanRequest {
        goal: options.goal.clone(),
        base: options.base.clone(),
        include: options.include.clone(),
        worker: options
            .worker
            .clone()
            .unwrap_or_else(|| AgentSpec::Named(options.manager.clone())),
        max_tasks: options.max_tasks,
        corrections: options.corrections,
    };
    let plans_dir = git::plait_dir(&repo).join("plans");
    std::fs::create_dir_all(&plans_dir)
        .context(format!("cannot create {}", plans_dir.display()))?;
    let stamp = plait_core::state::now_ms();
    let transcript = plans_dir.join(format!("manager-{stamp}.jsonl"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError::internal("cannot start the async runtime").because(e))?;
    let client =
        plait_llm::client().map_err(|e| CommandError::internal("cannot set up HTTP").because(e))?;
    let (_interrupt, cancel) = Cancel::new();
    let plait_program = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("plait"));
    let (planner, name, limiter);
    match &chosen {
        Chosen::Model(provider) => {
            limiter = Limiter::new(provider.limits);
            name = format!("{} ({})", provider.name, provider.model);
            planner = manager::Planner::Model {
                provider,
                limiter: &limiter,
                client: &client,
            };
        }
        Chosen::ClaudeCode(settings) => {
            name = match &settings.model {
                Some(model) => format!("claude-code ({model})"),
                None => "claude-code".to_string(),
            };
            planner = manager::Planner::ClaudeCode {
                settings,
                plait_program: &plait_program,
                dir: &plans_dir,
            };
        }
    }
    errln!("asking the manager ({name}) for a plan...");
    let manager = Manager {
        planner,
        cancel: &cancel,
        transcript: &transcript,
        env: &env,
    };
    let planned = runtime.block_on(manager.plan(&repo, &files, &request))?;
    let toml = manager::render(&planned, &name);
    let plan_copy = plans_dir.join(format!("manager-{stamp}.toml"));
    let _ = std::fs::write(&plan_copy, &toml);
    Ok((toml, planned, plan_copy))
}

/// Checks the options; returns who plans: the manager's provider, resolved from the
/// environment, or Claude Code.
fn check(options: &ManagerOptions) -> Result<Chosen, CommandError> {
    if options.goal.trim().is_empty() {
        return Err(CommandError::usage("--goal is empty"));
    }
    if options.max_tasks == 0 {
        return Err(CommandError::usage("--max-tasks must be at least 1"));
    }
    for glob in &options.include {
        plait_core::globs::Globs::new(std::slice::from_ref(glob))
            .map_err(|e| CommandError::usage(format!("--include: {e}")))?;
    }
    let env = |name: &str| std::env::var(name).ok();
    if options.manager == "claude-code" {
        let plan = plait::plan::PlanFile::default();
        return plait::plan::claude_code_settings(&plan, &env, options.model.clone())
            .map(Chosen::ClaudeCode)
            .map_err(|e| CommandError::usage(format!("the manager: {e}")));
    }
    if builtin_kind(&options.manager).is_none() {
        return Err(CommandError::usage(format!(
            "--manager `{}` is neither a built-in model provider nor claude-code",
            options.manager
        ))
        .hint("use --manager anthropic, --manager openai (ANTHROPIC_BASE_URL / OPENAI_BASE_URL point them elsewhere) or --manager claude-code"));
    }
    let file = ProviderFile {
        model: options.model.clone(),
        ..ProviderFile::default()
    };
    resolve_provider(&options.manager, Some(&file), &env)
        .map(|p| Chosen::Model(Box::new(p)))
        .map_err(|e| CommandError::usage(format!("the manager: {e}")))
}

/// A few lines about a manager's plan for stderr: the tasks, what they own, what is left.
pub fn summary(planned: &Planned) -> String {
    let mut out = format!(
        "the manager planned {} task(s) in {} answer(s)",
        planned.plan.tasks.len(),
        planned.attempts
    );
    if let Some(cost) = planned.usage.cost_usd {
        let _ = write!(out, " (${cost:.4})");
    }
    out.push_str(":\n");
    for (task, resolved) in planned.plan.tasks.iter().zip(&planned.resolved.tasks) {
        let _ = writeln!(
            out,
            "  {:<20} {:>4} file(s)  {}",
            task.id,
            resolved.owned.len(),
            task.owns.join(" ")
        );
    }
    if planned.unowned.is_empty() {
        out.push_str("every tracked file is owned by a task\n");
    } else {
        let shown: Vec<&str> = planned
            .unowned
            .iter()
            .take(10)
            .map(String::as_str)
            .collect();
        let more = planned.unowned.len().saturating_sub(shown.len());
        let _ = writeln!(
            out,
            "{} tracked file(s) no task owns: {}{}",
            planned.unowned.len(),
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    out
}
