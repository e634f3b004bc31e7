//! A run's environment in its logs: the use case behind `plait log --setup`. The logs of
//! its `[setup] run` commands and of the base's checks plait ran in its base layer, each
//! with its text.

use std::path::{Path, PathBuf};

use plait_stages::context::Context;

use super::OpsError;

/// A run's setup logs.
pub struct SetupLogs {
    /// The run's full id.
    pub run: String,
    /// The base layer it ran over, if it had one.
    pub layer: Option<String>,
    /// Each log, setup first then the base's checks, each kind in the order of its
    /// paths: what it is (`setup`, `base checks`), where it is, and its text.
    pub logs: Vec<(&'static str, PathBuf, String)>,
}

/// The setup logs of run `run` (default: the newest).
pub fn setup_logs(ctx: &Context, run: Option<&str>) -> Result<SetupLogs, OpsError> {
    let store = ctx.store();
    let id = store.find(run)?;
    let state = store.load(&id)?;
    let dir = store.run(&id).0;
    let mut logs = Vec::new();
    for (label, sub) in [
        ("setup", dir.join("setup")),
        ("base checks", dir.join("seed-checks")),
    ] {
        let mut found = Vec::new();
        files_under(&sub, &mut found);
        found.sort();
        for log in found {
            let text = plait_stages::report::logs::read_from(&log, 0).0;
            logs.push((label, log, text));
        }
    }
    Ok(SetupLogs {
        run: id,
        layer: state.environment.map(|env| env.layer),
        logs,
    })
}

/// Every file under `dir`, at any depth.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        match entry.file_type() {
            Ok(t) if t.is_dir() => files_under(&entry.path(), out),
            Ok(t) if t.is_file() => out.push(entry.path()),
            _ => {}
        }
    }
}
