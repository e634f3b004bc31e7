//! The `claude-code` agent: the Claude Code CLI run headless (`claude -p`) in the task's
//! worktree, which its processes see as the task's whole-tree view: every file of the base
//! with the task's edits in place. plait gives it the task as the prompt, its rules (goal,
//! task id, owned globs) through `--append-system-prompt`, a config directory of its own in
//! the task's scratch, and a settings file whose `PreToolUse` hook is `plait guard`, which
//! judges every tool call when it is attempted: an edit outside the owned files is refused,
//! and so is a read outside the repository. `Bash` goes ahead: its commands build and test
//! inside the task's walls, which let them write only the worktree and the task's scratch,
//! and a write they make to a file the task does not own is a violation, never committed.
//! The settings and the guard's file lie in the task's directory, where no process of the
//! agent can write, and `--setting-sources ""` keeps Claude Code from loading settings the
//! agent could write (its config directory, the worktree's `.claude/`), which could
//! otherwise switch the hook off. The guard is the gate, so the CLI runs with
//! `bypassPermissions`: its own rules would refuse every edit anyway, since plait's
//! worktrees live under `.git`, which Claude Code treats as sensitive. The guard fails
//! closed (`|| exit 2`). The CLI's stream (`stream-json`) is kept as the round's result;
//! its last `result` object decides the outcome (`is_error` fails the task even after exit
//! 0) and gives turns, tokens, cost and the calls the hook refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::context::{Agent, AgentFuture, AgentOutcome, AgentReport, TaskContext};
use super::exec::{outcome_of, shell_quote, task_env};
use crate::prompts;
use plait_core::beneath::Tree;
use plait_core::state::Usage;
use plait_guard::GuardFile;
use plait_plan::ToolSettings;
use plait_sandbox::shell::{self, ShellOutcome};

/// How much of the CLI's closing words is kept as the task's summary.
const SUMMARY_MAX: usize = 4000;

/// Runs `claude -p` once per round of a task.
#[derive(Debug, Clone)]
pub struct ClaudeCodeAgent {
    settings: Arc<ToolSettings>,
}

/// The files of one round: plait's under the task's own directory, read-only to the
/// agent; the CLI's own config directory in the task's scratch, which it writes.
struct Files {
    dir: PathBuf,
    config: PathBuf,
    settings: PathBuf,
    guard: PathBuf,
    refusals: PathBuf,
    result: PathBuf,
}

impl Files {
    fn of(task: &TaskContext) -> Files {
        let task_dir = plait_core::state::TaskDir(task.dir().to_path_buf());
        let dir = task_dir.claude_code();
        Files {
            config: task_dir.scratch().join(CONFIG),
            settings: dir.join("settings.json"),
            guard: dir.join("guard.json"),
            refusals: dir.join(format!("refusals-{}.jsonl", task.round)),
            result: dir.join(format!("result-{}.json", task.round)),
            dir,
        }
    }
}

impl ClaudeCodeAgent {
    /// An agent that runs Claude Code with `settings`.
    pub fn new(settings: Arc<ToolSettings>) -> ClaudeCodeAgent {
        ClaudeCodeAgent { settings }
    }

    /// The command line for one round: its message as the argument, or (`live`) none, the
    /// messages coming on its input as stream-json.
    fn argv(&self, task: &TaskContext, files: &Files, live: bool) -> Vec<String> {
        let message =
            prompts::worker::round_message(&task.prompt, task.round, task.feedback.as_deref());
        let rules =
            prompts::worker::cli_rules(&task.goal, &task.task, task.owns.patterns(), &task.owned);
        let mut argv = vec![self.settings.program.clone(), "-p".to_string()];
        if live {
            argv.extend(["--input-format".to_string(), "stream-json".to_string()]);
        } else {
            argv.push(message);
        }
        argv.extend([
            "--output-format".to_string(),
            "stream-json".to_string(),
            "--verbose".to_string(),
            "--max-turns".to_string(),
            task.max_turns.to_string(),
            "--append-system-prompt".to_string(),
            rules,
            "--settings".to_string(),
            files.settings.display().to_string(),
            // Only the settings above: none the agent's own processes could write.
            "--setting-sources".to_string(),
            String::new(),
            "--permission-mode".to_string(),
            "bypassPermissions".to_string(),
        ]);
        let model = self
            .settings
            .model
            .clone()
            .or_else(|| self.settings.provider.as_ref().map(|p| p.model.clone()));
        if let Some(model) = model {
            argv.push("--model".to_string());
            argv.push(model);
        }
        argv.extend(self.settings.args.iter().cloned());
        argv
    }

