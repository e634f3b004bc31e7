//! The `aider` agent: `aider --message` in the task's worktree with the owned files in the
//! chat, `--yes-always --no-auto-commits`, and its model, base URL and key from the task's
//! provider.
//!
//! aider runs in the task's whole-tree view, so it reads (and its commands run against) the
//! whole repository with the task's edits in place. Where the plan has task checks, they
//! are its `--test-cmd` with `--auto-test`: after each edit aider runs them through
//! `plait run-in-view` (which fills in the view where there is no overlay) and, while they
//! fail, sends their output back to the model for another edit, up to aider's own limit of
//! three, all within one of plait's rounds; plait's own run of the checks on the round's
//! commit still decides.
//!
//! What aider writes itself (its chat and input history, its git index and objects) goes to
//! `aider/` in the task's scratch, the one place in the task's directory its processes may
//! write, never the worktree, so collect sees only the agent's edits. Its stdout, which
//! plait captures into `aider-output-<round>.txt` beside the log, holds the token and cost
//! lines that feed the task's accounting.

use std::path::Path;
use std::sync::{Arc, LazyLock};

use regex::Regex;

use super::context::{Agent, AgentFuture, AgentOutcome, AgentReport, TaskContext};
use super::exec::{outcome_of, shell_quote, task_env};
use crate::prompts;
use plait_core::beneath::Tree;
use plait_core::state::Usage;
use plait_llm::provider::ProviderKind;
use plait_plan::ToolSettings;
use plait_sandbox::shell;
use plait_trees::workspace;

/// Runs aider once per round of a task.
#[derive(Debug, Clone)]
pub struct AiderAgent {
    settings: Arc<ToolSettings>,
}

impl AiderAgent {
    /// Runs aider with these settings (`[agents.aider]`).
    pub fn new(settings: Arc<ToolSettings>) -> AiderAgent {
        AiderAgent { settings }
    }

