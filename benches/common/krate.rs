//! A real crate for the benchmarks that build one: regex-syntax from the local cargo
//! registry (or a directory the caller names), made a git repository whose checks run
//! offline.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::git;

/// Where cargo keeps its registry: `CARGO_HOME`, else `~/.cargo`.
pub fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cargo"))
}

/// The crate to run on: `dir` when given, else the newest regex-syntax 0.8 in the registry.
pub fn find(dir: Option<String>) -> Result<PathBuf> {
    if let Some(dir) = dir {
        return Ok(PathBuf::from(dir));
    }
    let mut found = Vec::new();
    for index in std::fs::read_dir(cargo_home().join("registry/src"))? {
        for entry in std::fs::read_dir(index?.path())? {
            let path = entry?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.starts_with("regex-syntax-0.8") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
        .pop()
        .context("no regex-syntax-0.8.* in the cargo registry; name a crate with --crate DIR")
}

/// A git repository at `path` holding a copy of `krate`, its lockfile made offline
/// (optional dependencies the registry lacks taken out), `target/` ignored, one commit on
/// `main`.
pub fn repo(path: &Path, krate: &Path) -> Result<()> {
    let status = Command::new("cp").arg("-a").arg(krate).arg(path).status()?;
    if !status.success() {
        bail!("cannot copy {}", krate.display());
    }
    let manifest = path.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)?;
    let text = regex::Regex::new(r"(?m)^\[dependencies\.arbitrary\]\n(?:[^\[\n].*\n)*")?
        .replace_all(&text, "")
        .replace("arbitrary = [\"dep:arbitrary\"]\n", "");
    std::fs::write(&manifest, text)?;
    let _ = std::fs::remove_file(path.join("Cargo.lock"));
    let out = Command::new("cargo")
        .args(["generate-lockfile", "--offline"])
        .current_dir(path)
        .output()?;
    if !out.status.success() {
        bail!(
            "cargo generate-lockfile --offline: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::write(path.join(".gitignore"), "target/\n")?;
    git(path, &["init", "-q", "-b", "main"])?;
    git(path, &["add", "-A"])?;
    git(path, &["commit", "-q", "-m", "base"])?;
    Ok(())
}

/// The tracked `.rs` files under `src/`.
pub fn sources(repo: &Path) -> Result<Vec<String>> {
    let listed = git(repo, &["ls-files", "src"])?;
    Ok(listed
        .lines()
        .filter(|p| p.ends_with(".rs"))
        .map(str::to_string)
        .collect())
}