    /// The environment: the `PLAIT_*` variables, the agent's own config directory, no
    /// traffic beyond the model, and the task's way through the gateway (or, where it has
    /// none, the provider's base URL and key when the plan names one).
    fn env(&self, task: &TaskContext, files: &Files) -> Vec<(&'static str, String)> {
        let mut env = task_env(task);
        env.extend(cli_env(
            &files.config,
            task.gateway.as_deref(),
            &self.settings,
        ));
        // Its Bash may commit or ask git who the user is: an identity where git has none.
        let inherited = self.settings.inherited.git_config_count;
        let identity = super::identity::identity(&task.worktree, &env, inherited);
        env.extend(identity);
        env
    }

    async fn run_round(&self, task: &TaskContext) -> AgentReport {
        if let Some(reason) = task.budget.exhausted() {
            return AgentOutcome::Stopped { reason }.into();
        }
        let files = Files::of(task);
        if let Err(why) = task.view.ensure().await {
            return AgentOutcome::Failed {
                reason: format!("the task's view of the repository is not ready: {why}"),
                exit_code: None,
            }
            .into();
        }
        let config = match prepare(
            task,
            &files,
            self.settings.inherited.claude_config.as_deref(),
        ) {
            Ok(config) => config,
            Err(e) => {
                return AgentOutcome::Failed {
                    reason: format!(
                        "cannot prepare claude-code's files in {}: {e}",
                        files.dir.display()
                    ),
                    exit_code: None,
                }
                .into()
            }
        };
        let live = task.inbox.clone();
        let argv = self.argv(task, &files, live.is_some());
        let env = self.env(task, &files);
        let has_key = env.iter().any(|(k, _)| *k == "ANTHROPIC_API_KEY")
            || self.settings.inherited.anthropic_key;
        let login = give_login(
            &config,
            has_key,
            self.settings.inherited.claude_config.as_deref(),
            task.gateway.as_deref(),
        );
        let (counted, asked) = (task.counted(), task.asked());
        let feed = live.map(|inbox| {
            let first =
                prompts::worker::round_message(&task.prompt, task.round, task.feedback.as_deref());
            feed(first, inbox, files.result.clone())
        });
        let (outcome, stdout) =
            shell::run_argv_fed(&argv, &task.launch(&env), &files.result, feed).await;
        if login {
            let _ = config.remove(CREDENTIALS);
        }
        let result = parse_result(&stdout);
        let refused = result
            .as_ref()
            .map_or(0, |r| record_refusals(&r.denials, &files.refusals));
        if let Some(result) = &result {
            task.spend(result.usage.cost_usd, counted);
        }
        let judged = judge(outcome, result.as_ref(), task);
        let said = result.as_ref().map_or("", |r| r.text.as_str());
        let own = result.as_ref().map_or(0, |r| r.usage.requests);
        let judged = task.unasked(judged, (asked, own), "claude-code", said);
        let mut report: AgentReport = judged.into();
        if let Some(result) = result {
            let mut usage = result.usage;
            usage.refused_writes = refused;
            report.usage = Some(task.own_usage(usage, counted));
            report.summary = Some(result.text).filter(|t| !t.trim().is_empty());
        }
        report
    }
}

