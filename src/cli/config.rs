//! `plait config`: one's defaults, from the user config and the repository config, which
//! `plait run` and `plait plan --check` merge under the plan (`ops::config`).

use std::path::Path;

use clap::Args;

use super::ui::outln;
use super::CommandError;

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
    let ctx = super::context(dir)?;
    let config = plait::ops::config::config(&ctx)?;
    if config.layers.is_empty() {
        outln!(
            "no config files; plait looks for {} and {}",
            config
                .user
                .map_or("$XDG_CONFIG_HOME/plait/config.toml".to_string(), |p| p
                    .display()
                    .to_string()),
            config.repo.display()
        )?;
        return Ok(());
    }
    for layer in &config.layers {
        outln!("# from {}", layer.source.display())?;
    }
    let text = toml::to_string(&config.merged)
        .map_err(|e| CommandError::internal("cannot show the config").because(e))?;
    outln!("{}", text.trim_end())
}
