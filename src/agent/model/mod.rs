//! The model agent: a worker that is a model over HTTP — the Anthropic Messages API or any
//! OpenAI-compatible chat-completions endpoint — reading and editing its worktree through
//! tools, turn after turn, until it says it is done. `max_tokens` and `pause_turn`
//! continue; a refusal fails the task; `max_turns` ends a looping agent. Tokens, cost and
//! time are counted per task; every request and response goes to the task's transcript.

pub mod prompt;
pub mod tools;

use std::sync::Arc;

use crate::llm::conversation::{Block, Message, Role, Stop};
use crate::llm::http::{self, Transcript};
use crate::llm::{account, anthropic, conversation, openai};
use tools::Workspace;

use super::{Agent, AgentFuture, AgentOutcome, AgentReport, TaskContext};
use crate::llm::provider::{ProviderKind, ProviderSettings};
use crate::state::Usage;

/// Retried requests one task may need in all before it gives up (each request is also
/// bounded on its own, by `http::MAX_ATTEMPTS`).
pub const MAX_TASK_RETRIES: u64 = 30;

/// A worker backed by a model provider.
pub struct ModelAgent {
    provider: Arc<ProviderSettings>,
    client: reqwest::Client,
    limiter: Arc<crate::llm::limiter::Limiter>,
}

impl ModelAgent {
    pub fn new(
        provider: Arc<ProviderSettings>,
        client: reqwest::Client,
        limiter: Arc<crate::llm::limiter::Limiter>,
    ) -> ModelAgent {
        ModelAgent {
            provider,
            client,
            limiter,
        }
    }