/// Claude Code's input in a round that may be told things (`--input-format stream-json`):
/// the round's message, then whatever a person tells the task while it runs, each a user
/// message as a line; the input ends once the CLI has answered (a `result` event in its
/// output, `result`) and nothing waits, so that it exits.
fn feed(first: String, inbox: super::Inbox, result: PathBuf) -> shell::Feed {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let line = |text: &str| {
        let mut line = serde_json::json!({
            "type": "user",
            "message": {"role": "user", "content": text},
        })
        .to_string();
        line.push('\n');
        line.into_bytes()
    };
    let _ = tx.send(line(&first));
    tokio::spawn(async move {
        let mut output = Output::new(result);
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            if tx.is_closed() {
                return;
            }
            let told = inbox.take();
            if !told.is_empty() {
                if tx.send(line(&prompts::worker::told(&told))).is_err() {
                    return;
                }
                continue;
            }
            // A message written while a turn runs is taken into that turn (the CLI adds it to
            // its next request) or queued for a turn after it, which the CLI still runs when
            // its input has ended: once it has answered, nothing is left waiting on plait.
            if output.answered() {
                // Dropped: its input ends, and it exits when it has done.
                return;
            }
        }
    });
    rx
}

/// The CLI's output as it grows, read from where the last look left off: a look every
/// 25 ms for each running CLI costs a `read` of what is new, not an `open` and a read of
/// the whole file.
struct Output {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Bytes read so far, and those after the last whole line.
    read: u64,
    partial: Vec<u8>,
}

impl Output {
    fn new(path: PathBuf) -> Output {
        Output {
            path,
            file: None,
            read: 0,
            partial: Vec::new(),
        }
    }

    /// Whether a `result` event is among the lines written whole since the last look.
    fn answered(&mut self) -> bool {
        use std::io::{Read as _, Seek as _};
        if self.file.is_none() {
            self.file = std::fs::File::open(&self.path).ok();
        }
        let Some(file) = &mut self.file else {
            return false;
        };
        let len = file.metadata().map_or(0, |m| m.len());
        if len < self.read {
            // Made again since (a round started over): read it from its start.
            self.read = 0;
            self.partial.clear();
            if file.rewind().is_err() {
                return false;
            }
        }
        if len == self.read {
            return false;
        }
        let before = self.partial.len();
        if file.read_to_end(&mut self.partial).is_err() {
            return false;
        }
        self.read += (self.partial.len() - before) as u64;
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return false;
        };
        let lines: Vec<u8> = self.partial.drain(..=end).collect();
        String::from_utf8_lossy(&lines)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|v| v["type"] == "result")
    }
}

/// What Claude Code is given in every role: its own config directory, no traffic beyond
/// the model, and its way to the model: the gateway's lease (with its stand-in for the key
/// plait holds; without one, a login or an `apiKeyHelper`, the CLI's own credentials), or
/// where it has none, the provider's base URL and key when the plan names one.
fn cli_env(
    config: &Path,
    gateway: Option<&plait_gateway::Lease>,
    settings: &ToolSettings,
) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("CLAUDE_CONFIG_DIR", config.display().to_string()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
        ("DISABLE_AUTOUPDATER", "1".to_string()),
    ];
    // plait's guard decides every tool call (see the module's doc); Claude Code asks for
    // this when permissions are bypassed as root.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        env.push(("IS_SANDBOX", "1".to_string()));
    }
    match (gateway, &settings.provider) {
        (Some(lease), _) => {
            env.push(("ANTHROPIC_BASE_URL", lease.base_url()));
            env.extend(lease.key().map(|key| ("ANTHROPIC_API_KEY", key)));
        }
        (None, Some(provider)) => {
            env.push(("ANTHROPIC_BASE_URL", provider.base_url.clone()));
            if let Some(key) = &provider.api_key {
                env.push(("ANTHROPIC_API_KEY", key.expose().to_string()));
            }
        }
        (None, None) => {}
    }
    env
}

