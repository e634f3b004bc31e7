//! Best of N: a task run as several attempts (`attempts`, `agents`), and how the one that
//! becomes the task is chosen (`[pick] by`, or a task's `pick`). The plan's words for them
//! and what they resolve to; the orchestrator runs the attempts and makes the pick.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::resolved::AgentConfig;
use plait_sandbox::sandbox::SandboxSettings;

/// The most attempts a task may have.
pub const MAX_ATTEMPTS: u32 = 20;

/// How the attempt that becomes a task is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickSpec {
    /// `"checks"`: the first attempt whose checks (and review, if any) pass; the others
    /// are stopped then.
    Checks,
    /// `"review"`: once every attempt has ended, the task's reviewer compares those that
    /// passed and chooses one.
    Review,
    /// `{ command = "CMD" }`: a command run in a checkout of the base, told the candidates
    /// (`PLAIT_CANDIDATES`, `PLAIT_CANDIDATE_<n>`); its last line of output is the choice.
    Command(String),
}

impl PickSpec {
    /// Its name, as `plait status` and a pick's record write it.
    pub fn name(&self) -> &'static str {
        match self {
            PickSpec::Checks => "checks",
            PickSpec::Review => "review",
            PickSpec::Command(_) => "command",
        }
    }
}

/// The `[pick]` table.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PickFile {
    /// How every task with attempts is picked, unless it says: `"checks"`, `"review"` (the
    /// default for a task that has a reviewer) or `{ command = "CMD" }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<PickSpec>,
    /// What happens when no attempt passes: `"none"` (the default: the task fails, naming
    /// each attempt's failure) or `"least-red"` (the attempt with the fewest failing checks
    /// becomes the task, its checks still red).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
}

/// `[pick] fallback`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fallback {
    /// No attempt is chosen: the task fails.
    #[default]
    None,
    /// The attempt with the fewest failing checks.
    LeastRed,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PickTable {
    command: String,
}

impl<'de> Deserialize<'de> for PickSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpecVisitor;
        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = PickSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"checks\", \"review\" or a table { command = \"CMD\" }")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PickSpec, E> {
                match v {
                    "checks" => Ok(PickSpec::Checks),
                    "review" => Ok(PickSpec::Review),
                    other => Err(E::custom(format!(
                        "unknown pick `{other}`: use \"checks\" (the first attempt that passes), \
                         \"review\" (the reviewer compares those that passed) or \
                         {{ command = \"CMD\" }} (its last line of output names the attempt)"
                    ))),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<PickSpec, A::Error> {
                let table = PickTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                if table.command.trim().is_empty() {
                    return Err(de::Error::custom("the pick's `command` is empty"));
                }
                Ok(PickSpec::Command(table.command))
            }
        }
        deserializer.deserialize_any(SpecVisitor)
    }
}

impl Serialize for PickSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            PickSpec::Command(command) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("command", command)?;
                map.end()
            }
            other => serializer.serialize_str(other.name()),
        }
    }
}

/// What one attempt runs: its agent and the walls that go with it (an agent CLI's network
/// differs from an exec agent's).
#[derive(Debug, Clone)]
pub struct AttemptSpec {
    /// The agent the attempt runs.
    pub agent: AgentConfig,
    pub(crate) sandbox: SandboxSettings,
    pub(crate) check_sandbox: SandboxSettings,
    pub(crate) expect_changes: bool,
}

/// A task's attempts, resolved: how many, what each runs (attempt `n` runs
/// `specs[(n - 1) % specs.len()]`), and how the one that becomes the task is chosen.
#[derive(Debug, Clone)]
pub struct Attempts {
    /// How many attempts (2 or more).
    pub count: u32,
    pub(crate) specs: Vec<Arc<AttemptSpec>>,
    /// How the one that becomes the task is chosen.
    pub pick: PickSpec,
    /// What happens when none passes.
    pub fallback: Fallback,
}

impl Attempts {
    /// What attempt `n` (1..) runs.
    pub fn spec(&self, n: u32) -> &Arc<AttemptSpec> {
        &self.specs[(n.max(1) as usize - 1) % self.specs.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Holder {
        pick: PickSpec,
    }

    fn parse(text: &str) -> Result<PickSpec, String> {
        toml::from_str::<Holder>(text)
            .map(|h| h.pick)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_pick_is_a_name_or_a_command() {
        assert_eq!(parse("pick = \"checks\""), Ok(PickSpec::Checks));
        assert_eq!(parse("pick = \"review\""), Ok(PickSpec::Review));
        assert_eq!(
            parse("pick = { command = \"./score\" }"),
            Ok(PickSpec::Command("./score".into()))
        );
        let wrong = parse("pick = \"best\"").unwrap_err();
        assert!(wrong.contains("unknown pick `best`"), "{wrong}");
        assert!(parse("pick = { cmd = \"x\" }").is_err());
        assert!(parse("pick = { command = \" \" }").is_err());
    }
}
