//! The `plait` binary: the command line (`cli`), the only layer that prints, reads the
//! environment and picks exit codes, over the engine (the `plait` crate) and the review
//! page (`plait-serve`).

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