/// Writes the agent's config directory, guard file and settings. A user's `apiKeyHelper`
/// (in their own config directory, `home`) is carried into the settings, the only ones
/// the CLI loads.
fn prepare(task: &TaskContext, files: &Files, home: Option<&Path>) -> std::io::Result<Tree> {
    // The config directory is in the task's scratch, which its processes write: made and
    // held beneath a handle, following no link.
    let scratch = Tree::open(&task.scratch())?;
    scratch.create_dir_all(CONFIG)?;
    let config = scratch.open_dir(CONFIG)?;
    std::fs::create_dir_all(&files.dir)?;
    let repository = git2::Repository::discover(&task.repo)
        .ok()
        .and_then(|r| r.workdir().map(Path::to_path_buf))
        .unwrap_or_else(|| task.repo.clone());
    let guard = GuardFile {
        task: task.task.clone(),
        worktree: task.worktree.clone(),
        owns: task.owns.patterns().to_vec(),
        read_roots: vec![repository],
        view: task.view.overlay().map(|o| o.target.clone()),
    };
    write_guarded_settings(
        &guard,
        (&files.guard, &files.settings),
        &task.plait_program,
        home,
    )?;
    Ok(config)
}

/// Writes `guard` to its file and the only settings the CLI loads to theirs (`paths`):
/// `plait guard` on that file as the `PreToolUse` hook of every tool call, and a user's
/// `apiKeyHelper` (from their own config directory, `home`).
fn write_guarded_settings(
    guard: &GuardFile,
    (guard_path, settings_path): (&Path, &Path),
    plait: &Path,
    home: Option<&Path>,
) -> std::io::Result<()> {
    std::fs::write(guard_path, serde_json::to_vec_pretty(guard)?)?;
    // Any failure of the guard itself (a missing binary, a crash) blocks the call too.
    let command = format!(
        "{} guard {} || exit 2",
        shell_quote(&plait.display().to_string()),
        shell_quote(&guard_path.display().to_string())
    );
    let mut settings = serde_json::json!({
        "hooks": {
            "PreToolUse": [{
                "matcher": "*",
                "hooks": [{ "type": "command", "command": command, "timeout": 30 }]
            }]
        },
        "disableAllHooks": false
    });
    if let Some(helper) = home.and_then(api_key_helper) {
        settings["apiKeyHelper"] = Value::String(helper);
    }
    std::fs::write(settings_path, serde_json::to_vec_pretty(&settings)?)
}

/// The `apiKeyHelper` of the user's Claude Code settings in `home`, if they set one.
fn api_key_helper(home: &Path) -> Option<String> {
    let text = std::fs::read(home.join("settings.json")).ok()?;
    let value: Value = serde_json::from_slice(&text).ok()?;
    value["apiKeyHelper"].as_str().map(str::to_string)
}

/// Writes the calls the hook refused (`denials`, from the CLI's result) to `path`, one
/// JSON line each, for the task's record; returns how many were edits.
fn record_refusals(denials: &[Value], path: &Path) -> u64 {
    if denials.is_empty() {
        return 0;
    }
    let lines: String = denials.iter().map(|d| format!("{d}\n")).collect();
    let _ = std::fs::write(path, lines);
    denials
        .iter()
        .filter(|d| plait_guard::is_edit_tool(d["tool_name"].as_str().unwrap_or_default()))
        .count() as u64
}

