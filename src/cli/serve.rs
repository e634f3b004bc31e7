//! `plait serve`: the review page of the repository's runs, in the browser.

use std::path::Path;

use clap::Args;

use super::ui::{errln, outln};
use super::CommandError;
use plait_core::cancel::Cancel;
use plait_serve::{self, ServeSettings};

/// The port `plait serve` takes unless told another.
const DEFAULT_PORT: u16 = 7410;

/// Review runs in the browser: tasks, verdicts, checks, diffs, live progress, decisions
#[derive(Debug, Args)]
#[command(after_help = "\
Serves on 127.0.0.1 only and prints the page's URL on stdout. The page lists the runs and,
for a run, its tasks with their state, verdict, checks, tokens and cost, the gate, each
task's diff and transcript; it follows a run in progress as it goes. Accept, reject, send
back with a comment, and land run the matching plait commands. The same data is JSON under
/api/ (see docs/src/serve.md).

Examples:
  plait serve --open
  plait serve 0abc12 --port 0     # a free port")]
pub struct ServeArgs {
    /// The run the page opens on (default: the list of runs)
    pub run: Option<String>,
    /// The port on 127.0.0.1 (0: a free one)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Open the page in the default browser
    #[arg(long)]
    pub open: bool,
}

pub fn cmd_serve(dir: &Path, args: ServeArgs) -> Result<(), CommandError> {
    let context = super::context(dir)?;
    let run = match &args.run {
        Some(run) => Some(context.store().find(Some(run))?),
        None => None,
    };
    let token = plait_serve::new_token()
        .map_err(|e| CommandError::internal("cannot make the server's token").because(e))?;
    let settings = ServeSettings {
        context,
        run: run.clone(),
        token,
    };
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let listener = plait_serve::bind(args.port).await.map_err(|e| {
            CommandError::usage(format!(
                "--port {}: cannot listen on 127.0.0.1:{}: {e}",
                args.port, args.port
            ))
            .hint("--port 0 takes a free port")
        })?;
        let port = listener
            .local_addr()
            .map_err(|e| CommandError::internal("cannot read the server's address").because(e))?
            .port();
        let url = match &run {
            Some(run) => format!("http://127.0.0.1:{port}/#/runs/{run}"),
            None => format!("http://127.0.0.1:{port}/"),
        };
        outln!("{url}")?;
        errln!("serving the review page at {url} (127.0.0.1 only); Ctrl-C stops");
        if args.open {
            open_browser(&url);
        }
        let (interrupt, cancel) = Cancel::new();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            let _ = interrupt.send(true);
        });
        plait_serve::serve(listener, settings, cancel)
            .await
            .map_err(|e| CommandError::internal("the server stopped").because(e))
    })
}

/// Asks the desktop to open `url`; says so when it cannot.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let started = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if started.is_err() {
        errln!("warning: cannot open a browser ({opener} is not here); open {url} yourself");
    }
}
