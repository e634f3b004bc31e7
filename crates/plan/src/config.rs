//! One's defaults, under the plan: a user config (`$XDG_CONFIG_HOME/plait/config.toml`)
//! and a repository config (`.plait.toml` at the checkout's root) may hold `[defaults]`,
//! `[providers]`, `[agents]`, `[checks]`, `[review]`, `[tools]`, `[setup]` and `[sandbox]` (the tasks'
//! `[defaults] sandbox`).
//! They are merged table by table under the plan, the repository's over the user's and
//! the plan's over both; a value the plan sets (an array included) replaces theirs whole.
//! The command line finds and reads the files; this module checks and merges them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::{Table, Value};

use super::PlanError;

/// The keys a config file may hold.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigFile {
    defaults: Option<Table>,
    providers: Option<Table>,
    agents: Option<Table>,
    checks: Option<Table>,
    review: Option<Table>,
    tools: Option<Table>,
    setup: Option<Table>,
    sandbox: Option<Table>,
}

/// One config file, checked, in the plan's shape (`[sandbox]` as `[defaults] sandbox`).
#[derive(Debug, Clone)]
pub struct Layer {
    /// The config file.
    pub source: PathBuf,
    table: Table,
}

impl Layer {
    /// The config file `text` read from `source`; unknown keys, in any of its tables, are
    /// refused all at once, each with its line.
    pub fn parse(text: &str, source: &Path) -> Result<Layer, PlanError> {
        if let Some(found) = super::keys::unknown(text, &super::keys::CONFIG) {
            if !found.is_empty() {
                return Err(PlanError::Config {
                    path: source.to_path_buf(),
                    message: super::keys::message(&found),
                });
            }
        }
        let file: ConfigFile = toml::from_str(text).map_err(|e| PlanError::Config {
            path: source.to_path_buf(),
            message: format!(
                "{} (a config file may hold [defaults], [providers], [agents], [checks], [review], [tools], [setup] and [sandbox])",
                e.to_string().trim_end()
            ),
        })?;
        let mut table = Table::new();
        let mut defaults = file.defaults.unwrap_or_default();
        if let Some(sandbox) = file.sandbox {
            defaults.insert("sandbox".to_string(), Value::Table(sandbox));
        }
        for (key, value) in [
            ("defaults", Some(defaults).filter(|d| !d.is_empty())),
            ("providers", file.providers),
            ("agents", file.agents),
            ("checks", file.checks),
            ("review", file.review),
            ("tools", file.tools),
            ("setup", file.setup),
        ] {
            if let Some(value) = value {
                table.insert(key.to_string(), Value::Table(value));
            }
        }
        Ok(Layer {
            source: source.to_path_buf(),
            table,
        })
    }
}

/// The config `layers` (lowest first) merged into one table of the plan's shape.
pub fn merged_layers(layers: &[Layer]) -> Table {
    let mut out = Table::new();
    for layer in layers {
        merge_into(&mut out, &layer.table);
    }
    out
}

/// The plan `text` (from `path`) with the config `layers` (lowest first) merged under it,
/// as TOML; the plan's own text when there are none. The plan is checked on its own first,
/// so that its problems point at its own lines.
pub fn merged_plan(text: &str, path: &Path, layers: &[Layer]) -> Result<String, PlanError> {
    if layers.is_empty() {
        return Ok(text.to_string());
    }
    super::parse(text, path)?;
    let plan: Table = toml::from_str(text).map_err(|e| PlanError::Parse {
        path: path.to_path_buf(),
        message: e.to_string().trim_end().to_string(),
    })?;
    let mut out = merged_layers(layers);
    merge_into(&mut out, &plan);
    let mut rendered = String::from("# The plan merged with the config files under it:\n");
    for layer in layers {
        let _ = writeln!(rendered, "#   {}", layer.source.display());
    }
    let _ = writeln!(rendered, "#   {} (wins)", path.display());
    rendered.push_str(&toml::to_string(&out).map_err(|e| PlanError::Parse {
        path: path.to_path_buf(),
        message: format!("cannot merge the config files under it: {e}"),
    })?);
    let sources: Vec<String> = layers
        .iter()
        .map(|l| l.source.display().to_string())
        .collect();
    super::parse(&rendered, path).map_err(|e| PlanError::Parse {
        path: path.to_path_buf(),
        message: format!("merged with {}: {e}", sources.join(", ")),
    })?;
    Ok(rendered)
}

/// Merges `over` into `into`: tables key by key, anything else replaced whole.
fn merge_into(into: &mut Table, over: &Table) {
    for (key, value) in over {
        match (into.get_mut(key), value) {
            (Some(Value::Table(mine)), Value::Table(theirs)) => merge_into(mine, theirs),
            _ => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_wins_and_tables_merge_key_by_key() {
        let user = Layer::parse(
            "[checks]\ntask = [\"cargo check\"]\nmerged = [\"cargo test\"]\n[sandbox]\nwritable = [\"~/.cargo\"]\n",
            Path::new("user.toml"),
        )
        .unwrap();
        let repo = Layer::parse("[checks]\njobs = 3\n", Path::new(".plait.toml")).unwrap();
        let plan = "goal = \"g\"\n[checks]\nmerged = [\"make test\"]\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a\"]\n";
        let text = merged_plan(plan, Path::new("plan.toml"), &[user, repo]).unwrap();
        let merged: Table = toml::from_str(&text).unwrap();
        let checks = merged["checks"].as_table().unwrap();
        assert_eq!(
            checks["task"].as_array().unwrap()[0].as_str(),
            Some("cargo check")
        );
        assert_eq!(
            checks["merged"].as_array().unwrap()[0].as_str(),
            Some("make test")
        );
        assert_eq!(checks["jobs"].as_integer(), Some(3));
        assert_eq!(
            merged["defaults"]["sandbox"]["writable"][0].as_str(),
            Some("~/.cargo")
        );
        assert_eq!(merged["task"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_config_holds_only_its_keys() {
        let err = Layer::parse("goal = \"g\"\n", Path::new("/u/config.toml")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/u/config.toml"), "{text}");
        assert!(
            text.contains("`goal` at the top level (valid: defaults, providers, agents, checks, review, tools, setup, sandbox)"),
            "{text}"
        );
        assert!(merged_plan("goal = 1", Path::new("p.toml"), &[]).is_ok());
    }
}
