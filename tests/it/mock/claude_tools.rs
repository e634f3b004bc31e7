//! Calls of the Claude Code CLI's own tools, for a mock started with
//! [`MockModel::start_claude_code`](super::MockModel::start_claude_code). The CLI resolves a
//! relative path against its working directory, and refuses an `edit` of a file it has not
//! `read` earlier in the session.

use serde_json::json;

use super::{ToolCall, Turn};

pub fn read(path: &str) -> ToolCall {
    ToolCall::new("Read", json!({"file_path": path}))
}

pub fn edit(path: &str, old: &str, new: &str) -> ToolCall {
    let input = json!({"file_path": path, "old_string": old, "new_string": new});
    ToolCall::new("Edit", input)
}

pub fn write(path: &str, content: &str) -> ToolCall {
    ToolCall::new("Write", json!({"file_path": path, "content": content}))
}

pub fn bash(command: &str) -> ToolCall {
    let input = json!({"command": command, "description": "Run a command"});
    ToolCall::new("Bash", input)
}

/// The turns of an edit as Claude Code makes one: `read` the file, `edit` it, then say `said`.
pub fn read_and_edit(path: &str, old: &str, new: &str, said: &str) -> Vec<Turn> {
    vec![
        Turn::Tools(vec![read(path)]),
        Turn::Tools(vec![edit(path, old, new)]),
        Turn::Text(said.into()),
    ]
}
