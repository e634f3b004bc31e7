//! The conversation in a provider-neutral form: what was said, which tools were called and
//! what they answered, and a model's reply with its stop reason and token counts. Each
//! provider module translates to and from its own wire format.

use serde_json::Value;

/// Who said something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The person, or plait on their behalf (tool results are the user's).
    User,
    /// The model.
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Text.
    Text(String),
    /// A call of a tool by the model.
    ToolUse {
        /// The call's id, which its result names.
        id: String,
        /// The tool called.
        name: String,
        /// The parsed input; `Err` holds the raw text when it was not valid JSON.
        input: Result<Value, String>,
    },
    /// What a tool call gave back.
    ToolResult {
        /// The id of the call it answers.
        id: String,
        /// What the tool said.
        content: String,
        /// Whether the tool failed.
        is_error: bool,
    },
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub content: Vec<Block>,
}

impl Message {
    /// A message of the user's that holds `text` alone.
    pub fn user_text(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: vec![Block::Text(text.into())],
        }
    }
}

/// The text blocks of `content`, joined by newlines.
pub fn text_of(content: &[Block]) -> String {
    content
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The model finished its answer.
    EndTurn,
    /// The model waits for the results of its tool calls.
    ToolUse,
    /// The answer reached its `max_tokens`.
    MaxTokens,
    /// The server paused a long turn; sending the conversation again goes on with it.
    PauseTurn,
    /// The model declined to answer.
    Refusal,
    /// The conversation no longer fits the model's context window.
    ContextWindow,
    /// A reason plait does not know, as the server named it.
    Other(String),
}

/// Token counts of one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnUsage {
    /// Input tokens, not counting those written to or read from the cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens written to the cache.
    pub cache_creation: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Estimated by plait: the server gave no usage ([`crate::estimate`]).
    pub estimated: bool,
}

/// A model's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// What the model said and which tools it called.
    pub content: Vec<Block>,
    /// Why it stopped.
    pub stop: Stop,
    /// What it used.
    pub usage: TurnUsage,
    /// Whether the server said what the answer used; without it `usage` is zero until the
    /// caller estimates it ([`crate::estimate`]).
    pub usage_known: bool,
}

/// What the system prompt holds: a part shared by every task of the run (cacheable) and
/// the task's own part.
#[derive(Debug, Clone)]
pub struct System {
    /// The part every task of the run shares.
    pub shared: String,
    /// The task's own part.
    pub task: String,
}

/// A tool as offered to the model.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// Its input's JSON schema.
    pub schema: Value,
}

/// Whether `content` says anything: text that is not blank, or a tool call.
pub(crate) fn says_something(content: &[Block]) -> bool {
    content.iter().any(|b| match b {
        Block::Text(text) => !text.trim().is_empty(),
        Block::ToolUse { .. } => true,
        Block::ToolResult { .. } => false,
    })
}
