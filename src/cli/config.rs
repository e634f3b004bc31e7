//! `plait config`: one's defaults, from the user config and the repository config, which
//! `plait run` and `plait plan --check` merge under the plan. Also where those files are
//! found and read, for the commands that use them.

use std::path::{Path, PathBuf};

use clap::Args;

use super::ui::outln;
use super::CommandError;
use plait::plan::config::{self, Layer};
use plait_core::git;

/// Show the defaults the config files give a plan, and where they come from
#[derive(Debug, Args)]
#[command(after_help = "\
Two files may hold defaults for every plan: the user config
($XDG_CONFIG_HOME/plait/config.toml, else ~/.config/plait/config.toml) and the repository
config (.plait.toml at the checkout's root). Each may hold [defaults], [providers],
[agents], [checks], [tools], [setup] and [sandbox] (the tasks' [defaults] sandbox). They
are merged table by table under the plan: the repository's over the user's, the plan's over
both; a value the plan sets, an array included, replaces theirs whole. The run keeps the
merged plan.

Example ~/.config/plait/config.toml:
  [defaults]
  agent = \"claude-code\"
  [checks]
  task = [\"cargo check\"]
  [sandbox]
  writable = [\"~/.cargo\"]")]
pub struct ConfigArgs {}

pub fn cmd_config(dir: &Path, _args: ConfigArgs) -> Result<(), CommandError> {
    let layers = layers(dir)?;
    if layers.is_empty() {
        let (user, repo) = places(dir)?;
        outln!(
            "no config files; plait looks for {} and {}",
            user.map_or("$XDG_CONFIG_HOME/plait/config.toml".to_string(), |p| p
                .display()
                .to_string()),
            repo.display()
        )?;
        return Ok(());
    }
    for layer in &layers {
        outln!("# from {}", layer.source.display())?;
    }
    let merged = config::merged_layers(&layers);
    let text = toml::to_string(&merged)
        .map_err(|e| CommandError::internal("cannot show the config").because(e))?;
    outln!("{}", text.trim_end())
}

/// The user config's path (if `HOME` or `XDG_CONFIG_HOME` says where it is) and the
/// repository config's.
fn places(dir: &Path) -> Result<(Option<PathBuf>, PathBuf), CommandError> {
    let user = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|base| base.join("plait/config.toml"));
    let repo = git::open(dir)?;
    Ok((user, git::workdir(&repo).join(".plait.toml")))
}

/// The config files that exist, lowest first: the user's, then the repository's.
pub(super) fn layers(dir: &Path) -> Result<Vec<Layer>, CommandError> {
    let (user, repo) = places(dir)?;
    let mut layers = Vec::new();
    for path in user.into_iter().chain([repo]) {
        match std::fs::read_to_string(&path) {
            Ok(text) => layers.push(Layer::parse(&text, &path)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(CommandError::usage(format!(
                    "cannot read config {}: {e}",
                    path.display()
                )))
            }
        }
    }
    Ok(layers)
}

/// The plan `text` from `path` with the config files merged under it.
pub(super) fn with_config(dir: &Path, path: &Path, text: String) -> Result<String, CommandError> {
    let layers = layers(dir)?;
    Ok(config::merged_plan(&text, path, &layers)?)
}
