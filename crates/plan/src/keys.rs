//! The keys each table of a plan or config file may hold, and every key a file holds
//! besides them, found at once with its line. serde's `deny_unknown_fields` stops at the
//! first unknown key; a user who misspells two would meet them one run at a time.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

/// What a value may hold, as far as its keys go.
pub(crate) enum Shape {
    /// No keys of its own (a string, a number, an array of them); not looked into.
    Leaf,
    /// A table of these keys, each with the shape of its value. A value that is not a
    /// table is left to serde to refuse.
    Table(&'static [(&'static str, Shape)]),
    /// A table whose keys are names the user chooses, each value of this shape.
    Named(&'static Shape),
    /// An array (of tables), each element of this shape.
    Array(&'static Shape),
}

use Shape::{Array, Leaf, Named, Table};

/// An agent: a name, or a table (`AgentTable`).
const AGENT: Shape = Table(&[
    ("exec", Leaf),
    ("exec_each", Leaf),
    ("files", Leaf),
    ("cli", Leaf),
    ("gateway", Leaf),
    ("answer", Leaf),
]);

/// `SandboxFile`.
const SANDBOX: Shape = Table(&[
    ("mode", Leaf),
    ("writable", Leaf),
    ("readable", Leaf),
    ("view", Leaf),
    ("network", Leaf),
    ("ports", Leaf),
    ("sockets", Leaf),
    ("keep_env", Leaf),
    ("limits", Table(&[("pids", Leaf), ("memory", Leaf)])),
]);

/// `Defaults`.
const DEFAULTS: Shape = Table(&[
    ("agent", AGENT),
    ("checkout", Leaf),
    ("context", Leaf),
    ("timeout", Leaf),
    ("max_turns", Leaf),
    ("token_budget", Leaf),
    ("expect_changes", Leaf),
    ("sandbox", SANDBOX),
    ("after", Leaf),
    ("attempts", Leaf),
    ("agents", Array(&AGENT)),
]);

/// A pick: a name, or `{ command = "CMD" }`.
const PICK: Shape = Table(&[("command", Leaf)]);

/// `TaskFile`.
const TASK: Shape = Table(&[
    ("id", Leaf),
    ("prompt", Leaf),
    ("owns", Leaf),
    ("context", Leaf),
    ("checkout", Leaf),
    ("agent", AGENT),
    ("timeout", Leaf),
    ("max_turns", Leaf),
    ("token_budget", Leaf),
    ("expect_changes", Leaf),
    ("sandbox", SANDBOX),
    ("after", Leaf),
    ("attempts", Leaf),
    ("agents", Array(&AGENT)),
    ("pick", PICK),
    ("checks", Leaf),
]);

/// `ProviderFile`, with its `Prices` and `Limits`.
const PROVIDER: Shape = Table(&[
    ("kind", Leaf),
    ("base_url", Leaf),
    ("api_key_env", Leaf),
    ("model", Leaf),
    ("max_tokens", Leaf),
    ("stream", Leaf),
    (
        "prices",
        Table(&[
            ("input", Leaf),
            ("output", Leaf),
            ("cache_write", Leaf),
            ("cache_read", Leaf),
        ]),
    ),
    (
        "limits",
        Table(&[
            ("concurrency", Leaf),
            ("rpm", Leaf),
            ("input_tpm", Leaf),
            ("output_tpm", Leaf),
        ]),
    ),
    ("cache_history", Leaf),
]);

/// `ChecksFile`.
const CHECKS: Shape = Table(&[
    ("task", Leaf),
    ("merged", Leaf),
    ("jobs", Leaf),
    ("timeout", Leaf),
    ("bisect", Leaf),
    ("rework", Leaf),
    ("network", Leaf),
    ("base", Leaf),
]);

/// `ReviewFile`.
const REVIEW: Shape = Table(&[("agent", AGENT), ("rounds", Leaf)]);

/// `ToolFile`.
const TOOL: Shape = Table(&[
    ("bin", Leaf),
    ("model", Leaf),
    ("provider", Leaf),
    ("args", Leaf),
]);

/// `AgentsFile`.
const AGENTS: Shape = Table(&[("claude-code", TOOL), ("aider", TOOL)]);

/// `GroupsFile`.
const GROUPS: Shape = Table(&[
    ("threshold", Leaf),
    ("count", Leaf),
    ("review", AGENT),
    ("rounds", Leaf),
]);

/// `ToolsFile`.
const TOOLS: Shape = Table(&[("run", Leaf)]);

/// `SetupFile`.
const SETUP: Shape = Table(&[
    ("include", Leaf),
    ("run", Leaf),
    ("key", Leaf),
    ("network", Leaf),
    ("timeout_s", Leaf),
]);

/// `PlanFile`: a plan's top level.
pub(crate) const PLAN: Shape = Table(&[
    ("goal", Leaf),
    ("base", Leaf),
    ("defaults", DEFAULTS),
    ("task", Array(&TASK)),
    ("providers", Named(&PROVIDER)),
    ("checks", CHECKS),
    ("review", REVIEW),
    ("agents", AGENTS),
    ("groups", GROUPS),
    ("tools", TOOLS),
    ("setup", SETUP),
    ("pick", Table(&[("by", PICK), ("fallback", Leaf)])),
]);

/// `config::ConfigFile`: a config file's top level (`[sandbox]` is the tasks'
/// `[defaults] sandbox`).
pub(crate) const CONFIG: Shape = Table(&[
    ("defaults", DEFAULTS),
    ("providers", Named(&PROVIDER)),
    ("agents", AGENTS),
    ("checks", CHECKS),
    ("review", REVIEW),
    ("tools", TOOLS),
    ("setup", SETUP),
    ("sandbox", SANDBOX),
]);

impl Shape {
    /// The keys a table of this shape may hold (none for the other shapes).
    pub(crate) fn keys(&self) -> Vec<&'static str> {
        match self {
            Table(keys) => keys.iter().map(|(key, _)| *key).collect(),
            _ => Vec::new(),
        }
    }
}

