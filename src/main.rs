//! The `plait` binary: everything lives in the library; the CLI module picks the exit code.

fn main() -> std::process::ExitCode {
    plait::cli::main()
}
