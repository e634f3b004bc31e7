//! Planning by a manager model, shared by `plait plan --goal` and `plait run --goal`: its
//! flags, and the manager's plan in a few lines (`ops::manage` plans).

use std::fmt::Write as _;

use super::ui::errln;
use super::CommandError;
use plait::ops;
use plait::ops::manage::{ManageRequest, Managed};
use plait_agents::manager::Planned;
use plait_plan::AgentSpec;
use plait_stages::context::Context;

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
    /// What the manager is asked for `goal`, the workers' agent and base as given.
    pub fn request(
        &self,
        goal: &str,
        worker: Option<AgentSpec>,
        base: Option<String>,
    ) -> ManageRequest {
        ManageRequest {
            goal: goal.to_string(),
            manager: self.manager.clone(),
            model: self.manager_model.clone(),
            include: self.include.clone(),
            max_tasks: self.max_tasks,
            corrections: self.corrections,
            worker,
            base,
        }
    }
}

/// Asks the manager for a plan, saying who is asked.
pub fn manage(ctx: &Context, request: ManageRequest) -> Result<Managed, CommandError> {
    let asking = |name: &str| errln!("asking the manager ({name}) for a plan...");
    Ok(super::runtime()?.block_on(ops::manage::manage(ctx, request, &asking))?)
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
