//! `plait doctor`: the walls of a task, tried on this machine.

use clap::Args;

use super::ui::{errln, outln};
use super::CommandError;

/// Test the walls on this machine: which Landlock ABI, namespaces and seccomp hold, then,
/// from behind a task's walls, a write outside, a read of a file planted in the home, a TCP
/// connection, a UDP datagram, a UNIX socket served outside and a signal to a process
/// outside; then plait's own code against a task's moves: a link swapped under its editor
/// tool, links a check planted in its layer, paths climbing out through its gateway. Each
/// shown refused or not (exit 0: every one refused; 1: one was not)
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  plait doctor
  plait doctor --json | jq '.probes[] | select(.refused | not)'")]
pub struct DoctorArgs {
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// (internal) the probe run behind the walls: KIND TARGET
    #[arg(long, num_args = 2, value_names = ["KIND", "TARGET"], hide = true)]
    pub probe: Option<Vec<String>>,
}

pub fn cmd_doctor(args: DoctorArgs) -> Result<(), CommandError> {
    if let Some(probe) = &args.probe {
        let (kind, target) = (&probe[0], &probe[1]);
        return match plait::ops::doctor::probe(kind, target) {
            Ok(said) => {
                errln!("{said}");
                Ok(())
            }
            Err(why) => {
                errln!("refused: {why}");
                std::process::exit(1)
            }
        };
    }
    let plait = super::plait_program()?;
    let runtime = super::runtime()?;
    let request = plait::ops::doctor::DoctorRequest {
        program: &plait,
        home: std::env::var_os("HOME").map(std::path::PathBuf::from),
    };
    let report = runtime.block_on(plait::ops::doctor::doctor(request))?;
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        )?;
    } else {
        let said = |r: &Result<(), String>| match r {
            Ok(()) => "yes".to_string(),
            Err(why) => format!("no ({why})"),
        };
        outln!("Landlock: {}", report.landlock)?;
        outln!(
            "user and mount namespaces (views over layers): {}",
            said(&report.views)
        )?;
        outln!(
            "a network namespace per process: {}",
            said(&report.network_namespace)
        )?;
        outln!("a task's walls here: {}", report.walls)?;
        outln!(
            "git behind them reads a .git/config holding credentials: {}",
            report.git_config
        )?;
        outln!()?;
        let width = report
            .probes
            .iter()
            .map(|p| p.what.len())
            .max()
            .unwrap_or(0);
        for probe in &report.probes {
            let verdict = if probe.refused {
                "refused"
            } else {
                "NOT REFUSED"
            };
            let detail = if probe.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", probe.detail)
            };
            outln!("{:<width$}  {verdict}{detail}", probe.what)?;
        }
    }
    if report.holds() {
        Ok(())
    } else {
        Err(
            CommandError::attention("some of the walls do not hold on this machine (see above)")
                .hint("docs/src/isolation.md: what each wall needs of the kernel"),
        )
    }
}
