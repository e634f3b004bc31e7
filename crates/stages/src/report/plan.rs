//! A resolved plan in words, before anything runs: `plait run --dry-run` shows the setup,
//! each task with its agent, the files it owns, the context it reads and the cone of its
//! sparse worktree (as `plan::layout` decided them), then the checks, the reviewer and the
//! groups; `plait plan --check` says it in one line, and the setup under it.

use std::fmt::Write as _;

use plait_plan::{AgentConfig, ResolvedPlan, ResolvedTask, Reviewer};
use plait_sandbox::sandbox::SandboxMode;

/// Paths listed per kind before "… and N more".
const SHOWN: usize = 10;

/// The plan in one line: its tasks, the files they own, its base, its checks and (when it
/// has one) its setup.
pub fn plan_summary(plan: &ResolvedPlan) -> String {
    let owned: usize = plan.tasks.iter().map(|t| t.owned.len()).sum();
    let mut line = format!(
        "{} task(s) owning {owned} file(s), base {} ({}), {} task check(s), {} merged check(s)",
        plan.tasks.len(),
        plan.base_name,
        plait_core::git::short(&plan.base.to_string()),
        plan.checks.task.len(),
        plan.checks.merged.len()
    );
    if !plan.setup.is_empty() {
        let _ = write!(
            line,
            ", setup: {} included path(s), {} run command(s)",
            plan.setup.include.len(),
            plan.setup.run.len()
        );
    }
    line
}

/// The plan's `[setup]`, a heading and a line per kind, for the dry run and `plait plan
/// --check`; empty when the plan has none.
pub fn setup_text(plan: &ResolvedPlan) -> String {
    let setup = &plan.setup;
    let mut out = String::new();
    if setup.is_empty() {
        return out;
    }
    let _ = writeln!(out, "setup (once per base, before any task):");
    paths(&mut out, "include", &setup.include);
    if !setup.include.is_empty() {
        let _ = writeln!(
            out,
            "  {:<9} (from your checkout, read-only in every view and check checkout)",
            ""
        );
    }
    let run: Vec<String> = setup.run.iter().map(|c| format!("`{c}`")).collect();
    paths(&mut out, "run", &run);
    if !setup.run.is_empty() {
        let _ = writeln!(
            out,
            "  {:<9} network {}, {} each",
            "",
            setup.network.as_str(),
            humantime::format_duration(setup.timeout)
        );
    }
    paths(&mut out, "key", &setup.key);
    // The base layer's line (where the installed result is, or that it is made anew) goes
    // here, as `  layer:    ...`.
    out
}

/// The whole plan as `plait run --dry-run` shows it; `groups` is how many supervisor
/// groups the run would have (0 or 1: none).
pub fn plan_text(plan: &ResolvedPlan, groups: usize) -> String {
    let mut out = String::new();
    if !plan.goal.is_empty() {
        let _ = writeln!(out, "goal: {}", plan.goal.lines().next().unwrap_or(""));
    }
    let _ = writeln!(out, "plan: {}", plan_summary(plan));
    if let Some(line) = waves_line(plan) {
        let _ = writeln!(out, "{line}");
    }
    let setup = setup_text(plan);
    if !setup.is_empty() {
        let _ = write!(out, "\n{setup}");
    }
    for task in &plan.tasks {
        task_lines(&mut out, plan, task);
    }
    let _ = writeln!(out);
    check_lines(&mut out, plan);
    group_lines(&mut out, plan, groups);
    out
}

