//! The tools' caches under the home (npm's, cargo's registry and its locks, pyenv's shims,
//! `~/.cache/*`, …), written by every build and install a task runs. Shared, one task's
//! writes would be what the next task's build trusts; refused, each tool says so in every
//! task's record although it needed nothing from the write. So a process that starts in a
//! view sees each cache through an overlay whose upper layer is its sandbox's own: reads
//! see the user's cache as it is, writes land in the sandbox's layer and go with it.
//!
//! The agent CLIs' state directories (`super::homes`) are layered the same way, their
//! credentials hidden in the layer.
//!
//! A cache directory that holds a place the sandbox names (the view, the worktrees under
//! `~/.cache/plait`, a `writable` path, the temporary root) is not covered whole: its other
//! subdirectories are, one by one.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::view::{CacheLayer, Layer};

/// Directories under the home that tools write as caches, stores or shims.
const HOME_CACHES: &[&str] = &[
    ".cache",
    ".npm",
    ".yarn",
    ".pnpm-store",
    ".bun",
    ".deno",
    ".node-gyp",
    ".nvm",
    ".volta",
    ".cargo",
    ".rustup",
    ".pyenv",
    ".local/share",
    ".local/state",
    ".gradle",
    ".m2",
    ".ivy2",
    ".sbt",
    "go",
    ".gem",
    ".bundle",
    ".composer",
    ".nuget",
    ".pub-cache",
    ".cabal",
    ".stack",
    ".opam",
    ".mix",
    ".hex",
    ".julia",
    ".conda",
    ".ccache",
    ".ipython",
    ".jupyter",
];

/// The caches made empty in a home that lacks them.
const MADE: &[&str] = &[".cache", ".npm"];

/// Variables that move a tool's cache or home elsewhere.
const CACHE_VARS: &[&str] = &[
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "npm_config_cache",
    "NPM_CONFIG_CACHE",
    "YARN_CACHE_FOLDER",
    "PNPM_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "VOLTA_HOME",
    "NVM_DIR",
    "PIP_CACHE_DIR",
    "UV_CACHE_DIR",
    "POETRY_CACHE_DIR",
    "PYENV_ROOT",
    "GOPATH",
    "GOMODCACHE",
    "GOCACHE",
    "GRADLE_USER_HOME",
    "CCACHE_DIR",
    "SCCACHE_DIR",
];

/// The cache directories of this machine that exist, each once, none inside another,
/// found once per process.
pub(crate) fn candidates() -> &'static [PathBuf] {
    static FOUND: OnceLock<Vec<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(home) = &home {
            // The caches nearly every toolchain writes, made empty where a home lacks them
            // (a fresh account, a CI job's home): a tool making one itself would be refused.
            for made in MADE {
                let dir = home.join(made);
                if home.is_dir() && !dir.exists() {
                    let _ = std::fs::create_dir(&dir);
                }
            }
            dirs.extend(HOME_CACHES.iter().map(|c| home.join(c)));
        }
        // The agent CLIs' homes, made empty where the user has none (a CLI makes its own at
        // start, which the walls would refuse).
        super::homes::make_missing(cli_homes());
        dirs.extend(cli_homes().iter().map(|h| h.dir.clone()));
        dirs.extend(
            CACHE_VARS
                .iter()
                .filter_map(std::env::var_os)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute()),
        );
        normalize(dirs, home.as_deref())
    })
}

/// The agent CLIs' homes of this machine, found once per process.
fn cli_homes() -> &'static [super::homes::CliHome] {
    static FOUND: OnceLock<Vec<super::homes::CliHome>> = OnceLock::new();
    FOUND.get_or_init(super::homes::of_this_machine)
}

/// `dirs` that are directories, resolved, never the home or `/` itself, each once, and none
/// inside another.
fn normalize(dirs: Vec<PathBuf>, home: Option<&Path>) -> Vec<PathBuf> {
    let home = home.and_then(|h| h.canonicalize().ok());
    let mut found: Vec<PathBuf> = dirs
        .into_iter()
        .filter_map(|d| d.canonicalize().ok())
        .filter(|d| d.is_dir() && d.parent().is_some() && Some(d) != home.as_ref())
        .collect();
    found.sort();
    found.dedup();
    let all = found.clone();
    found.retain(|d| !all.iter().any(|o| o != d && d.starts_with(o)));
    found
}

