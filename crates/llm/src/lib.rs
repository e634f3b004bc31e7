//! The model APIs over HTTP, shared by model agents, reviewers, supervisors and the
//! planner: the provider settings ([`provider`]), the provider-neutral conversation
//! ([`conversation`]), the Anthropic and OpenAI wire formats ([`anthropic`], [`openai`])
//! with [`sse`] streaming, requests with retries and transcripts ([`http`]), the limiter
//! every request of a provider and key waits on ([`limiter`]), the estimate of what an
//! answer used when the server does not say ([`estimate`]), and a transcript read back for
//! a person ([`readable`]). At the root: the shared HTTP client, a request forced to call
//! one tool, and the accounting of an answer's usage.
//!
//! Start from [`provider::ProviderSettings`] (a provider: its wire, base URL, key, model,
//! prices and limits), [`conversation`] (the messages both wires are written from) and
//! [`http`] (a request sent, retried and kept in the transcript), with the
//! [`limiter::Limiter`] every request of one provider and key waits on. A crate of its own
//! because model agents, reviewers, supervisors, the planner and the gateway all speak to
//! models, and none of them should know a wire's details.
//!
//! ```
//! use plait_llm::estimate;
//! use serde_json::json;
//!
//! // What a request will cost is known before it is sent, even where a server never says.
//! let body = json!({
//!     "model": "m",
//!     "messages": [{"role": "user", "content": "Rename the parser's `tok` to `token`."}],
//! });
//! let tokens = estimate::input_tokens(&body);
//! assert!(tokens > 5 && tokens < 50, "{tokens}");
//! ```

#![deny(missing_docs)]

pub mod anthropic;
pub mod conversation;
pub mod estimate;
pub mod http;
pub mod limiter;
pub mod openai;
pub mod provider;
pub mod readable;
pub mod sse;

use conversation::{Message, Reply};
use plait_core::state::Usage;
use provider::{ProviderKind, ProviderSettings};

/// The HTTP client every model call of a run shares, so requests share connections.
pub fn client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(30))
        .read_timeout(std::time::Duration::from_secs(300))
        .user_agent(concat!("plait/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// A request that must be answered by calling `tool` (a reviewer's `submit_review`, a
/// manager's `submit_plan`): the tool is the only one offered and it is forced.
pub fn forced_tool_body(
    provider: &ProviderSettings,
    system: &conversation::System,
    tool: conversation::ToolSpec,
    messages: &[Message],
) -> serde_json::Value {
    let name = tool.name;
    let tools = [tool];
    let mut body = match provider.kind {
        ProviderKind::Anthropic => {
            anthropic::request_body(provider, system, &tools, messages, provider.stream)
        }
        ProviderKind::Openai => {
            openai::request_body(provider, system, &tools, messages, provider.stream)
        }
    };
    body["tool_choice"] = match provider.kind {
        ProviderKind::Anthropic => serde_json::json!({"type": "tool", "name": name}),
        ProviderKind::Openai => {
            serde_json::json!({"type": "function", "function": {"name": name}})
        }
    };
    body
}

/// Adds one answered request to `usage`: requests and retries, tokens, time, and the cost
/// at the provider's prices.
pub fn account(
    usage: &mut Usage,
    provider: &ProviderSettings,
    reply: &Reply,
    timing: &http::Timing,
) {
    account_turn(usage, provider.prices, reply.usage, timing);
}

/// Adds one answered request's tokens `u` to `usage`, at `prices` (unknown: the cost
/// stays unknown).
pub fn account_turn(
    usage: &mut Usage,
    prices: Option<provider::Prices>,
    u: conversation::TurnUsage,
    timing: &http::Timing,
) {
    usage.requests += 1 + u64::from(timing.retries);
    usage.retries += u64::from(timing.retries);
    usage.turns += 1;
    usage.input_tokens += u.input;
    usage.output_tokens += u.output;
    usage.cache_creation_input_tokens += u.cache_creation;
    usage.cache_read_input_tokens += u.cache_read;
    usage.estimated |= u.estimated;
    usage.model_ms += timing.total.as_millis() as u64;
    if usage.first_token_ms.is_none() {
        usage.first_token_ms = Some(timing.first_token.as_millis() as u64);
    }
    if let (Some(cost), Some(p)) = (usage.cost_usd.as_mut(), prices) {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        let (write, read) = (
            p.cache_write.unwrap_or(p.input * 1.25),
            p.cache_read.unwrap_or(p.input * 0.1),
        );
        *cost += per(u.input, p.input)
            + per(u.output, p.output)
            + per(u.cache_creation, write)
            + per(u.cache_read, read);
        usage.cache_saved_usd +=
            per(u.cache_read, p.input - read) - per(u.cache_creation, write - p.input);
    }
}