/// The plan's waves when a task comes after another: how many tasks at each depth (a task
/// is one deeper than the deepest it comes after). Tasks start as their inputs end, not
/// wave by wave; the line says how the work is ordered.
fn waves_line(plan: &ResolvedPlan) -> Option<String> {
    if plan.tasks.iter().all(|t| t.after.is_empty()) {
        return None;
    }
    let mut depth: Vec<Option<usize>> = vec![None; plan.tasks.len()];
    // A validated plan has no circle: every pass settles at least one task.
    for _ in 0..plan.tasks.len() {
        for (i, task) in plan.tasks.iter().enumerate() {
            if depth[i].is_some() {
                continue;
            }
            let ups: Option<Vec<usize>> = task.after.iter().map(|&k| depth[k]).collect();
            if let Some(ups) = ups {
                depth[i] = Some(ups.into_iter().max().map_or(0, |d| d + 1));
            }
        }
    }
    let deepest = depth.iter().flatten().max().copied().unwrap_or(0);
    let mut counts = vec![0usize; deepest + 1];
    for d in depth.into_iter().flatten() {
        counts[d] += 1;
    }
    let counts: Vec<String> = counts.iter().map(usize::to_string).collect();
    Some(format!(
        "waves: {} ({} task(s); each task starts when what it comes after has ended)",
        deepest + 1,
        counts.join(" → ")
    ))
}

