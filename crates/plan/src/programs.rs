//! The plan's own programs, readable behind the walls. Every program the plan runs (exec and
//! `exec_each` commands, a model's allowed `run` lines, task and merged checks, `[setup] run`,
//! command reviewers and pickers, `{ cli }` argv, an agent CLI's `bin`) is resolved when the
//! plan is, and what it needs to read (its venv, its `node_modules`, its toolchain's prefix)
//! goes into every sandbox of the run as `tools` (`plait_sandbox::sandbox::tools_needed_by`
//! decides what, and what stays closed).

use std::path::Path;

use git2::Repository;
use plait_sandbox::sandbox::{tools_needed_by, ToolEnv};

use super::setup::SetupSettings;
use super::tools::RunCommands;
use super::{resolved::*, PickSpec};

/// The command lines and program words of everything the plan runs.
#[derive(Default)]
struct Named<'a> {
    lines: Vec<&'a str>,
    programs: Vec<&'a str>,
    argvs: Vec<String>,
}

impl<'a> Named<'a> {
    fn agent(&mut self, agent: &'a AgentConfig) {
        match agent {
            AgentConfig::Exec(exec) => self.lines.push(&exec.command),
            AgentConfig::Model { run, .. } => {
                if let RunCommands::Only { patterns, .. } = run.as_ref() {
                    self.lines.extend(patterns.iter().map(String::as_str));
                }
            }
            AgentConfig::Cli(cli) => self.argv(&cli.argv),
            AgentConfig::ClaudeCode(tool) | AgentConfig::Aider(tool) => {
                self.programs.push(&tool.program);
            }
        }
    }

    fn reviewer(&mut self, reviewer: &'a Reviewer) {
        match reviewer {
            Reviewer::Command(line) => self.lines.push(line),
            Reviewer::ClaudeCode(tool) => self.programs.push(&tool.program),
            Reviewer::Cli(cli) => self.argv(&cli.argv),
            Reviewer::Off | Reviewer::Model(_) | Reviewer::Worker => {}
        }
    }

    fn pick(&mut self, pick: &'a PickSpec) {
        if let PickSpec::Command(line) = pick {
            self.lines.push(line);
        }
    }

    /// An argv as the line a shell would read it as.
    fn argv(&mut self, argv: &[String]) {
        if let Ok(line) = shlex::try_join(argv.iter().map(String::as_str)) {
            self.argvs.push(line);
        }
    }
}

/// Puts what the plan's programs need to read into every sandbox of its tasks and checks.
pub(super) fn read_tools(
    repo: &Repository,
    env: &dyn Fn(&str) -> Option<String>,
    tasks: &mut [ResolvedTask],
    checks: &mut CheckSettings,
    review: &ReviewSettings,
    groups: &GroupSettings,
    setup: &SetupSettings,
) {
    let needed = {
        let mut named = Named::default();
        for task in tasks.iter() {
            for agent in task.agents() {
                named.agent(agent);
            }
            if let Some(attempts) = &task.attempts {
                named.pick(&attempts.pick);
            }
            named
                .lines
                .extend(task.own_checks.iter().map(String::as_str));
        }
        named.lines.extend(checks.task.iter().map(String::as_str));
        named.lines.extend(checks.merged.iter().map(String::as_str));
        named.lines.extend(setup.run.iter().map(String::as_str));
        named.reviewer(&review.reviewer);
        named.reviewer(&groups.reviewer);
        let argvs = std::mem::take(&mut named.argvs);
        tools_needed_by(
            named
                .lines
                .iter()
                .copied()
                .chain(argvs.iter().map(String::as_str)),
            named.programs.iter().copied(),
            repo.workdir(),
            Some(repo.commondir()).filter(|d| d != &Path::new("")),
            &ToolEnv::from(env),
        )
    };
    for sandbox in tasks
        .iter_mut()
        .flat_map(ResolvedTask::walls_mut)
        .chain([&mut checks.sandbox])
    {
        sandbox.tools.clone_from(&needed);
    }
}