/// A user logged in to Claude Code (rather than using an API key) keeps that login in their
/// own config directory (`home`). Through the gateway, the login stays in plait: the
/// agent's config directory gets a credentials file of the same shape whose tokens are the
/// gateway's stand-in (never expiring, so the CLI never tries to refresh it), and the
/// gateway sends the login's real bearer in its place; no process in the walls can read
/// the token. Without a gateway, the directory gets a link to the user's file (which the
/// CLI then reads itself). Returns whether it made `.credentials.json`, to be removed
/// afterwards through the same handle.
fn give_login(
    config: &Tree,
    has_key: bool,
    home: Option<&Path>,
    gateway: Option<&plait_gateway::Lease>,
) -> bool {
    // The config directory is the agent's to write: what stands in it is looked at, and
    // written, beneath the handle, following no link.
    if has_key || !matches!(config.kind(CREDENTIALS), Ok(None)) {
        return false;
    }
    let Some(source) = home.map(|h| h.join(CREDENTIALS)) else {
        return false;
    };
    if !source.is_file() {
        return false;
    }
    match gateway {
        Some(lease) => {
            let Some(written) = stand_in_login(&source, lease) else {
                return false;
            };
            write_private(config, CREDENTIALS, &written).is_ok()
        }
        None => config
            .symlink(source.as_os_str().as_encoded_bytes(), CREDENTIALS)
            .is_ok(),
    }
}

/// The name of the agent's config directory in its task's scratch.
const CONFIG: &str = "claude-code";

/// The name of Claude Code's login file in its config directory.
const CREDENTIALS: &str = ".credentials.json";

/// The user's login at `source` with the gateway's stand-in for its tokens.
fn stand_in_login(source: &Path, lease: &plait_gateway::Lease) -> Option<Vec<u8>> {
    let text = std::fs::read(source).ok()?;
    let mut login: Value = serde_json::from_slice(&text).ok()?;
    let oauth = login.get_mut("claudeAiOauth")?.as_object_mut()?;
    let stand_in = lease.login(source.to_path_buf());
    oauth.insert("accessToken".into(), Value::String(stand_in.clone()));
    oauth.insert("refreshToken".into(), Value::String(stand_in));
    // A year on: the CLI never refreshes the stand-in; the gateway reads the user's file at
    // each request, so their own refresh is taken.
    let year = plait_core::state::now_ms() + 365 * 24 * 3600 * 1000;
    oauth.insert("expiresAt".into(), Value::from(year));
    serde_json::to_vec(&login).ok()
}

/// Writes `bytes` to a new file `name` in the directory `dir` holds, that only its owner
/// may read (a link or file already at the name is refused, never followed).
fn write_private(dir: &Tree, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _};
    let name = std::ffi::CString::new(name)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: openat on a directory descriptor `dir` keeps open and a C string; the new
    // descriptor is owned by the File at once.
    let fd = unsafe { libc::openat(dir.as_fd().as_raw_fd(), name.as_ptr(), flags, 0o600) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes)
}

/// What the CLI's JSON result says.
#[derive(Debug, Clone)]
pub struct CliResult {
    /// Whether the CLI says the run failed (`is_error`).
    pub is_error: bool,
    /// How it ended (`subtype`): `success`, or why not.
    pub subtype: String,
    /// Its closing words (`result`).
    pub text: String,
    /// What it used, as the CLI counted it.
    pub usage: Usage,
    /// The tool calls refused (by plait's hook: its `permission_denials`).
    pub denials: Vec<Value>,
    /// The answer in the form `--json-schema` asked for (`structured_output`).
    pub structured: Option<Value>,
}

