//! The model agent: a worker that is a model over HTTP — the Anthropic Messages API or any
//! OpenAI-compatible chat-completions endpoint — reading and editing its worktree through
//! tools, turn after turn, until it says it is done. `max_tokens` and `pause_turn`
//! continue; a refusal fails the task; `max_turns` ends a looping agent. Besides its file
//! tools (`tools`) it may `run` commands in its whole-tree view (`run`), as the plan's
//! `[tools] run` allows. Tokens, cost, time and commands are counted per task; every
//! request and response goes to the task's transcript.

pub mod run;
pub mod tools;

/// The tool a model calls to end a round saying there is nothing to change (with why): a
/// declared no-op, which ends the task done without a person's look.
pub const NOTHING_TO_DO: &str = "nothing_to_do";

/// [`NOTHING_TO_DO`]'s spec.
fn nothing_to_do_spec() -> ToolSpec {
    ToolSpec {
        name: NOTHING_TO_DO,
        description: "Call this instead of editing when, having looked at the files, you find             that nothing needs to change for this task (for example, the text to replace does             not occur). Give the reason in one or two sentences. The task then ends without             changes, and your reason is shown to the person who reviews the run. Do not call             it after making changes.",
        schema: serde_json::json!({
            "type": "object",
            "properties": {"reason": {"type": "string", "description": "Why nothing needs to change"}},
            "required": ["reason"]
        }),
    }
}

use std::sync::Arc;

use crate::prompts;
use plait_llm::conversation::{Block, Message, Reply, Role, Stop, System, ToolSpec};
use plait_llm::http::{self, Transcript};
use plait_llm::{account, anthropic, conversation, openai};
use tools::{ToolOutcome, Workspace};

use crate::agent::context::{Agent, AgentFuture, AgentOutcome, AgentReport, TaskContext};
use plait_core::state::Usage;
use plait_llm::provider::{ProviderKind, ProviderSettings};
use plait_plan::tools::RunCommands;

/// Retried requests one task may need in all before it gives up (each request is also
/// bounded on its own, by `http::MAX_ATTEMPTS`).
pub const MAX_TASK_RETRIES: u64 = 30;

/// A worker backed by a model provider.
pub struct ModelAgent {
    provider: Arc<ProviderSettings>,
    /// The commands its `run` tool may run.
    run: Arc<RunCommands>,
    client: reqwest::Client,
    limiter: Arc<plait_llm::limiter::Limiter>,
}

impl ModelAgent {
    /// A model agent that sends its requests through `client`, paced by `limiter`, whose
    /// `run` tool may run the commands `run` allows.
    pub fn new(
        provider: Arc<ProviderSettings>,
        run: Arc<RunCommands>,
        client: reqwest::Client,
        limiter: Arc<plait_llm::limiter::Limiter>,
    ) -> ModelAgent {
        ModelAgent {
            provider,
            run,
            client,
            limiter,
        }
    }

    /// Runs one round of a task: the conversation, then what it used and the model's last
    /// words.
    async fn run_task(&self, task: &TaskContext) -> AgentReport {
        let mut session = Session::open(&self.provider, task, self.run.clone());
        let outcome = self.converse(task, &mut session).await;
        AgentReport {
            outcome,
            usage: Some(session.usage),
            summary: session.summary,
            nothing_to_do: session.nothing_to_do,
        }
    }

    /// Turn after turn until the model is done, the task fails or is stopped, or the turns
    /// run out.
    async fn converse(&self, task: &TaskContext, session: &mut Session) -> AgentOutcome {
        let deadline = tokio::time::Instant::now() + task.timeout;
        for turn in 1..=task.max_turns {
            if let Some(outcome) = stop_before_turn(task, &session.usage, deadline) {
                return outcome;
            }
            session.hear(task);
            let reply = match self.request(task, session, turn, deadline).await {
                Ok(reply) => reply,
                Err(outcome) => return outcome,
            };
            let (stop, calls) = session.add_reply(reply);
            match session.answer(stop, calls, task, deadline).await {
                // Told something while it answered last: it goes on to hear it.
                Some(AgentOutcome::Finished)
                    if task.inbox.as_ref().is_some_and(|i| i.has_waiting()) => {}
                Some(outcome) => return outcome,
                None => {}
            }
        }
        failed(&format!(
            "max_turns ({}) reached before the agent finished",
            task.max_turns
        ))
    }