/// Each path of `paths`, and its resolved form where that differs.
fn resolved(paths: &[&Path]) -> Vec<PathBuf> {
    paths
        .iter()
        .flat_map(|p| {
            let real = p.canonicalize().ok();
            std::iter::once(p.to_path_buf()).chain(real)
        })
        .collect()
}

/// The caches to cover for processes that must keep `keep` (the sandbox's places) as they
/// are, and whose temporary root `temp` no cache may hold: each candidate that neither
/// holds nor lies in one of `keep` and does not hold `temp`, and the subdirectories of one
/// that holds one.
pub(crate) fn covered(candidates: &[PathBuf], keep: &[&Path], temp: &Path) -> Vec<PathBuf> {
    let kept = resolved(keep);
    let held = resolved(&[temp]);
    let holds = |d: &Path| kept.iter().chain(&held).any(|k| k.starts_with(d));
    let inside = |d: &Path| kept.iter().any(|k| d.starts_with(k));
    let mut out = Vec::new();
    for dir in candidates {
        if inside(dir) {
            continue;
        }
        if !holds(dir) {
            out.push(dir.clone());
            continue;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut subdirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .filter(|d| !holds(d) && !inside(d))
            .collect();
        subdirs.sort();
        out.extend(subdirs);
    }
    out
}

/// Layers for the caches of this machine under a new directory in `temp_root`, for
/// processes that must keep `keep` as they are. Nothing when no layer can be made there.
pub(crate) fn layers(
    temp_root: &Path,
    keep: &[&Path],
    walled_reads: bool,
) -> (Option<LayerRoot>, Vec<CacheLayer>) {
    let dirs = covered(candidates(), keep, temp_root);
    layers_of(dirs, temp_root, walled_reads)
}

/// [`layers`] for the agent CLIs' homes alone (see `super::homes`), for processes that
/// start in no view.
pub(crate) fn cli_layers(
    temp_root: &Path,
    keep: &[&Path],
    walled_reads: bool,
) -> (Option<LayerRoot>, Vec<CacheLayer>) {
    static FOUND: OnceLock<Vec<PathBuf>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        super::homes::make_missing(cli_homes());
        let dirs = cli_homes().iter().map(|h| h.dir.clone()).collect();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        normalize(dirs, home.as_deref())
    });
    let dirs = covered(found, keep, temp_root);
    layers_of(dirs, temp_root, walled_reads)
}

/// A layer for each of `dirs` under a new directory in `temp_root`.
fn layers_of(
    dirs: Vec<PathBuf>,
    temp_root: &Path,
    walled_reads: bool,
) -> (Option<LayerRoot>, Vec<CacheLayer>) {
    if dirs.is_empty() {
        return (None, Vec::new());
    }
    let Ok(root) = tempfile::Builder::new()
        .prefix("plait-caches-")
        .tempdir_in(temp_root)
    else {
        return (None, Vec::new());
    };
    let root = LayerRoot(root.keep());
    let mut layers = Vec::with_capacity(dirs.len());
    for (i, dir) in dirs.into_iter().enumerate() {
        let layer = Layer {
            upper: root.0.join(format!("{i}/upper")),
            work: root.0.join(format!("{i}/work")),
        };
        if std::fs::create_dir_all(&layer.upper).is_ok()
            && std::fs::create_dir_all(&layer.work).is_ok()
        {
            let rules = match walled_reads {
                true => readable_in(&dir, &layer.upper),
                false => vec![dir.clone()],
            };
            if !rules.is_empty() {
                layers.push(CacheLayer { dir, layer, rules });
            }
        }
    }
    (Some(root), layers)
}

