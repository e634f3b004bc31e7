//! Planning by a manager: the use case behind `plait plan --goal` and `plait run --goal`.
//! The manager (a model over its API, or Claude Code on its login) is asked for a plan for
//! a goal; a plan that is not valid goes back to it with what is wrong, a few times; the
//! plan, its TOML and the transcript are kept under the repository's plait directory.

use std::path::PathBuf;
use std::sync::Arc;

use plait_agents::manager::{self, Manager, ManagerError, PlanRequest, Planned};
use plait_core::cancel::Cancel;
use plait_llm::limiter::Limiter;
use plait_llm::provider::{builtin_kind, resolve_provider, ProviderFile, ProviderSettings};
use plait_plan::{AgentSpec, ToolSettings};
use plait_stages::context::Context;

use super::OpsError;

/// What the manager is asked.
#[derive(Debug, Clone)]
pub struct ManageRequest {
    /// What the plan is to do.
    pub goal: String,
    /// Who plans: a built-in provider (`anthropic`, `openai`; its base URL and key come
    /// from the context's environment as for workers) or `claude-code`. `None`: the
    /// Anthropic API where there is its key, else Claude Code where it is installed, else
    /// the API (whose missing key the error then names).
    pub manager: Option<String>,
    /// The model to ask, in place of the provider's default.
    pub model: Option<String>,
    /// Files whose contents the manager may read (globs).
    pub include: Vec<String>,
    /// The most tasks the plan may have.
    pub max_tasks: usize,
    /// How many times a plan that is not valid goes back to the manager.
    pub corrections: u32,
    /// The workers' agent (default: the manager's provider).
    pub worker: Option<AgentSpec>,
    /// The commit the plan is for (default: HEAD).
    pub base: Option<String>,
}

/// A manager's plan.
pub struct Managed {
    /// Its TOML, with a header listing what no task owns.
    pub toml: String,
    /// The plan, checked.
    pub planned: Planned,
    /// Where the TOML is kept.
    pub path: PathBuf,
    /// Who planned, as the TOML's header names it (`anthropic (claude-…)`).
    pub manager: String,
}

/// Who plans, as the request says.
enum Chosen {
    Model(Box<ProviderSettings>),
    ClaudeCode(Arc<ToolSettings>),
}

/// Asks the manager of `request` for a plan; `asking` is told who is asked just before.
pub async fn manage(
    ctx: &Context,
    request: ManageRequest,
    asking: &(dyn Fn(&str) + Sync),
) -> Result<Managed, OpsError> {
    let manager_name = request
        .manager
        .clone()
        .unwrap_or_else(|| default_manager(ctx));
    let chosen = choose(ctx, &request, &manager_name)?;
    let env = |name: &str| ctx.var(name);
    let plans_dir = ctx.plait_dir().join("plans");
    std::fs::create_dir_all(&plans_dir).map_err(OpsError::io(&plans_dir))?;
    let stamp = plait_core::state::now_ms();
    let transcript = plans_dir.join(format!("manager-{stamp}.jsonl"));
    let client = plait_llm::client().map_err(|e| ManagerError::Call(e.to_string()))?;
    let (_interrupt, cancel) = Cancel::new();
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
                plait_program: ctx.program(),
                dir: &plans_dir,
            };
        }
    }
    asking(&name);
    let manager = Manager {
        planner,
        cancel: &cancel,
        transcript: &transcript,
        env: &env,
    };
    let plan_request = PlanRequest {
        goal: request.goal.clone(),
        base: request.base.clone(),
        include: request.include.clone(),
        worker: request
            .worker
            .clone()
            .unwrap_or(AgentSpec::Named(manager_name)),
        max_tasks: request.max_tasks,
        corrections: request.corrections,
    };
    let planned = {
        let repo = ctx.repo()?;
        let files = base_files(&repo, request.base.as_deref())?;
        manager.plan(&repo, &files, &plan_request).await?
    };
    let toml = manager::render(&planned, &name);
    let path = plans_dir.join(format!("manager-{stamp}.toml"));
    let _ = std::fs::write(&path, &toml);
    Ok(Managed {
        toml,
        planned,
        path,
        manager: name,
    })
}

/// The manager when none is named: the Anthropic API where plait has its key, else Claude
/// Code where it is installed (a login is all it needs), else the API (whose missing key
/// the error then names).
fn default_manager(ctx: &Context) -> String {
    let keyed = ctx
        .var("ANTHROPIC_API_KEY")
        .is_some_and(|k| !k.trim().is_empty());
    let path = ctx.var("PATH");
    if !keyed && plait_sandbox::shell::findable("claude", path.as_deref()) {
        "claude-code".to_string()
    } else {
        "anthropic".to_string()
    }
}

/// Checks the request; who plans: the manager's provider, resolved from the context's
/// environment, or Claude Code.
fn choose(ctx: &Context, request: &ManageRequest, manager: &str) -> Result<Chosen, OpsError> {
    let bad = |what: &'static str, message: String| OpsError::Manage { what, message };
    if request.goal.trim().is_empty() {
        return Err(bad("goal", "it is empty".to_string()));
    }
    if request.max_tasks == 0 {
        return Err(bad("max-tasks", "it must be at least 1".to_string()));
    }
    for glob in &request.include {
        plait_core::globs::Globs::new(std::slice::from_ref(glob))
            .map_err(|e| bad("include", e.to_string()))?;
    }
    let env = |name: &str| ctx.var(name);
    if manager == "claude-code" {
        let plan = plait_plan::PlanFile::default();
        return plait_plan::claude_code_settings(&plan, &env, request.model.clone())
            .map(Chosen::ClaudeCode)
            .map_err(|e| bad("manager", e.to_string()));
    }
    if builtin_kind(manager).is_none() {
        return Err(OpsError::UnknownManager {
            name: manager.to_string(),
        });
    }
    let file = ProviderFile {
        model: request.model.clone(),
        ..ProviderFile::default()
    };
    resolve_provider(manager, Some(&file), &env)
        .map(|p| Chosen::Model(Box::new(p)))
        .map_err(|e| bad("manager", e.to_string()))
}

/// The tracked files of `base` (default HEAD).
pub(super) fn base_files(
    repo: &git2::Repository,
    base: Option<&str>,
) -> Result<Vec<plait_core::git::TreeFile>, OpsError> {
    let base_name = base.unwrap_or("HEAD");
    let commit = repo
        .revparse_single(base_name)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| OpsError::BadBase {
            rev: base_name.to_string(),
        })?;
    let tree = commit
        .tree()
        .map_err(|e| OpsError::Repo(plait_core::git::RepoError::Git(e)))?;
    plait_core::git::flatten_tree(&tree).map_err(|e| OpsError::Repo(e.into()))
}