    /// The command line for one round; history files go to `dir`.
    fn argv(&self, task: &TaskContext, dir: &Path) -> Vec<String> {
        let rules =
            prompts::worker::cli_rules(&task.goal, &task.task, task.owns.patterns(), &task.owned);
        let ask =
            prompts::worker::round_message(&task.prompt, task.round, task.feedback.as_deref());
        let message = prompts::worker::aider_message(&rules, &ask);
        let mut argv: Vec<String> = [
            self.settings.program.as_str(),
            "--message",
            &message,
            "--yes-always",
            "--no-auto-commits",
            "--no-stream",
            "--no-gitignore",
            "--no-check-update",
            "--no-show-release-notes",
            "--analytics-disable",
            "--no-pretty",
            "--no-fancy-input",
            "--no-detect-urls",
            "--map-tokens",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let history = |name: &str| dir.join(name).display().to_string();
        argv.extend([
            "--chat-history-file".to_string(),
            history("chat.history.md"),
            "--input-history-file".to_string(),
            history("input.history"),
        ]);
        if let Some(model) = self.model_name() {
            argv.push("--model".to_string());
            argv.push(model);
        }
        // The base URL (through the gateway, the task's lease's token) is given in the
        // environment, never on the command line, which other processes may read.
        if let Some(path) = self.model_metadata(task) {
            argv.push("--model-metadata-file".to_string());
            argv.push(path.display().to_string());
        }
        if let Some(test) = test_cmd(&task.plait_program, &task.checks) {
            argv.extend(["--test-cmd".to_string(), test, "--auto-test".to_string()]);
        }
        // The plan's own arguments come after plait's, so its `--test-cmd` wins.
        argv.extend(self.settings.args.iter().cloned());
        argv.extend(task.owned.iter().cloned());
        argv
    }

    /// What aider is told of its model (`--model-metadata-file`), so that it does not
    /// fetch litellm's table from GitHub at every start, which the network wall refuses:
    /// its context window and output limit, and its prices where plait knows them. Written
    /// beside the task's log, read-only to aider; `None` when there is no provider.
    fn model_metadata(&self, task: &TaskContext) -> Option<std::path::PathBuf> {
        let provider = self.settings.provider.as_ref()?;
        let model = self.model_name()?;
        let mut entry = serde_json::json!({
            "max_input_tokens": 128_000,
            "max_output_tokens": provider.max_tokens,
            "max_tokens": provider.max_tokens,
            "litellm_provider": match provider.kind {
                ProviderKind::Anthropic => "anthropic",
                ProviderKind::Openai => "openai",
            },
            "mode": "chat",
        });
        if let Some(p) = plait_llm::provider::default_prices(&model).or(provider.prices) {
            entry["input_cost_per_token"] = serde_json::json!(p.input / 1e6);
            entry["output_cost_per_token"] = serde_json::json!(p.output / 1e6);
        }
        let path = plait_core::state::TaskDir(task.dir().to_path_buf()).aider_models();
        let text = serde_json::json!({ model: entry }).to_string();
        std::fs::write(&path, text).ok()?;
        Some(path)
    }

    /// The model as aider is given it: `openai/NAME` or `anthropic/NAME`.
    fn model_name(&self) -> Option<String> {
        let provider = self.settings.provider.as_ref();
        let model = self
            .settings
            .model
            .clone()
            .or_else(|| provider.map(|p| p.model.clone()))?;
        if model.contains('/') {
            return Some(model);
        }
        let prefix = match provider.map(|p| p.kind) {
            Some(ProviderKind::Anthropic) => "anthropic/",
            _ => "openai/",
        };
        Some(format!("{prefix}{model}"))
    }

    /// The `PLAIT_*` variables and the provider's key and base URL (never on the command
    /// line, where other processes could read them); a git index and object
    /// store of aider's own (in `dir`), and a git identity where git finds none.
    fn env(&self, task: &TaskContext, dir: &Path) -> Vec<(&'static str, String)> {
        let mut env = task_env(task);
        if let Some(p) = &self.settings.provider {
            // Through the gateway: its stand-in key (the real one stays in plait).
            let key = match &task.gateway {
                Some(lease) => lease.key(),
                None => p.api_key.as_ref().map(|k| k.expose().to_string()),
            };
            match p.kind {
                ProviderKind::Openai => {
                    env.extend(key.map(|k| ("OPENAI_API_KEY", k)));
                    // aider's `--openai-api-base`, and what it sets from it for litellm.
                    env.push(("AIDER_OPENAI_API_BASE", base_url(task, p)));
                    env.push(("OPENAI_API_BASE", base_url(task, p)));
                }
                ProviderKind::Anthropic => {
                    env.extend(key.map(|k| ("ANTHROPIC_API_KEY", k)));
                    env.push(("ANTHROPIC_BASE_URL", base_url(task, p)));
                    env.push(("ANTHROPIC_API_BASE", base_url(task, p)));
                }
            }
        }
        let repo = git2::Repository::open(&task.repo).ok();
        env.extend(own_git_state(task, repo.as_ref(), dir));
        // aider writes a placeholder identity into the repository's config where git finds
        // none (the walls refuse it, and two aiders would race for its lock).
        let inherited = self.settings.inherited.git_config_count;
        let identity = super::identity::identity(&task.worktree, &env, inherited);
        env.extend(identity);
        // litellm would fetch its price table from GitHub at every start.
        env.push(("LITELLM_LOCAL_MODEL_COST_MAP", "True".to_string()));
        env
    }

    async fn run_round(&self, task: &TaskContext) -> AgentReport {
        if let Some(reason) = task.budget.exhausted() {
            return AgentOutcome::Stopped { reason }.into();
        }
        // aider runs commands (its `--test-cmd`) and reads the repository: the view must
        // be whole before it starts.
        if let Err(why) = task.view.ensure().await {
            return AgentOutcome::Failed {
                reason: format!("the task's whole-tree view could not be made for aider: {why}"),
                exit_code: None,
            }
            .into();
        }
        let dir = task.scratch().join(OWN);
        // The scratch is the task's to write: the directory is made beneath a handle on it,
        // a link in its place refused.
        if let Err(e) = Tree::open(&task.scratch()).and_then(|t| t.create_dir_all(OWN)) {
            return AgentOutcome::Failed {
                reason: format!("cannot create {}: {e}", dir.display()),
                exit_code: None,
            }
            .into();
        }
        // Written by plait, not by aider: it may live beside the log.
        let stdout_path = task.dir().join(format!("aider-output-{}.txt", task.round));
        let env = self.env(task, &dir);
        let (counted, asked) = (task.counted(), task.asked());
        let (outcome, stdout) =
            shell::run_argv_capturing(&self.argv(task, &dir), &task.launch(&env), &stdout_path)
                .await;
        let usage = parse_usage(&stdout);
        let own = usage.as_ref().map_or(0, |u| u.requests);
        task.spend(usage.as_ref().and_then(|u| u.cost_usd), counted);
        let usage = usage.map(|u| task.own_usage(u, counted));
        let outcome = task.unasked(outcome_of(outcome, task), (asked, own), "aider", &stdout);
        AgentReport {
            outcome,
            usage,
            summary: None,
            nothing_to_do: None,
        }
    }
}

/// The base URL aider is given for provider `p`: the task's way through the gateway, or
/// the provider's own.
fn base_url(task: &TaskContext, p: &plait_llm::provider::ProviderSettings) -> String {
    match &task.gateway {
        Some(lease) => lease.base_url(),
        None => p.base_url.clone(),
    }
}

/// The shell command aider runs after each of its edits (`--test-cmd`, which aider hands to
/// `sh -c`): the task checks one after another, each in a shell of its own as plait runs
/// them, stopping at the first that fails, all in the task's whole-tree view through
/// `plait run-in-view`; `None` when there are no task checks.
fn test_cmd(plait: &Path, checks: &[String]) -> Option<String> {
    if checks.is_empty() {
        return None;
    }
    let mut command = format!(
        "{} run-in-view -- sh -c {} checks",
        shell_quote(&plait.display().to_string()),
        shell_quote(r#"for check do sh -c "$check" || exit; done"#),
    );
    for check in checks {
        command.push(' ');
        command.push_str(&shell_quote(check));
    }
    Some(command)
}

/// A git index and object store of aider's own: aider `git add`s the files it creates,
/// and the worktree's index and the repository's objects are git state, which the sandbox
/// lets no agent write (plait commits from the files on disk). As git's own quarantine
/// does for a push, aider writes new objects into a directory of the task's and reads the
/// repository's through `GIT_ALTERNATE_OBJECT_DIRECTORIES`; its index is a copy of the
/// worktree's, taken before each round. Both are in `dir`, in the task's scratch.
fn own_git_state(
    task: &TaskContext,
    repo: Option<&git2::Repository>,
    dir: &Path,
) -> Vec<(&'static str, String)> {
    let Some(repo) = repo else {
        return Vec::new();
    };
    let admin = workspace::admin_dir(repo, &workspace::admin_name(&task.run, &task.task));
    let (index, objects) = (dir.join("index"), dir.join("objects"));
    // `dir` is in the task's scratch, which its processes write: the copy is written, and
    // the store made, beneath a handle on the scratch, so a link aider's processes left in
    // its place is replaced or refused, never written through.
    let made = std::fs::read(admin.join("index")).and_then(|bytes| {
        let scratch = Tree::open(&task.scratch())?;
        scratch.write(Path::new(OWN).join("index"), &bytes, false)?;
        scratch.create_dir_all(Path::new(OWN).join("objects"))
    });
    if made.is_err() {
        return Vec::new();
    }
    let path = |p: &Path| p.display().to_string();
    vec![
        ("GIT_INDEX_FILE", path(&index)),
        ("GIT_OBJECT_DIRECTORY", path(&objects)),
        (
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            path(&repo.commondir().join("objects")),
        ),
    ]
}

/// The name of aider's own directory in its task's scratch.
const OWN: &str = "aider";

/// aider's accounting line, printed after each answer of the model.
static TOKENS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Tokens: ([\d.,]+)(k?) sent(?:, ([\d.,]+)(k?) cache write)?(?:, ([\d.,]+)(k?) cache hit)?, ([\d.,]+)(k?) received\.(?: Cost: \$([\d.,]+) message, \$([\d.,]+) session\.)?",
    )
    .expect("aider token regex")
});

