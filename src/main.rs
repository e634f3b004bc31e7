//! The `plait` binary: the command line (`cli`), the only layer that prints, reads the
//! environment and picks exit codes, over the engine (the `plait` crate) and the review
//! page (`plait-serve`).

mod cli;

#[allow(unused_imports)]
use plait::*;
use plait_serve as serve;

fn main() -> std::process::ExitCode {
    cli::main()
}
