//! The conversation in a provider-neutral form: what was said, which tools were called and
//! what they answered, and a model's reply with its stop reason and token counts. Each
//! provider module translates to and from its own wire format.

use serde_json::Value;

/// Who said something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The parsed input; `Err` holds the raw text when it was not valid JSON.
        input: Result<Value, String>,
    },
    ToolResult {
        id: String,
        content: String,
        is_error: bool,
    },
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
}

impl Message {
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
    EndTurn,
    ToolUse,
    MaxTokens,
    PauseTurn,
    Refusal,
    ContextWindow,
    Other(String),
}

/// Token counts of one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnUsage {
    pub input: u64,
    pub output: u64,
    pub cache_creation: u64,
    pub cache_read: u64,
    /// Estimated by plait: the server gave no usage ([`crate::estimate`]).
    pub estimated: bool,
}

/// A model's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub content: Vec<Block>,
    pub stop: Stop,
    pub usage: TurnUsage,
    /// Whether the server said what the answer used; without it `usage` is zero until the
    /// caller estimates it ([`crate::estimate`]).
    pub usage_known: bool,
}

/// What the system prompt holds: a part shared by every task of the run (cacheable) and
/// the task's own part.
#[derive(Debug, Clone)]
pub struct System {
    pub shared: String,
    pub task: String,
}

/// A tool as offered to the model.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub schema: Value,
}

/// Whether `content` says anything: text that is not blank, or a tool call.
pub fn says_something(content: &[Block]) -> bool {
    content.iter().any(|b| match b {
        Block::Text(text) => !text.trim().is_empty(),
        Block::ToolUse { .. } => true,
        Block::ToolResult { .. } => false,
    })
}
