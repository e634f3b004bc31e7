//! The tool results a client sent back, read from the recorded requests, so that a test can
//! see what the model was told: a file's text, an edit's outcome, a hook's refusal.

use std::collections::BTreeSet;

use serde_json::Value;

use super::check::text_of;
use super::Provider;

/// One tool result: the call it answers, its text, and whether the client marked it an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    pub id: String,
    /// A string content as is; block content as the text of its text blocks, one per line.
    pub text: String,
    /// Anthropic's `is_error` (false when absent); always false for OpenAI.
    pub is_error: bool,
}

/// The tool results in `bodies`, each id once, in the order they first appear.
pub(super) fn tool_results<'a>(
    provider: Provider,
    bodies: impl Iterator<Item = &'a Value>,
) -> Vec<ToolResult> {
    let mut seen = BTreeSet::new();
    let mut results = Vec::new();
    for body in bodies {
        let messages = body["messages"].as_array().map(Vec::as_slice);
        for message in messages.unwrap_or_default() {
            let found = match provider {
                Provider::Anthropic => anthropic_results(message),
                Provider::OpenAi => openai_result(message).into_iter().collect(),
            };
            let new = found.into_iter().filter(|r| seen.insert(r.id.clone()));
            results.extend(new);
        }
    }
    results
}

/// The `tool_result` blocks of an Anthropic user message.
fn anthropic_results(message: &Value) -> Vec<ToolResult> {
    if message["role"] != "user" {
        return Vec::new();
    }
    let blocks = message["content"].as_array().map(Vec::as_slice);
    let results = blocks
        .unwrap_or_default()
        .iter()
        .filter(|b| b["type"] == "tool_result");
    results
        .map(|block| ToolResult {
            id: block["tool_use_id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            text: content_text(&block["content"]),
            is_error: block["is_error"] == true,
        })
        .collect()
}

/// An OpenAI `tool` message.
fn openai_result(message: &Value) -> Option<ToolResult> {
    if message["role"] != "tool" {
        return None;
    }
    Some(ToolResult {
        id: message["tool_call_id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        text: content_text(&message["content"]),
        is_error: false,
    })
}

/// A string as is, or the text of the text blocks (other blocks, such as images, skipped).
fn content_text(content: &Value) -> String {
    if let Some(text) = text_of(content) {
        return text;
    }
    let blocks = content.as_array().map(Vec::as_slice).unwrap_or_default();
    let texts = blocks.iter().filter(|b| b["type"] == "text");
    let texts: Vec<&str> = texts.filter_map(|b| b["text"].as_str()).collect();
    texts.join("\n")
}
