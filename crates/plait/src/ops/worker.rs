//! Serving as a worker: the use case behind `plait worker`. A worker takes tasks of runs
//! spread over many machines from their PostgreSQL store, runs them in clones of its own
//! (one per remote) and pushes their branches back, until it is stopped or has had nothing
//! to take for a while. It works in no repository of the user's, so it takes no
//! [`Context`](plait_stages::context::Context): its request carries the environment and program a
//! context would.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;

use plait_core::cancel::Cancel;
use plait_run::orchestrator::worker::{self, WorkerReport, WorkerSettings};
use plait_run::orchestrator::Update;
use plait_stages::context::{cache_home, Env};

use super::OpsError;

/// What a worker is asked.
pub struct WorkRequest {
    /// The store, connected to already.
    pub store: tokio_postgres::Config,
    /// The git remote as this machine reaches it (a local path is read against `cwd`);
    /// default: the one each run was started with.
    pub remote: Option<String>,
    /// Where the clones are kept; default: `plait/worker` under the user's cache.
    pub dir: Option<PathBuf>,
    /// Tasks at once.
    pub jobs: usize,
    /// How long a claim holds without a heartbeat.
    pub lease: Duration,
    /// Stop once there has been nothing to take for this long.
    pub idle_exit: Option<Duration>,
    /// The directory a relative remote path is read against.
    pub cwd: PathBuf,
    /// This machine's name, which the worker's claims carry with its process id.
    pub host: String,
    /// The environment the runs' plans resolve their variables (and API keys) from.
    pub env: Env,
    /// The plait program the agents' hooks call back.
    pub program: PathBuf,
}

/// Told a worker's name and its clones' directory.
pub(crate) type OnStart = Box<dyn FnOnce(&str, &std::path::Path) + Send>;

/// How a worker is followed and stopped.
pub struct WorkerWatch {
    /// Told the worker's name and clones' directory once it is about to take tasks.
    pub started: Option<OnStart>,
    /// Every change of state of the tasks it takes.
    pub updates: Option<mpsc::UnboundedSender<Update>>,
    /// The running tasks end at a boundary, their work pushed and their claims given back,
    /// when this fires.
    pub cancel: Cancel,
}

/// Works as the request says until stopped (see the module's doc).
pub async fn work(request: WorkRequest, watch: WorkerWatch) -> Result<WorkerReport, OpsError> {
    let dir = match request.dir {
        Some(dir) => std::path::absolute(&dir).unwrap_or(dir),
        None => cache_home(&*request.env)
            .map(|d| d.join("plait").join("worker"))
            .ok_or(OpsError::NoWorkerDir)?,
    };
    let remote = request
        .remote
        .map(|r| plait_store::remote::normalize(&r, &request.cwd));
    let settings = WorkerSettings {
        store: request.store,
        remote,
        dir,
        jobs: request.jobs,
        lease: request.lease,
        name: format!("{}:{}", request.host, std::process::id()),
        only: None,
        known: None,
        env: request.env,
        plait_program: request.program,
        idle_exit: request.idle_exit,
    };
    if let Some(started) = watch.started {
        started(&settings.name, &settings.dir);
    }
    Ok(worker::serve(settings, watch.updates, watch.cancel).await?)
}