/// Tokens and cost from aider's `Tokens: ... Cost: ...` lines: tokens summed over the
/// answers, cost the last session figure. `None` when it printed none.
pub fn parse_usage(stdout: &str) -> Option<Usage> {
    let number = |m: Option<regex::Match<'_>>, k: Option<regex::Match<'_>>| -> u64 {
        let value: f64 = m
            .map(|m| m.as_str().replace(',', ""))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0);
        let scale = if k.is_some_and(|k| k.as_str() == "k") {
            1000.0
        } else {
            1.0
        };
        (value * scale).round() as u64
    };
    let mut usage = Usage::default();
    let mut session = None;
    for caps in TOKENS.captures_iter(stdout) {
        usage.turns += 1;
        usage.requests += 1;
        usage.input_tokens += number(caps.get(1), caps.get(2));
        usage.cache_creation_input_tokens += number(caps.get(3), caps.get(4));
        usage.cache_read_input_tokens += number(caps.get(5), caps.get(6));
        usage.output_tokens += number(caps.get(7), caps.get(8));
        if let Some(cost) = caps.get(10) {
            session = cost.as_str().replace(',', "").parse::<f64>().ok();
        }
    }
    usage.cost_usd = session;
    (usage.turns > 0).then_some(usage)
}

impl Agent for AiderAgent {
    fn run<'a>(&'a self, task: &'a TaskContext) -> AgentFuture<'a> {
        Box::pin(self.run_round(task))
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_usage, test_cmd};