/// A key no table of its place may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unknown {
    pub key: String,
    /// 1-based, of the key in the text.
    pub line: usize,
    pub column: usize,
    /// The table it is in, as a TOML header (`[[task]]`, `[defaults.sandbox]`); empty
    /// for the top level.
    pub table: String,
    pub valid: Vec<&'static str>,
}

impl Unknown {
    /// The valid key `key` was most likely meant to be: the nearest within two edits.
    pub(crate) fn suggestion(&self) -> Option<&'static str> {
        self.valid
            .iter()
            .map(|valid| (distance(&self.key, valid), *valid))
            .filter(|(d, _)| *d <= 2)
            .min_by_key(|(d, _)| *d)
            .map(|(_, valid)| valid)
    }
}

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: unknown field `{}` ",
            self.line, self.column, self.key
        )?;
        if self.table.is_empty() {
            f.write_str("at the top level")?;
        } else {
            write!(f, "in {}", self.table)?;
        }
        if let Some(meant) = self.suggestion() {
            write!(f, ", did you mean `{meant}`?")?;
        }
        write!(f, " (valid: {})", self.valid.join(", "))
    }
}

/// Every key of `text` that its table may not hold, in the order of the text; `None` when
/// the text cannot be read as TOML (serde's own error says why).
pub(crate) fn unknown(text: &str, shape: &Shape) -> Option<Vec<Unknown>> {
    let root: Node = toml::from_str(text).ok()?;
    let mut found = Vec::new();
    walk(&root, shape, &mut Vec::new(), text, &mut found);
    found.sort_by_key(|u| (u.line, u.column));
    Some(found)
}

/// Each key of `text` that its table may not hold, as the line a run prints for it: `text`
/// read as a plan, or as a config file (`~/.config/plait/config.toml`, `.plait.toml`) with
/// `config`; `None` when it is not TOML. For text that is not a whole plan, such as the
/// book's snippets.
pub fn unknown_keys(text: &str, config: bool) -> Option<Vec<String>> {
    let shape = if config { &CONFIG } else { &PLAN };
    unknown(text, shape).map(|found| found.iter().map(ToString::to_string).collect())
}

/// The unknown keys `found` as the lines of one message: a count, then one key a line.
pub(crate) fn message(found: &[Unknown]) -> String {
    let mut text = match found.len() {
        1 => "1 unknown field:".to_string(),
        n => format!("{n} unknown fields:"),
    };
    for unknown in found {
        text.push_str("\n  ");
        text.push_str(&unknown.to_string());
    }
    text
}