    /// Sends the conversation so far as request `turn` and counts what the reply used; the
    /// task's outcome instead when the request fails, the deadline passes, or too many
    /// requests were retried.
    async fn request(
        &self,
        task: &TaskContext,
        session: &mut Session,
        turn: u32,
        deadline: tokio::time::Instant,
    ) -> Result<Reply, AgentOutcome> {
        let provider = &*self.provider;
        let body = session.request_body(provider);
        // The request's worst case is held against the run's budget while it is in flight,
        // as the gateway's are: many tasks at once pass it by one request at most.
        let worst = plait_llm::estimate::worst_usd(provider, &body);
        let hold = tokio::select! {
            held = task.budget.hold(worst) => match held {
                Ok(hold) => hold,
                Err(reason) => return Err(AgentOutcome::Stopped { reason }),
            },
            _ = tokio::time::sleep_until(deadline) => return Err(timed_out(task)),
        };
        let call = http::call(
            &self.client,
            provider,
            &self.limiter,
            &body,
            turn,
            &mut session.transcript,
            &task.cancel,
        );
        let (reply, timing) = tokio::select! {
            result = call => match result {
                Ok(r) => r,
                Err(reason) => return Err(failed(&reason)),
            },
            // An interrupt lets the turn in flight end; the loop stops before the next.
            _ = tokio::time::sleep_until(deadline) => return Err(timed_out(task)),
        };
        let usage = &mut session.usage;
        let before = usage.cost_usd.unwrap_or(0.0);
        account(usage, provider, &reply, &timing);
        hold.settle(usage.cost_usd.unwrap_or(0.0) - before);
        if usage.retries > MAX_TASK_RETRIES {
            let reason = format!(
                "gave up after {} retried requests in this task",
                usage.retries
            );
            return Err(failed(&reason));
        }
        Ok(reply)
    }
}

/// A tool call of a reply: its id, the tool's name, and its input (or why that could not be
/// read).
type ToolCall = (String, String, Result<serde_json::Value, String>);

/// One round's conversation with the model: what each request sends, and what the round
/// has used so far.
struct Session {
    workspace: Arc<Workspace>,
    /// The commands the `run` tool may run.
    run: Arc<RunCommands>,
    /// Commands run so far this round.
    commands: u32,
    system: System,
    specs: Vec<ToolSpec>,
    transcript: Transcript,
    messages: Vec<Message>,
    usage: Usage,
    /// The model's last words that were not empty.
    summary: Option<String>,
    /// Which attempt this is, of how many.
    attempt: Option<(u32, u32)>,
    /// Why the model said there is nothing to change, once it did (`nothing_to_do`).
    nothing_to_do: Option<String>,
    /// Whether its editor changed a file this round.
    edited: bool,
}

impl Session {
    /// The session of a round that begins with the task's prompt (or the feedback of a
    /// later round).
    fn open(provider: &ProviderSettings, task: &TaskContext, run: Arc<RunCommands>) -> Session {
        let mut first = match &task.feedback {
            None => prompts::worker::first_message(&task.prompt),
            Some(feedback) => prompts::worker::next_round(&task.prompt, task.round, feedback),
        };
        if let (Some((n, of)), None) = (task.attempt, &task.feedback) {
            first = format!("{}\n\n{first}", prompts::worker::attempt(n, of));
        }
        Session {
            workspace: Arc::new(Workspace::new(
                task.worktree.clone(),
                task.repo.clone(),
                task.files.clone(),
                task.owns.clone(),
            )),
            system: prompts::worker::system(
                &task.goal,
                &task.task,
                &task.prompt,
                task.owns.patterns(),
                &task.owned,
                run.offered(),
            ),
            specs: tools::specs()
                .into_iter()
                .chain(run.offered().then(|| run::spec(&run)))
                .chain([nothing_to_do_spec()])
                .collect(),
            run,
            commands: 0,
            transcript: Transcript::open(&task.transcript),
            messages: vec![Message::user_text(first)],
            usage: Usage {
                cost_usd: provider.prices.map(|_| 0.0),
                ..Usage::default()
            },
            summary: None,
            attempt: task.attempt,
            nothing_to_do: None,
            edited: false,
        }
    }

