//! Where the command line writes: every line plait prints goes through these macros. A
//! closed stdout (`plait diff RUN merged | head -1`) is a normal end for a command line
//! tool: the write returns `Kind::BrokenPipe` and the command ends quietly with exit 0, as
//! ripgrep's does. stderr is best effort: a closed stderr is not worth failing a run for.

use std::io::Write as _;

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
