//! `plait completions`: shell completion through `clap_complete`'s dynamic engine, so that
//! a run's place offers the repository's run ids and a task's place the ids of the run named
//! before it. The shell script `plait completions SHELL` prints calls plait back at each
//! TAB (`COMPLETE=SHELL plait -- WORDS`), which [`complete_if_asked`] answers before
//! anything else runs; `--static` prints the script of commands and flags alone, made once
//! from the same definitions that parse the command line.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory as _};
use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use clap_complete::env::EnvCompleter;
use clap_complete::Shell;

use super::ui::out;
use super::{Cli, CommandError};
use plait_core::state::Store;

/// The variable that asks plait for completions (clap_complete's default).
const VAR: &str = "COMPLETE";

/// Print the completion script for a shell
#[derive(Debug, Args)]
#[command(after_help = "\
At each TAB the script asks plait, which offers the repository's run ids where a run goes
and the run's task ids where a task goes (RUN may be a unique prefix).

Examples:
  plait completions bash > ~/.local/share/bash-completion/completions/plait
  plait completions zsh > ~/.zfunc/_plait      # with fpath+=(~/.zfunc) before compinit
  plait completions fish > ~/.config/fish/completions/plait.fish
  plait completions elvish >> ~/.config/elvish/rc.elv
  plait completions powershell >> $PROFILE
  source <(COMPLETE=bash plait)                # the same, without a file")]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell
    #[arg(value_enum)]
    pub shell: Shell,
    /// Print a script that completes commands and flags only, without calling plait
    #[arg(long = "static")]
    pub fixed: bool,
}

pub fn cmd_completions(args: CompletionsArgs) -> Result<(), CommandError> {
    let mut script = Vec::new();
    if args.fixed {
        clap_complete::generate(args.shell, &mut Cli::command(), "plait", &mut script);
    } else {
        let bin = "plait";
        registration(args.shell)
            .write_registration(VAR, bin, bin, bin, &mut script)
            .map_err(|e| CommandError::internal("cannot write the completion script").because(e))?;
    }
    out!("{}", String::from_utf8_lossy(&script))
}

/// The dynamic engine's side of `shell`.
fn registration(shell: Shell) -> &'static dyn EnvCompleter {
    match shell {
        Shell::Bash => &clap_complete::env::Bash,
        Shell::Zsh => &clap_complete::env::Zsh,
        Shell::Fish => &clap_complete::env::Fish,
        Shell::Elvish => &clap_complete::env::Elvish,
        // PowerShell, and any shell clap_complete adds later.
        _ => &clap_complete::env::Powershell,
    }
}

/// Answers the shell and exits when plait was started to complete a command line
/// (`COMPLETE=SHELL plait -- WORDS`, from the script); returns at once otherwise.
pub fn complete_if_asked() {
    clap_complete::CompleteEnv::with_factory(command)
        .var(VAR)
        .bin("plait")
        .complete();
}

/// What a command's task argument takes besides the run's tasks.
#[derive(Clone, Copy)]
struct Takes {
    /// A group (`group-<k>`): `accept`, `reject`, `diff`, `review --task`.
    groups: bool,
    /// `merged`, the run's whole result: `diff`.
    merged: bool,
    /// With no run named, the newest run's tasks: `log`'s first name.
    newest: bool,
}

impl Takes {
    fn of(command: &str) -> Takes {
        Takes {
            groups: matches!(command, "accept" | "reject" | "diff" | "review"),
            merged: command == "diff",
            newest: false,
        }
    }
}