    /// The next request's body, in the provider's own format. An attempt after the first
    /// asks with another sampling than the first's: a lower temperature on Anthropic's API,
    /// a seed of its own on an OpenAI-compatible one (whose reasoning models refuse a
    /// temperature).
    fn request_body(&self, provider: &ProviderSettings) -> serde_json::Value {
        let (system, specs, messages) = (&self.system, &self.specs, &self.messages);
        let mut body = match provider.kind {
            ProviderKind::Anthropic => {
                anthropic::request_body(provider, system, specs, messages, provider.stream)
            }
            ProviderKind::Openai => {
                openai::request_body(provider, system, specs, messages, provider.stream)
            }
        };
        if let Some((n, _)) = self.attempt.filter(|(n, _)| *n > 1) {
            match provider.kind {
                ProviderKind::Anthropic => {
                    // 0.75, 0.5, 0.25, then 1.0 (the API's default) again.
                    let temperature = 1.0 - 0.25 * f64::from((n - 1) % 4);
                    body["temperature"] = serde_json::json!(temperature);
                }
                ProviderKind::Openai => body["seed"] = serde_json::json!(n),
            }
        }
        body
    }

    /// Adds the model's reply to the conversation and keeps its words as the summary;
    /// returns why it stopped and the tools it called.
    fn add_reply(&mut self, reply: Reply) -> (Stop, Vec<ToolCall>) {
        let text = conversation::text_of(&reply.content);
        if !text.trim().is_empty() {
            self.summary = Some(text.trim().to_string());
        }
        let calls: Vec<ToolCall> = reply
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, name, input } => {
                    Some((id.clone(), name.clone(), input.clone()))
                }
                _ => None,
            })
            .collect();
        // After `pause_turn` the model continues its own message: keep it one message.
        match self.messages.last_mut() {
            Some(last) if last.role == Role::Assistant => last.content.extend(reply.content),
            _ => self.messages.push(Message {
                role: Role::Assistant,
                content: reply.content,
            }),
        }
        (reply.stop, calls)
    }

    /// Runs the tool calls of one reply in order, file tools on a blocking thread and
    /// commands as they come, so that each sees what the ones before it did.
    async fn run_tools(
        &mut self,
        calls: Vec<ToolCall>,
        task: &TaskContext,
        deadline: tokio::time::Instant,
    ) -> Vec<Block> {
        let mut results = Vec::with_capacity(calls.len());
        for (id, name, input) in calls {
            let outcome = match (&input, name.as_str()) {
                (Ok(input), NOTHING_TO_DO) => self.declare_nothing(input),
                (Ok(input), run::RUN) if self.run.offered() => {
                    self.commands += 1;
                    let (outcome, ran) =
                        run::run(task, &self.run, input, self.commands, deadline).await;
                    if let Some(ran) = ran {
                        self.usage.runs += 1;
                        self.usage.run_ms += ran.elapsed.as_millis() as u64;
                    }
                    outcome
                }
                _ => {
                    let writes = name == plait_llm::anthropic::EDITOR
                        && input.as_ref().is_ok_and(|i| {
                            matches!(
                                i["command"].as_str(),
                                Some("create" | "str_replace" | "insert")
                            )
                        });
                    let workspace = self.workspace.clone();
                    let outcome = tokio::task::spawn_blocking(move || workspace.run(&name, &input))
                        .await
                        .unwrap_or_else(|e| ToolOutcome::error(format!("the tool failed: {e}")));
                    self.edited |= writes && !outcome.is_error;
                    outcome
                }
            };
            if outcome.refused_write {
                self.usage.refused_writes += 1;
            }
            results.push(Block::ToolResult {
                id,
                content: outcome.content,
                is_error: outcome.is_error,
            });
        }
        results
    }

    /// Takes the model's word that there is nothing to change, with its reason; refused
    /// once it has changed a file this round (its changes are its answer).
    fn declare_nothing(&mut self, input: &serde_json::Value) -> ToolOutcome {
        let reason = input["reason"].as_str().unwrap_or("").trim();
        if reason.is_empty() {
            return ToolOutcome::error("give the reason: {\"reason\": \"...\"}".to_string());
        }
        if self.edited {
            return ToolOutcome::error(
                "you changed files this round: nothing_to_do is for a task that needs no \
                 change; finish without calling it"
                    .to_string(),
            );
        }
        self.nothing_to_do = Some(reason.to_string());
        ToolOutcome::ok("Noted: the task ends without changes, with your reason.".to_string())
    }

    /// Adds what a person told the task since the last turn as theirs: after the tool
    /// results of the last turn, in the same message (valid on both wire formats), or as
    /// a message of its own.
    fn hear(&mut self, task: &TaskContext) {
        let Some(inbox) = &task.inbox else {
            return;
        };
        let told = inbox.take();
        if told.is_empty() {
            return;
        }
        let text = prompts::worker::told(&told);
        match self.messages.last_mut() {
            Some(last) if last.role == Role::User => last.content.push(Block::Text(text)),
            _ => self.messages.push(Message::user_text(text)),
        }
    }

    /// Answers a reply that stopped for `stop`: with the results of its tool calls, or a
    /// request to go on; the task's outcome instead when the conversation ends here.
    /// Commands run until `deadline` at the latest.
    async fn answer(
        &mut self,
        stop: Stop,
        calls: Vec<ToolCall>,
        task: &TaskContext,
        deadline: tokio::time::Instant,
    ) -> Option<AgentOutcome> {
        match stop {
            Stop::Refusal => return Some(failed("the model refused the task")),
            Stop::ContextWindow => {
                return Some(failed(
                    "the conversation outgrew the model's context window",
                ))
            }
            _ if !calls.is_empty() => {
                let results = self.run_tools(calls, task, deadline).await;
                self.messages.push(Message {
                    role: Role::User,
                    content: results,
                });
                // Nothing to do, said: the round ends here, without another request.
                if self.nothing_to_do.is_some() {
                    return Some(AgentOutcome::Finished);
                }
            }
            Stop::PauseTurn => {}
            Stop::MaxTokens => self
                .messages
                .push(Message::user_text(prompts::worker::CUT_OFF)),
            Stop::EndTurn | Stop::ToolUse | Stop::Other(_) => {
                return Some(AgentOutcome::Finished);
            }
        }
        None
    }
}

