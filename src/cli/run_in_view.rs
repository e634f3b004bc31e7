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
             agent in its whole-tree view, from inside the task (see \
             docs/src/agents-commands.md)"
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
        let base = var("PLAIT_BASE").map(|b| b.to_string_lossy().into_owned());
        let owned = var("PLAIT_OWNED").map(PathBuf::from);
        let filled = base
            .ok_or_else(|| "PLAIT_BASE is not set".to_string())
            .and_then(|base| plait_trees::workspace::view::fill(&worktree, &base, owned.as_deref()))
            .and_then(|()| {
                marker.map_or(Ok(()), |m| plait_trees::workspace::view::mark_filled(&m))
            });
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