/// A TOML value as far as keys go: tables with each key's place, arrays, and the rest.
enum Node {
    Table(Vec<(Spanned<String>, Node)>),
    Array(Vec<Node>),
    Leaf,
}

/// One step of the way to a table: a key, and whether it is an element of an array there.
struct Step<'a> {
    key: &'a str,
    element: bool,
}

fn walk<'a>(
    node: &'a Node,
    shape: &Shape,
    path: &mut Vec<Step<'a>>,
    text: &str,
    found: &mut Vec<Unknown>,
) {
    match (node, shape) {
        (Node::Table(entries), Table(keys)) => {
            for (key, value) in entries {
                match keys.iter().find(|(known, _)| *known == key.get_ref()) {
                    Some((_, inner)) => {
                        path.push(Step {
                            key: key.get_ref(),
                            element: false,
                        });
                        walk(value, inner, path, text, found);
                        path.pop();
                    }
                    None => {
                        let (line, column) = place(text, key.span().start);
                        found.push(Unknown {
                            key: key.get_ref().clone(),
                            line,
                            column,
                            table: header(path),
                            valid: shape.keys(),
                        });
                    }
                }
            }
        }
        (Node::Table(entries), Named(inner)) => {
            for (key, value) in entries {
                path.push(Step {
                    key: key.get_ref(),
                    element: false,
                });
                walk(value, inner, path, text, found);
                path.pop();
            }
        }
        (Node::Array(elements), Array(inner)) => {
            if let Some(last) = path.last_mut() {
                last.element = true;
            }
            for element in elements {
                walk(element, inner, path, text, found);
            }
            if let Some(last) = path.last_mut() {
                last.element = false;
            }
        }
        // A value of another type than its key takes: serde refuses it.
        _ => {}
    }
}