/// Why the task may not take another turn, if it may not: its time is up, the run was
/// interrupted, or a budget is spent.
fn stop_before_turn(
    task: &TaskContext,
    usage: &Usage,
    deadline: tokio::time::Instant,
) -> Option<AgentOutcome> {
    if tokio::time::Instant::now() >= deadline {
        return Some(timed_out(task));
    }
    if task.cancel.is_cancelled() {
        return Some(failed("interrupted"));
    }
    if let Some(reason) = task.budget.exhausted() {
        return Some(AgentOutcome::Stopped { reason });
    }
    let used = usage.input_tokens
        + usage.output_tokens
        + usage.cache_creation_input_tokens
        + usage.cache_read_input_tokens;
    let limit = task.token_budget.filter(|l| used >= *l)?;
    let reason = format!("stopped by budget: the task used {used} of its {limit} tokens");
    Some(AgentOutcome::Stopped { reason })
}

/// The outcome of a task that ran out of time.
fn timed_out(task: &TaskContext) -> AgentOutcome {
    failed(&format!(
        "timed out after {}",
        humantime::format_duration(task.timeout)
    ))
}

/// A failed outcome for `reason`, with no exit code.
fn failed(reason: &str) -> AgentOutcome {
    AgentOutcome::Failed {
        reason: reason.to_string(),
        exit_code: None,
    }
}

impl Agent for ModelAgent {
    fn run<'a>(&'a self, task: &'a TaskContext) -> AgentFuture<'a> {
        Box::pin(self.run_task(task))
    }
}