/// Where, in the cache `dir` seen through an overlay whose upper layer is `upper`, a process
/// whose reads are walled may read and write: `dir` whole when it is one of the home's
/// toolchains and caches (see [`super::reads`]) or lies outside the home (a cache a variable
/// names), the files in it that hold secrets hidden by whiteouts in `upper`; else (a
/// `~/.cache`, a `~/.local/share`) only the toolchains' and caches' directories in it, made
/// in `upper` where the user has none yet.
fn readable_in(dir: &Path, upper: &Path) -> Vec<PathBuf> {
    // The agent CLIs' credentials are hidden wherever their homes lie; a CLI's home is its
    // to read and write whole, and so is each one inside a cache read only in parts.
    let Some(clis) = super::homes::hide_credentials(dir, upper, cli_homes()) else {
        return Vec::new();
    };
    if cli_homes()
        .iter()
        .any(|h| h.dir.canonicalize().ok().as_deref() == Some(dir))
    {
        return vec![dir.to_path_buf()];
    }
    let mut rules = in_cache(dir, upper);
    if !rules.iter().any(|r| r == dir) {
        rules.extend(clis);
    }
    rules
}

/// [`readable_in`] for a cache that is no agent CLI's home.
fn in_cache(dir: &Path, upper: &Path) -> Vec<PathBuf> {
    let Some(home) = std::env::var_os("HOME")
        .map(PathBuf::from)
        .and_then(|h| h.canonicalize().ok())
    else {
        return vec![dir.to_path_buf()];
    };
    let Ok(relative) = dir.strip_prefix(&home) else {
        return vec![dir.to_path_buf()];
    };
    let relative = relative.to_string_lossy().to_string();
    let whole = super::reads::HOME_TOOLS
        .iter()
        .any(|t| relative == *t || relative.starts_with(&format!("{t}/")));
    if whole {
        for secret in super::reads::HOME_SECRETS {
            let Some(inside) = secret.strip_prefix(&format!("{relative}/")) else {
                continue;
            };
            if std::fs::symlink_metadata(dir.join(inside)).is_err() {
                continue;
            }
            let hidden = upper.join(inside);
            let made = hidden
                .parent()
                .is_some_and(|p| std::fs::create_dir_all(p).is_ok())
                && super::view::whiteout(&hidden).is_ok();
            if !made {
                // No way to hide it: the cache stays out of reach.
                return Vec::new();
            }
        }
        return vec![dir.to_path_buf()];
    }
    let mut rules = Vec::new();
    for tool in super::reads::HOME_TOOLS {
        let Some(inside) = tool.strip_prefix(&format!("{relative}/")) else {
            continue;
        };
        if dir.join(inside).is_dir() || std::fs::create_dir_all(upper.join(inside)).is_ok() {
            rules.push(dir.join(inside));
        }
    }
    rules
}

/// The directory of a sandbox's cache layers, removed with the sandbox (overlayfs leaves
/// its work directories without permissions, which a plain removal trips over).
#[derive(Debug)]
pub(crate) struct LayerRoot(PathBuf);

impl Drop for LayerRoot {
    fn drop(&mut self) {
        open_up(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                open_up(&entry.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_holding_a_place_is_covered_by_its_other_subdirectories() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        for d in [
            ".cache/pip",
            ".cache/plait/repo/tree",
            ".cache/uv",
            ".npm/_logs",
        ] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        let candidates = normalize(
            vec![
                home.join(".cache"),
                home.join(".npm"),
                home.join(".cache/uv"),
                home.clone(),
            ],
            Some(&home),
        );
        assert_eq!(candidates, vec![home.join(".cache"), home.join(".npm")]);
        let tree = home.join(".cache/plait/repo/tree");
        let temp = Path::new("/nonexistent-temp");
        let covered = covered(&candidates, &[tree.as_path()], temp);
        assert_eq!(
            covered,
            vec![
                home.join(".cache/pip"),
                home.join(".cache/uv"),
                home.join(".npm")
            ]
        );
        let npm_logs = home.join(".npm/_logs");
        let covered = super::covered(&candidates, &[tree.as_path(), npm_logs.as_path()], temp);
        assert!(!covered.contains(&home.join(".npm/_logs")), "{covered:?}");
        // A cache holding the temporary root is not covered (its other subdirectories are).
        let covered = super::covered(&candidates, &[tree.as_path()], &home.join(".npm/_logs"));
        assert!(!covered.contains(&home.join(".npm")), "{covered:?}");
        let covered = super::covered(&candidates, &[tree.as_path()], &home.join(".cache/uv"));
        assert_eq!(covered, vec![home.join(".cache/pip"), home.join(".npm")]);
    }
}