/// The TOML header of the table at `path`: `[[task]]` for an element of an array of
/// tables, `[task.sandbox]` beneath one.
fn header(path: &[Step<'_>]) -> String {
    let Some(last) = path.last() else {
        return String::new();
    };
    let dotted: Vec<&str> = path.iter().map(|step| step.key).collect();
    if last.element {
        format!("[[{}]]", dotted.join("."))
    } else {
        format!("[{}]", dotted.join("."))
    }
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
fn place(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// The number of single-character edits that turn `a` into `b` (Levenshtein).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut elements = Vec::new();
        while let Some(element) = seq.next_element()? {
            elements.push(element);
        }
        Ok(Node::Array(elements))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        // A date-time comes as a map of one private key whose name has no span; such a
        // file is left to serde, which says what it makes of it.
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value()?;
            entries.push((key, value));
        }
        Ok(Node::Table(entries))
    }
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;

    use super::*;
    use crate::{
        tools::ToolsFile, AgentSpec, AgentsFile, ChecksFile, Defaults, GroupsFile, PlanFile,
        ReviewFile, SandboxFile, SetupFile, TaskFile, ToolFile,
    };
    use plait_llm::provider::{Limits, Prices, ProviderFile};

    /// The keys serde accepts for `T`, in its order, from its refusal of an unknown one.
    fn accepted<T: DeserializeOwned>(wrap: &str) -> Vec<String> {
        let text = wrap.replace("{}", "zz_not_a_key = 1");
        let err = toml::from_str::<T>(&text)
            .err()
            .expect("refused")
            .to_string();
        let expected = err
            .split("expected ")
            .nth(1)
            .unwrap_or_else(|| panic!("{err}"));
        let line = expected.lines().next().unwrap_or_default();
        line.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    /// The shape a `path` of keys leads to from `shape` (an array's or named table's
    /// element for `*`).
    fn at(shape: &'static Shape, path: &[&str]) -> &'static Shape {
        path.iter().fold(shape, |shape, key| match shape {
            Table(keys) => &keys.iter().find(|(k, _)| k == key).expect(key).1,
            Named(inner) | Array(inner) => inner,
            Leaf => panic!("{key} under a leaf"),
        })
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Wrapped<T> {
        v: T,
    }

    #[test]
    fn each_tables_keys_are_the_ones_serde_accepts() {
        let cases: Vec<(Vec<String>, &[&str])> = vec![
            (accepted::<PlanFile>("{}"), &[]),
            (accepted::<Defaults>("{}"), &["defaults"]),
            (accepted::<TaskFile>("{}"), &["task", "*"]),
            (accepted::<ProviderFile>("{}"), &["providers", "*"]),
            (accepted::<Prices>("{}"), &["providers", "*", "prices"]),
            (accepted::<Limits>("{}"), &["providers", "*", "limits"]),
            (accepted::<ChecksFile>("{}"), &["checks"]),
            (accepted::<ReviewFile>("{}"), &["review"]),
            (accepted::<AgentsFile>("{}"), &["agents"]),
            (accepted::<ToolFile>("{}"), &["agents", "aider"]),
            (accepted::<GroupsFile>("{}"), &["groups"]),
            (accepted::<ToolsFile>("{}"), &["tools"]),
            (accepted::<SetupFile>("{}"), &["setup"]),
            (accepted::<SandboxFile>("{}"), &["defaults", "sandbox"]),
            (
                accepted::<Wrapped<AgentSpec>>("v = { {} }"),
                &["defaults", "agent"],
            ),
        ];
        for (serde_keys, path) in cases {
            assert_eq!(at(&PLAN, path).keys(), serde_keys, "at {path:?}");
        }
        assert_eq!(at(&PLAN, &["task", "*", "sandbox"]).keys(), SANDBOX.keys());
        assert_eq!(at(&PLAN, &["task", "*", "agent"]).keys(), AGENT.keys());
        assert_eq!(at(&PLAN, &["review", "agent"]).keys(), AGENT.keys());
        assert_eq!(at(&PLAN, &["groups", "review"]).keys(), AGENT.keys());
        assert_eq!(at(&PLAN, &["agents", "claude-code"]).keys(), TOOL.keys());
        assert_eq!(CONFIG.keys(), accepted::<crate::config::ConfigFile>("{}"));
        for key in CONFIG.keys() {
            let from_config = at(&CONFIG, &[key]).keys();
            let from_plan = match key {
                "sandbox" => SANDBOX.keys(),
                _ => at(&PLAN, &[key]).keys(),
            };
            assert_eq!(from_config, from_plan, "{key}");
        }
    }

    #[test]
    fn every_unknown_key_is_found_with_its_place_and_table() {
        let text = "goal = \"g\"\ngoall = 1\n[defaults]\nsandbox = { mode = \"off\", wrtable = [] }\n\
                    [providers.local]\nbase_url = \"x\"\nprices = { input = 1.0, output = 1.0, cache = 2 }\n\
                    [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = []\n\n[[task]]\nid = \"b\"\n  timout = \"5m\"\n\
                    agent = { exec = \"x\", shell = \"bash\" }\n[task.sandbox]\nport = [1]\n";
        let found = unknown(text, &PLAN).unwrap();
        let got: Vec<(&str, usize, usize, &str)> = found
            .iter()
            .map(|u| (u.key.as_str(), u.line, u.column, u.table.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("goall", 2, 1, ""),
                ("wrtable", 4, 27, "[defaults.sandbox]"),
                ("cache", 7, 39, "[providers.local.prices]"),
                ("timout", 15, 3, "[[task]]"),
                ("shell", 16, 23, "[task.agent]"),
                ("port", 18, 1, "[task.sandbox]"),
            ]
        );
        assert_eq!(found[3].suggestion(), Some("timeout"));
        assert_eq!(found[5].suggestion(), Some("ports"));
        assert_eq!(found[0].suggestion(), Some("goal"));
        let line = found[3].to_string();
        assert!(
            line.starts_with(
                "line 15, column 3: unknown field `timout` in [[task]], did you mean `timeout`? \
                 (valid: id, prompt, owns, context,"
            ),
            "{line}"
        );
        assert_eq!(unknown("goal = \"g\"\n", &PLAN), Some(Vec::new()));
        assert_eq!(unknown("goal = \n", &PLAN), None);
    }

    #[test]
    fn a_far_key_gets_no_suggestion() {
        let found = unknown("[checks]\nfrobnicate = 1\nmerge = []\n", &CONFIG).unwrap();
        assert_eq!(found[0].suggestion(), None);
        assert_eq!(found[1].suggestion(), Some("merged"));
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "ab"), 2);
    }
}
