//! One's defaults: the user config and the repository config, which `plait run` and `plait
//! plan --check` merge under the plan ([`with_config`]), shown by `plait config`
//! ([`config`]).

use std::path::{Path, PathBuf};

use plait_plan::config::{self, Layer};
use plait_stages::context::Context;

use super::OpsError;

/// Where the config files are looked for, and what they give.
pub struct Config {
    /// The user config's path, if `XDG_CONFIG_HOME` or `HOME` says where it is.
    pub user: Option<PathBuf>,
    /// The repository config's path (`.plait.toml` at the checkout's root).
    pub repo: PathBuf,
    /// The files that exist, lowest first.
    pub layers: Vec<Layer>,
    /// What they give a plan, merged (empty without files).
    pub merged: toml::Table,
}

/// The config files of the context's repository and user, read and merged.
pub fn config(ctx: &Context) -> Result<Config, OpsError> {
    let (user, repo) = places(ctx);
    let layers = read(user.iter().chain([&repo]))?;
    let merged = config::merged_layers(&layers);
    Ok(Config {
        user,
        repo,
        layers,
        merged,
    })
}

/// The plan `text` from `path` with the config files merged under it.
pub fn with_config(ctx: &Context, path: &Path, text: &str) -> Result<String, OpsError> {
    let (user, repo) = places(ctx);
    let layers = read(user.iter().chain([&repo]))?;
    Ok(config::merged_plan(text, path, &layers)?)
}

/// The user config's path (if `HOME` or `XDG_CONFIG_HOME` says where it is) and the
/// repository config's.
fn places(ctx: &Context) -> (Option<PathBuf>, PathBuf) {
    let user = ctx
        .var("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| ctx.var("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|base| base.join("plait/config.toml"));
    (user, ctx.workdir().join(".plait.toml"))
}

/// The config files of `paths` that exist, parsed.
fn read<'p>(paths: impl Iterator<Item = &'p PathBuf>) -> Result<Vec<Layer>, OpsError> {
    let mut layers = Vec::new();
    for path in paths {
        match std::fs::read_to_string(path) {
            Ok(text) => layers.push(Layer::parse(&text, path)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(OpsError::ConfigUnreadable {
                    path: path.clone(),
                    source,
                })
            }
        }
    }
    Ok(layers)
}