    #[test]
    fn the_test_command_runs_each_check_in_a_shell_of_its_own_until_one_fails() {
        assert_eq!(test_cmd("/bin/plait".as_ref(), &[]), None);
        // A stand-in for plait that drops `run-in-view --` and runs the rest.
        let dir = std::env::temp_dir().join(format!("plait-aider-test-cmd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        let plait = dir.join("it's plait");
        std::fs::write(&plait, "#!/bin/sh\nshift 2\nexec \"$@\"\n").unwrap();
        let mut perms = std::fs::metadata(&plait).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&plait, perms).unwrap();
        let checks: Vec<String> = [
            "cd / && echo \"first's\" >> \"$OUT\"",
            "pwd >> \"$OUT\"; exit 3",
            "echo never >> \"$OUT\"",
        ]
        .map(String::from)
        .to_vec();
        let command = test_cmd(&plait, &checks).unwrap();
        let out = dir.join("out");
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(&dir)
            .env("OUT", &out)
            .status()
            .unwrap();
        let written = std::fs::read_to_string(&out).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(status.code(), Some(3), "{command}");
        // The second check ran where aider started it, not where the first `cd`-ed.
        assert_eq!(
            written,
            format!("first's\n{}\n", dir.display()),
            "{command}"
        );
    }

    #[test]
    fn aider_accounting_lines_are_summed() {
        let out = "Applied edit to a.py\nTokens: 1.2k sent, 345 received. Cost: $0.0123 message, $0.0123 session.\n\
                   more\nTokens: 2,000 sent, 1.5k cache hit, 10 received. Cost: $0.01 message, $0.0223 session.\n";
        let usage = parse_usage(out).expect("two lines");
        assert_eq!(usage.turns, 2);
        assert_eq!(usage.input_tokens, 3200);
        assert_eq!(usage.cache_read_input_tokens, 1500);
        assert_eq!(usage.output_tokens, 355);
        assert_eq!(usage.cost_usd, Some(0.0223));
        assert!(parse_usage("no accounting here").is_none());
    }
}