    async fn run_task(&self, task: &TaskContext) -> AgentReport {
        let provider = &*self.provider;
        let workspace = Arc::new(Workspace::new(
            task.worktree.clone(),
            task.repo.clone(),
            task.files.clone(),
            task.owns.clone(),
        ));
        let system = prompt::system(
            &task.goal,
            &task.task,
            &task.prompt,
            task.owns.patterns(),
            &task.owned,
        );
        let specs = tools::specs();
        let mut transcript = Transcript::open(&task.transcript);
        let first = match &task.feedback {
            None => prompt::first_message(&task.prompt),
            Some(feedback) => prompt::next_round(&task.prompt, task.round, feedback),
        };
        let mut messages = vec![Message::user_text(first)];
        let mut usage = Usage {
            cost_usd: provider.prices.map(|_| 0.0),
            ..Usage::default()
        };
        let mut summary = None;
        let report = |outcome, usage: Usage, summary| AgentReport {
            outcome,
            usage: Some(usage),
            summary,
        };
        let deadline = tokio::time::Instant::now() + task.timeout;
        let timed_out = || {
            failed(&format!(
                "timed out after {}",
                humantime::format_duration(task.timeout)
            ))
        };
        for turn in 1..=task.max_turns {
            if tokio::time::Instant::now() >= deadline {
                return report(timed_out(), usage, summary);
            }
            if task.cancel.is_cancelled() {
                return report(failed("interrupted"), usage, summary);
            }
            if let Some(reason) = task.budget.exhausted() {
                return report(AgentOutcome::Stopped { reason }, usage, summary);
            }
            let used = usage.input_tokens
                + usage.output_tokens
                + usage.cache_creation_input_tokens
                + usage.cache_read_input_tokens;
            if let Some(limit) = task.token_budget.filter(|l| used >= *l) {
                let reason =
                    format!("stopped by budget: the task used {used} of its {limit} tokens");
                return report(AgentOutcome::Stopped { reason }, usage, summary);
            }
            let body = match provider.kind {
                ProviderKind::Anthropic => {
                    anthropic::request_body(provider, &system, &specs, &messages, provider.stream)
                }
                ProviderKind::Openai => {
                    openai::request_body(provider, &system, &specs, &messages, provider.stream)
                }
            };
            let call = http::call(
                &self.client,
                provider,
                &self.limiter,
                &body,
                turn,
                &mut transcript,
                &task.cancel,
            );
            let (reply, timing) = tokio::select! {
                result = call => match result {
                    Ok(r) => r,
                    Err(reason) => return report(failed(&reason), usage, summary),
                },
                // An interrupt lets the turn in flight end; the loop stops before the next.
                _ = tokio::time::sleep_until(deadline) => return report(timed_out(), usage, summary),
            };
            let before = usage.cost_usd.unwrap_or(0.0);
            account(&mut usage, provider, &reply, &timing);
            task.budget.spend(usage.cost_usd.unwrap_or(0.0) - before);
            if usage.retries > MAX_TASK_RETRIES {
                let reason = format!(
                    "gave up after {} retried requests in this task",
                    usage.retries
                );
                return report(failed(&reason), usage, summary);
            }
            let text = conversation::text_of(&reply.content);
            if !text.trim().is_empty() {
                summary = Some(text.trim().to_string());
            }
            let calls: Vec<(String, String, Result<serde_json::Value, String>)> = reply
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => {
                        Some((id.clone(), name.clone(), input.clone()))
                    }
                    _ => None,
                })
                .collect();
            let stop = reply.stop.clone();
            // After `pause_turn` the model continues its own message: keep it one message.
            match messages.last_mut() {
                Some(last) if last.role == Role::Assistant => last.content.extend(reply.content),
                _ => messages.push(Message {
                    role: Role::Assistant,
                    content: reply.content,
                }),
            }
            match stop {
                Stop::Refusal => {
                    return report(failed("the model refused the task"), usage, summary)
                }
                Stop::ContextWindow => {
                    return report(
                        failed("the conversation outgrew the model's context window"),
                        usage,
                        summary,
                    )
                }
                _ if !calls.is_empty() => {
                    let results = run_tools(&workspace, calls, &mut usage).await;
                    messages.push(Message {
                        role: Role::User,
                        content: results,
                    });
                }
                Stop::PauseTurn => {}
                Stop::MaxTokens => messages.push(Message::user_text(
                    "Your reply was cut off by the token limit. Continue where you stopped.",
                )),
                Stop::EndTurn | Stop::ToolUse | Stop::Other(_) => {
                    return report(AgentOutcome::Finished, usage, summary);
                }
            }
        }
        report(
            failed(&format!(
                "max_turns ({}) reached before the agent finished",
                task.max_turns
            )),
            usage,
            summary,
        )
    }
}

fn failed(reason: &str) -> AgentOutcome {
    AgentOutcome::Failed {
        reason: reason.to_string(),
        exit_code: None,
    }
}

/// Runs the tool calls of one reply on a blocking thread; results keep their order.
async fn run_tools(
    workspace: &Arc<Workspace>,
    calls: Vec<(String, String, Result<serde_json::Value, String>)>,
    usage: &mut Usage,
) -> Vec<Block> {
    let workspace = workspace.clone();
    let ids: Vec<String> = calls.iter().map(|(id, ..)| id.clone()).collect();
    let outcomes = tokio::task::spawn_blocking(move || {
        calls
            .iter()
            .map(|(_, name, input)| workspace.run(name, input))
            .collect::<Vec<_>>()
    })
    .await;
    match outcomes {
        Ok(outcomes) => ids
            .into_iter()
            .zip(outcomes)
            .map(|(id, outcome)| {
                if outcome.refused_write {
                    usage.refused_writes += 1;
                }
                Block::ToolResult {
                    id,
                    content: outcome.content,
                    is_error: outcome.is_error,
                }
            })
            .collect(),
        Err(e) => ids
            .into_iter()
            .map(|id| Block::ToolResult {
                id,
                content: format!("the tool failed: {e}"),
                is_error: true,
            })
            .collect(),
    }
}

impl Agent for ModelAgent {
    fn run<'a>(&'a self, task: &'a TaskContext) -> AgentFuture<'a> {
        Box::pin(self.run_task(task))
    }
}
