//! `plait run-in-view -- CMD`: an exec or `{ cli }` agent's way into its task's whole-tree
//! view, also given to agents as `$PLAIT_RUN_IN` (`$PLAIT_RUN_IN make test`).

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::ui::errln;

/// Run a command in this task's whole-tree view (for the commands an agent runs)
///
/// The command sees the whole repository at the task's base with the task's edits in place
/// of its owned files, inside the task's walls. An agent's processes already start in the
/// view where the system has overlays (then this only runs the command); elsewhere the
/// base's other files are written into the worktree first, once. Its exit status is the
/// command's. Outside a task (no `PLAIT_WORKTREE`) it refuses with exit 2.
#[derive(Debug, Args)]
pub struct RunInViewArgs {
    /// The command and its arguments
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

pub fn cmd_run_in_view(args: RunInViewArgs) -> ExitCode {
    // Inside a task's walls: the user's git config is out of reach.
    plait_core::git::without_user_config();
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let Some(worktree) = var("PLAIT_WORKTREE").map(PathBuf::from) else {
        errln!(
            "plait run-in-view: PLAIT_WORKTREE is not set; this runs the commands of a task's \
             agent in its whole-tree view, from inside the task (see README, \"Agents that \
             run commands\")"
        );
        return ExitCode::from(2);
    };
    if let Some(fd) = var(plait_sandbox::forward::FD_VAR) {
        return forwarded(&fd, &args.command);
    }
    // Where plait notes that the worktree holds the base's files: collect then takes a
    // deletion of one for a violation, and a later command need not walk the base again.
    let marker = var("PLAIT_SCRATCH")
        .and_then(|s| Some(PathBuf::from(s).parent()?.to_owned()))
        .map(|dir| plait_core::state::TaskDir(dir).view_filled());
    let filled_before = marker.as_ref().is_some_and(|m| m.exists());
    if var("PLAIT_VIEW").is_none_or(|v| v != "overlay") && !filled_before {
        let filled = fill(&worktree, var("PLAIT_BASE"), var("PLAIT_OWNED"))
            .and_then(|()| marker.map_or(Ok(()), |m| plait::workspace::view::mark_filled(&m)));
        if let Err(why) = filled {
            errln!(
                "plait run-in-view: cannot fill in the view in {}: {why}",
                worktree.display()
            );
            return ExitCode::from(3);
        }
    }
    let (program, rest) = args.command.split_first().expect("clap requires a command");
    let error = std::process::Command::new(program).args(rest).exec();
    errln!(
        "plait run-in-view: cannot run {}: {error}",
        program.to_string_lossy()
    );
    ExitCode::from(if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

/// Writes the base's files the worktree lacks into it, but never an owned one (those are
/// the task's, deleted ones included).
fn fill(
    worktree: &std::path::Path,
    base: Option<OsString>,
    owned: Option<OsString>,
) -> Result<(), String> {
    let base = base.ok_or("PLAIT_BASE is not set")?;
    let repo = git2::Repository::open(worktree).map_err(|e| e.message().to_string())?;
    let base = git2::Oid::from_str(&base.to_string_lossy()).map_err(|e| e.to_string())?;
    let tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(|e| e.message().to_string())?;
    let files = plait_core::git::flatten_tree(&tree).map_err(|e| e.message().to_string())?;
    let owned: std::collections::HashSet<String> = match owned {
        Some(list) => std::fs::read_to_string(&list)
            .map_err(|e| format!("{}: {e}", PathBuf::from(&list).display()))?
            .lines()
            .map(str::to_string)
            .collect(),
        None => Default::default(),
    };
    plait::workspace::view::materialize(&repo, &files, &|p| owned.contains(p), worktree).map(|_| ())
}

/// Has plait run the command in the view over the inherited way in (`PLAIT_VIEW_FD`), with
/// this process's standard streams, working directory and environment; exits with its
/// status.
fn forwarded(fd: &std::ffi::OsStr, command: &[OsString]) -> ExitCode {
    let Some(fd) = fd.to_str().and_then(|f| f.parse::<i32>().ok()) else {
        errln!("plait run-in-view: PLAIT_VIEW_FD is not a descriptor number");
        return ExitCode::from(3);
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    match plait_sandbox::forward::request(fd, &cwd, command, &env) {
        Ok(Ok(code)) => ExitCode::from(code.clamp(0, 255) as u8),
        Ok(Err(why)) => {
            errln!("plait run-in-view: {why}");
            ExitCode::from(126)
        }
        Err(e) => {
            errln!("plait run-in-view: cannot reach plait over PLAIT_VIEW_FD: {e}");
            ExitCode::from(3)
        }
    }
}
