//! Where the command line writes: every line plait prints goes through these macros. A
//! closed stdout (`plait diff RUN merged | head -1`) is a normal end for a command line
//! tool: the write returns `Kind::BrokenPipe` and the command ends quietly with exit 0, as
//! ripgrep's does. stderr is best effort: a closed stderr is not worth failing a run for.
//! Long text for a terminal goes through the user's pager, chosen as git chooses it.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use super::CommandError;

/// Writes `text` to stdout as it is; a closed pipe ends the command quietly.
pub fn write_out(text: &str) -> Result<(), CommandError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(CommandError::from_write)
}

/// Writes `text` to stderr as it is, ignoring failure.
pub fn write_err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

/// Writes `text` through `pager` (a shell command, as git runs `core.pager`), or straight
/// to stdout without one or when it cannot start. Like git, it sets `LESS=FRX` and `LV=-c`
/// when they are unset, so `less` leaves a short text on the screen and keeps colours.
pub fn page(text: &str, pager: Option<&str>) -> Result<(), CommandError> {
    let Some(pager) = pager else {
        return write_out(text);
    };
    let mut command = Command::new("sh");
    command.args(["-c", pager]).stdin(Stdio::piped());
    for (name, value) in [("LESS", "FRX"), ("LV", "-c")] {
        if std::env::var_os(name).is_none() {
            command.env(name, value);
        }
    }
    let Ok(mut child) = command.spawn() else {
        return write_out(text);
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A pager quit before the end (`q` in less) closes the pipe: a normal end.
        let _ = stdin.write_all(text.as_bytes());
    }
    let _ = child.wait();
    Ok(())
}

/// The pager git would use in `dir` (`GIT_PAGER`, `core.pager`, `PAGER`, then `less`), as
/// `git var GIT_PAGER` says with the variables that choose it taken from `env` (the pager
/// ones, and where git finds the user's and the system's config); `None` for no pager
/// (`cat`, empty, or git not answering).
pub fn pager(dir: &Path, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let mut command = Command::new("git");
    command.args(["var", "GIT_PAGER"]).current_dir(dir);
    for name in [
        "GIT_PAGER",
        "PAGER",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_NOSYSTEM",
    ] {
        match env(name) {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let out = command.stderr(Stdio::null()).output().ok()?;
    let pager = String::from_utf8(out.stdout).ok()?.trim().to_string();
    let none = !out.status.success() || pager.is_empty() || pager == "cat";
    (!none).then_some(pager)
}

/// `println!` to stdout that returns `Result<(), CommandError>` instead of panicking.
macro_rules! outln {
    () => { $crate::cli::ui::write_out("\n") };
    ($($arg:tt)*) => { $crate::cli::ui::write_out(&format!("{}\n", format_args!($($arg)*))) };
}

/// `print!` to stdout that returns `Result<(), CommandError>` instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::ui::write_out(&format!($($arg)*)) };
}

/// `eprintln!` that never panics.
macro_rules! errln {
    () => { $crate::cli::ui::write_err("\n") };
    ($($arg:tt)*) => { $crate::cli::ui::write_err(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that never panics.
macro_rules! err {
    ($($arg:tt)*) => { $crate::cli::ui::write_err(&format!($($arg)*)) };
}

pub(crate) use {err, errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    /// The pager `pager` picks in a new repository whose `core.pager` is `core`, with
    /// `vars` the only pager variables set.
    fn picked(core: Option<&str>, vars: &[(&str, &str)]) -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        if let Some(core) = core {
            git(&["config", "core.pager", core]);
        }
        let env = |name: &str| {
            let hermetic = [
                ("GIT_CONFIG_GLOBAL", "/dev/null"),
                ("GIT_CONFIG_NOSYSTEM", "1"),
            ];
            (vars.iter().chain(&hermetic))
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        };
        pager(dir.path(), &env)
    }

    #[test]
    fn the_pager_is_chosen_as_git_chooses_it() {
        assert_eq!(picked(None, &[]).as_deref(), Some("less"));
        assert_eq!(picked(None, &[("PAGER", "more")]).as_deref(), Some("more"));
        let core = Some("most");
        assert_eq!(picked(core, &[("PAGER", "more")]).as_deref(), Some("most"));
        let all = [("PAGER", "more"), ("GIT_PAGER", "pg")];
        assert_eq!(picked(core, &all).as_deref(), Some("pg"));
        assert_eq!(picked(core, &[("GIT_PAGER", "cat")]), None);
        assert_eq!(picked(None, &[("GIT_PAGER", "")]), None);
    }
}
