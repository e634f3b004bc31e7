//! Shared git for runs over many machines: a remote every machine reaches (any URL git can
//! push to: a path, ssh, https), with the git CLI as the transport. The coordinator puts
//! the base commit there; each worker fetches it into its own clone, pushes each claim's
//! work to a ref of that claim's own (`refs/plait/<run>/<task>/g<generation>`, so two
//! workers that raced for a task never overwrite each other), and the task branch
//! `plait/<run>/<task>` once its result is recorded; the coordinator fetches the winning
//! claim's ref, the one the store names. Pushes skip the repository's hooks: these are
//! plait's own refs, not the user's.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use plait_core::git::git_command;

/// Why the remote could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// A push was refused.
    #[error("cannot push {what} to remote `{remote}`: {stderr}; check that the remote exists and that this machine may push to it")]
    Push {
        /// The remote.
        remote: String,
        /// What was pushed.
        what: String,
        /// What git said.
        stderr: String,
    },
    /// A fetch failed.
    #[error("cannot fetch {what} from remote `{remote}`: {stderr}")]
    Fetch {
        /// The remote.
        remote: String,
        /// What was fetched.
        what: String,
        /// What git said.
        stderr: String,
    },
    #[error(
        "remote `{remote}` does not hold {what} after it was pushed there; check the remote's URL"
    )]
    /// The remote lacks what was pushed to it.
    Missing {
        /// The remote.
        remote: String,
        /// What it lacks.
        what: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// git could not be started.
    #[error("cannot run git: {0}")]
    Spawn(std::io::Error),
}

/// A remote as every machine should read it: a local path that exists is made absolute
/// (a worker runs elsewhere); URLs and `host:path` are left as they are.
pub fn normalize(remote: &str, cwd: &Path) -> String {
    let is_url = remote.contains("://");
    let scp_like = remote
        .split_once(':')
        .is_some_and(|(host, _)| !host.contains('/'));
    if is_url || scp_like {
        return remote.to_string();
    }
    let path = cwd.join(remote);
    match path.canonicalize() {
        Ok(path) => path.display().to_string(),
        Err(_) => remote.to_string(),
    }
}

/// Runs git in `dir` with `input` on its standard input; its stderr when it fails.
fn git(
    dir: &Path,
    args: &[&str],
    input: Option<&str>,
) -> Result<Result<String, String>, RemoteError> {
    let mut cmd = git_command(dir);
    cmd.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(RemoteError::Spawn)?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().map_err(RemoteError::Spawn)?;
    if out.status.success() {
        Ok(Ok(String::from_utf8_lossy(&out.stdout).into_owned()))
    } else {
        Ok(Err(String::from_utf8_lossy(&out.stderr).trim().to_string()))
    }
}

/// Pushes `refspecs` from the repository at `dir` to `remote`; `what` names them in errors.
pub fn push(dir: &Path, remote: &str, refspecs: &[String], what: &str) -> Result<(), RemoteError> {
    if refspecs.is_empty() {
        return Ok(());
    }
    let mut args = vec!["push", "--quiet", "--no-verify", "--porcelain", remote];
    args.extend(refspecs.iter().map(String::as_str));
    git(dir, &args, None)?
        .map(drop)
        .map_err(|stderr| RemoteError::Push {
            remote: remote.to_string(),
            what: what.to_string(),
            stderr,
        })
}

/// Fetches `refspecs` from `remote` into the repository at `dir` (given on standard input,
/// so ten thousand of them fit); `what` names them in errors.
pub fn fetch(dir: &Path, remote: &str, refspecs: &[String], what: &str) -> Result<(), RemoteError> {
    if refspecs.is_empty() {
        return Ok(());
    }
    let input = refspecs.join("\n") + "\n";
    git(
        dir,
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--stdin",
            remote,
        ],
        Some(&input),
    )?
    .map(drop)
    .map_err(|stderr| RemoteError::Fetch {
        remote: remote.to_string(),
        what: what.to_string(),
        stderr,
    })
}

/// Puts commit `base` on `remote` (under [`base_ref`](plait_core::refs::base_ref)) and
/// checks that it is there.
pub fn publish_base(dir: &Path, remote: &str, base: &str) -> Result<(), RemoteError> {
    let what = format!("the base commit {}", plait_core::git::short(base));
    let refname = plait_core::refs::base_ref(base);
    push(dir, remote, &[format!("{base}:{refname}")], &what)?;
    let listed =
        git(dir, &["ls-remote", remote, &refname], None)?.map_err(|stderr| RemoteError::Fetch {
            remote: remote.to_string(),
            what: what.clone(),
            stderr,
        })?;
    if listed.split_whitespace().next() != Some(base) {
        return Err(RemoteError::Missing {
            remote: remote.to_string(),
            what,
        });
    }
    Ok(())
}

/// The clone a worker keeps for `remote` under `root`, made (empty, without a checkout:
/// it holds only what the runs fetch) when there is none yet.
pub fn clone_for(root: &Path, remote: &str) -> Result<PathBuf, RemoteError> {
    use sha1::{Digest, Sha1};
    let digest = plait_core::hex::lower(&Sha1::digest(remote.as_bytes())[..8]);
    let dir = root.join(digest);
    if dir.join(".git").exists() {
        return Ok(dir);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RemoteError::Io { path, source }
    };
    std::fs::create_dir_all(root).map_err(io(root))?;
    let staging = root.join(format!(".new-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    git(&staging, &["init", "--quiet"], None)?.map_err(|stderr| RemoteError::Io {
        path: staging.clone(),
        source: std::io::Error::other(stderr),
    })?;
    std::fs::write(staging.join(".git").join("plait-remote"), remote).map_err(io(&staging))?;
    match std::fs::rename(&staging, &dir) {
        Ok(()) => Ok(dir),
        // Another worker on this machine made it first.
        Err(_) if dir.join(".git").exists() => {
            let _ = std::fs::remove_dir_all(&staging);
            Ok(dir)
        }
        Err(e) => Err(io(&dir)(e)),
    }
}