/// plait's command line with a completer on every run and task argument: each subcommand's
/// `run` offers run ids, its `task` and `tasks` the named run's task ids (and what else the
/// command takes there, [`Takes`]); `log`'s first name, which may be a task of the newest
/// run, both.
fn command() -> clap::Command {
    let mut cli = Cli::command();
    let names: Vec<String> = cli
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        let takes = Takes::of(&name);
        let log = name == "log";
        cli = cli.mut_subcommand(&name, |sub| {
            let ids: Vec<String> = sub
                .get_arguments()
                .map(|a| a.get_id().to_string())
                .collect();
            ids.iter().fold(sub, |sub, id| match id.as_str() {
                "run" => sub.mut_arg(id, |a| {
                    a.add(ArgValueCompleter::new(move |now: &OsStr| {
                        let mut found = run_ids(now);
                        if log {
                            let newest = Takes {
                                newest: true,
                                ..takes
                            };
                            found.extend(task_ids(now, newest));
                        }
                        found
                    }))
                }),
                "task" | "tasks" => sub.mut_arg(id, |a| {
                    a.add(ArgValueCompleter::new(move |now: &OsStr| {
                        task_ids(now, takes)
                    }))
                }),
                _ => sub,
            })
        });
    }
    cli
}

/// The repository's run ids that start with `now`, newest first.
fn run_ids(now: &OsStr) -> Vec<CompletionCandidate> {
    let Some(store) = store() else {
        return Vec::new();
    };
    let now = now.to_string_lossy();
    let mut ids = store.list().unwrap_or_default();
    ids.retain(|id| id.starts_with(now.as_ref()));
    ids.reverse();
    ids.into_iter().map(CompletionCandidate::new).collect()
}

/// The ids of the tasks that start with `now` of the run named earlier on the command line
/// (or of the newest run, when `takes.newest` and none is), each with its state; then its
/// groups and `merged` where the command `takes` them.
fn task_ids(now: &OsStr, takes: Takes) -> Vec<CompletionCandidate> {
    let Some(store) = store() else {
        return Vec::new();
    };
    let named = earlier_run();
    if named.is_none() && !takes.newest {
        return Vec::new();
    }
    let Ok(state) = store
        .find(named.as_deref())
        .and_then(|run| store.load(&run))
    else {
        return Vec::new();
    };
    let tasks = state
        .tasks
        .iter()
        .map(|t| (t.id.as_str(), t.state.as_str()));
    let groups = state
        .groups
        .iter()
        .filter(|_| takes.groups)
        .map(|g| (g.id.as_str(), "group"));
    let merged = takes.merged.then_some(("merged", "the run's whole result"));
    let now = now.to_string_lossy();
    tasks
        .chain(groups)
        .chain(merged)
        .filter(|(id, _)| id.starts_with(now.as_ref()))
        .map(|(id, what)| CompletionCandidate::new(id).help(Some(what.into())))
        .collect()
}

/// The run store of the repository the command line is in (`-C DIR`, else here).
fn store() -> Option<Store> {
    let dir = words_before().1.unwrap_or_else(|| PathBuf::from("."));
    let context = plait_stages::context::Context::open(
        Path::new(&dir),
        plait_stages::context::process_env(),
        PathBuf::new(),
    );
    Some(context.ok()?.store().clone())
}

/// The run named before the word being completed, if one is.
fn earlier_run() -> Option<String> {
    words_before().0
}

/// What the words before the one being completed say: the subcommand's `run` and `-C`.
/// The shell's words follow `--` in plait's own arguments; bash, zsh and elvish say which
/// is being completed in `_CLAP_COMPLETE_INDEX`, fish and PowerShell end with it.
fn words_before() -> (Option<String>, Option<PathBuf>) {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Some(start) = args.iter().position(|a| a == "--") else {
        return (None, None);
    };
    let mut words = args[start + 1..].to_vec();
    let index = std::env::var("_CLAP_COMPLETE_INDEX")
        .ok()
        .and_then(|i| i.parse::<usize>().ok())
        .unwrap_or(words.len().saturating_sub(1));
    words.truncate(index);
    let Ok(matches) = Cli::command()
        .ignore_errors(true)
        .try_get_matches_from(words)
    else {
        return (None, None);
    };
    let dir = matches
        .try_get_one::<PathBuf>("dir")
        .ok()
        .flatten()
        .cloned();
    let run = matches
        .subcommand()
        .and_then(|(_, sub)| sub.try_get_one::<String>("run").ok().flatten().cloned());
    (run, dir)
}