/// One task: its agent and reviewer, then what its worktree holds and its cone.
fn task_lines(out: &mut String, plan: &ResolvedPlan, task: &ResolvedTask) {
    let _ = writeln!(out, "\ntask {}", task.id);
    let _ = writeln!(
        out,
        "  prompt:   {}",
        task.prompt.lines().next().unwrap_or("")
    );
    match &task.attempts {
        None => {
            let _ = writeln!(out, "  agent:    {}", agent_text(&task.agent));
        }
        Some(attempts) => {
            let pick = match &attempts.pick {
                plait_plan::PickSpec::Checks => "the first whose checks pass".to_string(),
                plait_plan::PickSpec::Review => "its reviewer compares those that pass".to_string(),
                plait_plan::PickSpec::Command(c) => format!("`{c}` names one of those that pass"),
            };
            let _ = writeln!(
                out,
                "  attempts: {} (each a task slot of its own; picked by {}: {pick})",
                attempts.count,
                attempts.pick.name()
            );
            for n in 1..=attempts.count {
                let _ = writeln!(
                    out,
                    "    {}~{n}:    {}",
                    task.id,
                    agent_text(&attempts.spec(n).agent)
                );
            }
        }
    }
    if !task.after.is_empty() {
        let after: Vec<&str> = task
            .after
            .iter()
            .map(|&k| plan.tasks[k].id.as_str())
            .collect();
        let _ = writeln!(
            out,
            "  after:    {} (starts from their merged work)",
            after.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "  review:   {}",
        reviewer_text(&plan.review.reviewer_for(task))
    );
    let _ = writeln!(
        out,
        "  timeout:  {} · sandbox {}",
        humantime::format_duration(task.timeout),
        sandbox_text(&task.sandbox)
    );
    paths(out, "owns", &task.owned);
    let context: Vec<String> = task
        .layout
        .files
        .iter()
        .map(|&i| plan.files[i].path.clone())
        .filter(|p| task.owned.binary_search(p).is_err())
        .collect();
    paths(out, "context", &context);
    let cone = &task.layout.cone;
    if cone.is_full() {
        let _ = writeln!(out, "  cone:     everything (checkout = \"full\")");
        return;
    }
    let mut dirs: Vec<String> = cone.whole().map(|d| format!("{d}/ (all of it)")).collect();
    dirs.extend(cone.own().map(|d| match d {
        "" => "/ (its own files)".to_string(),
        d => format!("{d}/ (its own files)"),
    }));
    paths(out, "cone", &dirs);
}

/// `label: first path`, the next ones aligned under it, at most [`SHOWN`].
fn paths(out: &mut String, label: &str, list: &[String]) {
    let mut head = format!("{label}:");
    if list.is_empty() {
        let _ = writeln!(out, "  {head:<9} -");
        return;
    }
    for path in list.iter().take(SHOWN) {
        let _ = writeln!(out, "  {head:<9} {path}");
        head.clear();
    }
    if list.len() > SHOWN {
        let _ = writeln!(out, "  {:<9} … and {} more", "", list.len() - SHOWN);
    }
}

/// The agent, as a person would name it.
fn agent_text(agent: &AgentConfig) -> String {
    agent.describe()
}

fn reviewer_text(reviewer: &Reviewer) -> String {
    match reviewer {
        Reviewer::Off | Reviewer::Worker => "off".to_string(),
        Reviewer::Command(command) => format!("command `{command}`"),
        Reviewer::Model(p) => format!("model {} ({})", p.model, p.name),
        Reviewer::ClaudeCode(t) => format!(
            "claude-code{}",
            t.model
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ),
        Reviewer::Cli(c) => format!("cli `{}`", c.argv.join(" ")),
    }
}

fn sandbox_text(sandbox: &plait_sandbox::sandbox::SandboxSettings) -> String {
    let mode = match sandbox.mode {
        SandboxMode::Auto => "auto",
        SandboxMode::Required => "required",
        SandboxMode::Off => "off",
    };
    let mut text = format!("{mode}, network {}", sandbox.network.as_str());
    if !sandbox.ports.is_empty() {
        let ports: Vec<String> = sandbox.ports.iter().map(u16::to_string).collect();
        let _ = write!(text, " (loopback ports {})", ports.join(", "));
    }
    let listed = |paths: &[std::path::PathBuf]| {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        shown.join(", ")
    };
    if !sandbox.sockets.is_empty() {
        let _ = write!(text, ", sockets under {}", listed(&sandbox.sockets));
    }
    if !sandbox.writable.is_empty() {
        let _ = write!(text, ", also writable: {}", listed(&sandbox.writable));
    }
    text
}

/// The task and merged checks, with their limits, and how many review rounds.
fn check_lines(out: &mut String, plan: &ResolvedPlan) {
    let checks = &plan.checks;
    let list = |commands: &[String]| -> String {
        if commands.is_empty() {
            return "none".to_string();
        }
        let quoted: Vec<String> = commands.iter().map(|c| format!("`{c}`")).collect();
        quoted.join(", ")
    };
    let _ = writeln!(out, "task checks:   {}", list(&checks.task));
    let _ = writeln!(out, "merged checks: {}", list(&checks.merged));
    let _ = writeln!(
        out,
        "checks: {} at once, {} each, network {}; culprit search {}; {} rework round(s) for culprits; {} review round(s) of changes",
        checks.jobs,
        humantime::format_duration(checks.timeout),
        checks.network.as_str(),
        if checks.bisect { "on" } else { "off" },
        checks.rework,
        plan.review.rounds
    );
    let exec = plan
        .tasks
        .iter()
        .filter(|t| matches!(t.agent, AgentConfig::Exec(_)))
        .count();
    if exec > 0 && !plan.review.rounds_set {
        let _ = writeln!(
            out,
            "exec agents ({exec} task(s)): no rounds of changes ([review] rounds sets some)"
        );
    }
}

/// The supervisor groups the run would have, each with its tasks.
fn group_lines(out: &mut String, plan: &ResolvedPlan, groups: usize) {
    if groups < 2 {
        let _ = writeln!(out, "groups: none");
        return;
    }
    let supervisor = match &plan.groups.reviewer {
        Reviewer::Worker => plan
            .tasks
            .first()
            .map_or(Reviewer::Off, |t| plan.review.reviewer_for(t)),
        other => other.clone(),
    };
    let _ = writeln!(
        out,
        "groups: {groups}, supervised by {}",
        reviewer_text(&supervisor)
    );
    for (k, members) in crate::groups::assign(&plan.tasks, groups)
        .iter()
        .enumerate()
    {
        let ids: Vec<&str> = members.iter().map(|&i| plan.tasks[i].id.as_str()).collect();
        let _ = writeln!(out, "  group-{}: {}", k + 1, ids.join(", "));
    }
}
