//! `plait completions`: the shell completion script of plait's commands and flags, made by
//! `clap_complete` from the same definitions that parse the command line.

use clap::{Args, CommandFactory as _};
use clap_complete::Shell;

use super::ui::out;
use super::{Cli, CommandError};

/// Print the completion script for a shell
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  plait completions bash > ~/.local/share/bash-completion/completions/plait
  plait completions zsh > ~/.zfunc/_plait      # with fpath+=(~/.zfunc) before compinit
  plait completions fish > ~/.config/fish/completions/plait.fish
  plait completions elvish >> ~/.config/elvish/rc.elv
  plait completions powershell >> $PROFILE")]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn cmd_completions(args: CompletionsArgs) -> Result<(), CommandError> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "plait", &mut script);
    out!("{}", String::from_utf8_lossy(&script))
}