/// The last `{"type": "result", ...}` object on stdout (the last of many with
/// `--output-format stream-json`; the only line with `json`).
pub fn parse_result(stdout: &str) -> Option<CliResult> {
    let value = stdout
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .find(|v| v["type"] == "result")
        .or_else(|| {
            serde_json::from_str::<Value>(stdout.trim())
                .ok()
                .filter(|v| v["type"] == "result")
        })?;
    let count = |v: &Value| v.as_u64().unwrap_or(0);
    let usage = &value["usage"];
    let turns = count(&value["num_turns"]);
    let mut text: String = value["result"].as_str().unwrap_or_default().to_string();
    if text.len() > SUMMARY_MAX {
        let mut cut = SUMMARY_MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    let denials = value["permission_denials"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Some(CliResult {
        structured: value
            .get("structured_output")
            .filter(|v| !v.is_null())
            .cloned(),
        denials,
        is_error: value["is_error"].as_bool().unwrap_or(true),
        subtype: value["subtype"].as_str().unwrap_or("unknown").to_string(),
        text,
        usage: Usage {
            requests: turns,
            turns,
            input_tokens: count(&usage["input_tokens"]),
            output_tokens: count(&usage["output_tokens"]),
            cache_creation_input_tokens: count(&usage["cache_creation_input_tokens"]),
            cache_read_input_tokens: count(&usage["cache_read_input_tokens"]),
            cost_usd: value["total_cost_usd"].as_f64(),
            first_token_ms: value["ttft_ms"].as_u64(),
            model_ms: count(&value["duration_api_ms"]),
            ..Usage::default()
        },
    })
}

/// The round's outcome from how the process ended and what it printed.
fn judge(outcome: ShellOutcome, result: Option<&CliResult>, task: &TaskContext) -> AgentOutcome {
    let code = match outcome {
        ShellOutcome::Exited(code) => code,
        other => return outcome_of(other, task),
    };
    match result {
        Some(r) if r.is_error || r.subtype != "success" => {
            let said = r.text.lines().next().unwrap_or("").trim();
            let said = if said.is_empty() {
                String::new()
            } else {
                format!(": {said}")
            };
            AgentOutcome::Failed {
                reason: format!("claude-code ended with {}{said}", r.subtype),
                exit_code: Some(code),
            }
        }
        Some(_) if code == 0 => AgentOutcome::Finished,
        Some(_) => AgentOutcome::Failed {
            reason: format!("claude-code exited with status {code}"),
            exit_code: Some(code),
        },
        None => AgentOutcome::Failed {
            reason: format!(
                "claude-code exited with status {code} without a JSON result; see the task's log"
            ),
            exit_code: Some(code),
        },
    }
}

impl Agent for ClaudeCodeAgent {
    fn run<'a>(&'a self, task: &'a TaskContext) -> AgentFuture<'a> {
        Box::pin(self.run_round(task))
    }
}

/// A question to Claude Code in a role that judges or plans (a reviewer, a supervisor, the
/// manager): read-only tools (`Read`, `Grep`, `Glob`, behind plait's guard, which keeps
/// their reads in the repository), no session kept, and an answer in the form `schema`
/// gives it (`--json-schema`, which the CLI hands the model as its `StructuredOutput`
/// tool and returns as the result's `structured_output`).
pub struct Question<'a> {
    /// The Claude Code settings it runs with.
    pub settings: &'a ToolSettings,
    /// The role's system prompt.
    pub system: String,
    /// The question itself, its first message.
    pub message: String,
    /// The JSON schema its answer must fit.
    pub schema: &'a Value,
    /// Where it runs: the tree it reads.
    pub cwd: &'a Path,
    /// The directories its reads may reach.
    pub read_roots: Vec<PathBuf>,
    /// Plait's directory for this question: the CLI's config, settings and result, under
    /// the name `name`. The CLI's processes must be able to write its `name` directory.
    pub dir: &'a Path,
    /// The name of its directory under `dir`.
    pub name: &'a str,
    /// plait's own program, which the guard hook calls back.
    pub plait_program: &'a Path,
    /// How long it may take.
    pub timeout: std::time::Duration,
    /// Fires when the run is interrupted; the question stops at once.
    pub cancel: &'a plait_core::cancel::Cancel,
    /// The walls its processes run in.
    pub sandbox: &'a plait_sandbox::sandbox::Sandbox,
    /// Its way to its model through plait's gateway, if it has one.
    pub gateway: Option<&'a plait_gateway::Lease>,
    /// The most turns it may take.
    pub max_turns: u32,
}

/// What Claude Code answered a [`Question`].
#[derive(Debug, Clone)]
pub struct Answered {
    /// The answer, in the form the question's schema gives.
    pub value: Value,
    /// What it used, as the CLI counted it (the gateway's count is the caller's).
    pub usage: Usage,
}

/// Asks Claude Code `question`; the error says why there is no answer (the CLI failed, or
/// gave none in the schema's form).
pub async fn ask(question: &Question<'_>) -> Result<Answered, String> {
    let q = question;
    // Its config directory, in the one place of `dir` it may write.
    let own = super::role_own(q.dir).join(q.name);
    let config = own.join("config");
    let config_dir = std::fs::create_dir_all(&config)
        .and_then(|()| Tree::open(&config))
        .map_err(|e| format!("cannot create {}: {e}", config.display()))?;
    let settings_path = q.dir.join(format!("{}.settings.json", q.name));
    let guard_path = q.dir.join(format!("{}.guard.json", q.name));
    let guard = GuardFile {
        task: q.name.to_string(),
        worktree: q.cwd.to_path_buf(),
        owns: Vec::new(),
        read_roots: q.read_roots.clone(),
        view: None,
    };
    let written = write_guarded_settings(
        &guard,
        (&guard_path, &settings_path),
        q.plait_program,
        q.settings.inherited.claude_config.as_deref(),
    );
    if let Err(e) = written {
        return Err(format!(
            "cannot write claude-code's settings in {}: {e}",
            q.dir.display()
        ));
    }
    let mut argv = vec![
        q.settings.program.clone(),
        "-p".to_string(),
        q.message.clone(),
        "--output-format".to_string(),
        "json".to_string(),
        "--json-schema".to_string(),
        q.schema.to_string(),
        "--append-system-prompt".to_string(),
        q.system.clone(),
        "--tools".to_string(),
        "Read,Grep,Glob".to_string(),
        "--max-turns".to_string(),
        q.max_turns.to_string(),
        "--settings".to_string(),
        settings_path.display().to_string(),
        "--setting-sources".to_string(),
        String::new(),
        "--permission-mode".to_string(),
        "bypassPermissions".to_string(),
        "--no-session-persistence".to_string(),
    ];
    let model = q
        .settings
        .model
        .clone()
        .or_else(|| q.settings.provider.as_ref().map(|p| p.model.clone()));
    if let Some(model) = model {
        argv.push("--model".to_string());
        argv.push(model);
    }
    let env = cli_env(&config, q.gateway, q.settings);
    let has_key =
        env.iter().any(|(k, _)| *k == "ANTHROPIC_API_KEY") || q.settings.inherited.anthropic_key;
    let login = give_login(
        &config_dir,
        has_key,
        q.settings.inherited.claude_config.as_deref(),
        q.gateway,
    );
    let log = q.dir.join(format!("{}.log", q.name));
    let result_path = q.dir.join(format!("{}.json", q.name));
    let launch = plait_sandbox::shell::Launch {
        dir: q.cwd,
        env: &env,
        log: &log,
        timeout: q.timeout,
        cancel: q.cancel,
        sandbox: q.sandbox,
    };
    let (outcome, stdout) = shell::run_argv_capturing(&argv, &launch, &result_path).await;
    if login {
        let _ = config_dir.remove(CREDENTIALS);
    }
    let result = parse_result(&stdout);
    match (outcome, result) {
        (_, Some(r)) if !r.is_error && r.subtype == "success" => match r.structured {
            Some(value) => Ok(Answered {
                value,
                usage: r.usage,
            }),
            None => Err(format!(
                "claude-code gave no answer in the asked form (no structured_output); it said: {}",
                r.text.lines().next().unwrap_or("").trim()
            )),
        },
        (_, Some(r)) => Err(format!(
            "claude-code ended with {}: {}",
            r.subtype,
            r.text.lines().next().unwrap_or("").trim()
        )),
        (ShellOutcome::Exited(code), None) => Err(format!(
            "claude-code exited with status {code} without a JSON result; see {}",
            log.display()
        )),
        (other, None) => Err(format!(
            "claude-code {}; see {}",
            other.describe(q.timeout),
            log.display()
        )),
    }
}
