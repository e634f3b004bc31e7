//! The use cases, called alike by the command line and the review page: run a plan,
//! resume a run, send a task back, decide on a task (accept, reject), land a run, check a
//! run or judge a hook's move, sync a run with its store, clean a run or the seed, plan
//! with a manager, serve as a worker, read the configuration, test the walls (`doctor`).
//!
//! Every case has one shape: `ops::<case>::<case>(&Context, Request) -> Result<Report,
//! OpsError>`, and runs the whole case (a run goes to its end; the caller follows it
//! through a [`running::Watch`]). The [`Context`](plait_stages::context::Context) is opened once by
//! the caller, and nothing below it opens the repository again. A case takes the same
//! locks and refusals whoever calls it and returns facts: it prints nothing, reads no
//! environment but the context's, and its errors carry no command-line words (the
//! command line's hints are its own; [`fault::Faulty`] says whose each failure is, for the
//! exit code and the HTTP status alike).

pub mod check;
pub mod clean;
pub mod config;
pub mod decide;
pub mod diff;
pub mod doctor;
pub mod fault;
pub mod hook;
pub mod land;
pub mod log;
pub mod manage;
pub mod resume;
pub mod run;
pub mod running;
pub mod send_back;
pub mod split;
pub mod steer;
pub mod sync;
pub mod worker;

pub use fault::{Fault, Faulty};

use plait_core::git::RepoError;
use plait_core::state::StateError;
use plait_plan::PlanError;
use plait_run::orchestrator::RunError;
use plait_stages::land::LandError;

/// Why a use case could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The run has finished: there is nothing to resume.
    #[error("run {run} has finished; there is nothing to resume")]
    Finished {
        /// The run.
        run: String,
    },
    /// The run has not finished, and what was asked needs it finished.
    #[error("run {run} has not finished")]
    NotFinished {
        /// The run.
        run: String,
    },
    /// The run's own plait process is still going.
    #[error("run {run} is still going (plait process {pid})")]
    Going {
        /// The run.
        run: String,
        /// The process id of the plait running it.
        pid: u32,
    },
    /// The run is in progress; `doing` waits for its end.
    #[error("run {run} is still in progress; {doing} when it has finished")]
    InProgress {
        /// The run.
        run: String,
        /// What was asked, as a verb phrase (`send a task back`).
        doing: &'static str,
    },
    /// A run holds the repository and may be using what was asked to go.
    #[error("run {run} is running (process {pid}) and may be using {what}")]
    InUse {
        /// The run.
        run: String,
        /// The process id of the plait running it.
        pid: u32,
        /// What was asked to go (`the seed and the views`).
        what: &'static str,
    },
    /// The run, or a group of it, has not merged yet.
    #[error("{}run {run} has not merged yet", if what == "run" { String::new() } else { format!("{what} of ") })]
    NotMerged {
        /// The run's id.
        run: String,
        /// `run`, or the group's id.
        what: String,
    },
    /// The run has no task (or group) of that id.
    #[error("run {run} has no task{} `{id}`", if *groups { " or group" } else { "" })]
    NoTask {
        /// The run.
        run: String,
        /// The id asked for.
        id: String,
        /// Whether the run has groups, which the id could have named.
        groups: bool,
    },
    /// The run is not going: nothing can be told or stopped in it.
    #[error("run {run} is not going ({phase}); only a going run's tasks can be steered")]
    NotGoing {
        /// The run.
        run: String,
        /// Where it is (`finished`, `interrupted`, …).
        phase: &'static str,
        /// What was asked (`tell a task`).
        doing: &'static str,
    },
    /// The run (or this use case) refused to steer the task, saying why.
    #[error("{0}")]
    Steer(String),
    /// The attempt asked for has not ended, so a person cannot take it yet.
    #[error("attempt `{id}` of run {run} is {state}; it can be taken once it has ended")]
    AttemptNotEnded {
        /// The run.
        run: String,
        /// The attempt's id (`<task>~<n>`).
        id: String,
        /// Its state.
        state: &'static str,
    },
    /// The id names a group where a task is needed.
    #[error("`{group}` is a group of run {run}: send back one of its tasks")]
    Group {
        /// The run.
        run: String,
        /// The group's id.
        group: String,
    },
    /// The store has no run of that id.
    #[error("the store has no run `{run}`")]
    NotInStore {
        /// The run asked for.
        run: String,
    },
    /// A remote was given for a run spread over workers, but no store to spread it
    /// through.
    #[error("a run spread over workers through a remote needs a store as well")]
    RemoteWithoutStore,
    /// The directory chosen for the worktrees cannot be made absolute.
    #[error("{}: {source}", dir.display())]
    WorktreeDir {
        /// The directory as given.
        dir: std::path::PathBuf,
        /// Why it cannot.
        source: std::io::Error,
    },
    /// The base commit could not be put on the remote the run is spread over.
    #[error("{remote}: {source}")]
    PublishBase {
        /// The remote.
        remote: String,
        /// What pushing to it said.
        source: plait_store::remote::RemoteError,
    },
    /// HEAD is on no branch, and no target branch was named.
    #[error("HEAD is not on a branch")]
    Detached,
    /// Branches were to be checked against a plan, but none was named.
    #[error("no branches to check against the plan")]
    NoBranches,
    /// A branch to check names (or implies) a task the plan does not have.
    #[error("{spec}: plan {} has no task `{task}`", plan.display())]
    UnknownTask {
        /// The branch as given.
        spec: String,
        /// The plan's file.
        plan: std::path::PathBuf,
        /// The task it names.
        task: String,
    },
    /// A branch to check does not exist.
    #[error("{spec}: no branch `{branch}`")]
    NoBranch {
        /// The branch as given.
        spec: String,
        /// The branch it names.
        branch: String,
    },
    /// The base named is not a branch or commit.
    #[error("base `{rev}` is not a branch or commit")]
    BadBase {
        /// The base as given.
        rev: String,
    },
    /// The target branch does not exist.
    #[error("branch `{into}` does not exist")]
    NoTarget {
        /// The target branch's name.
        into: String,
    },
    /// The branches to check share no history with their target.
    #[error("the branches share no history with the target")]
    NoSharedHistory,
    /// Task branches moved by hand in ways plait cannot take: no landing.
    #[error("not landing run {run}: task branches moved by hand:{}", list(refused))]
    MovedByHand {
        /// The run.
        run: String,
        /// Each branch and why it cannot be taken.
        refused: Vec<(String, String)>,
    },
    /// The repository cannot be used.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// The run's record could not be read or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// The plan could not be read or is not valid.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The run could not be landed.
    #[error(transparent)]
    Land(#[from] LandError),
    /// What a run or the seed left could not be removed.
    #[error(transparent)]
    Clean(crate::clean::CleanError),
    /// The manager could not plan.
    #[error(transparent)]
    Manager(#[from] plait_agents::manager::ManagerError),
    /// The run's PostgreSQL store could not be reached, or did not do what was asked.
    #[error(transparent)]
    Store(#[from] plait_store::pg::PgError),
    /// The branches of a run spread over workers could not be fetched from its remote.
    #[error(transparent)]
    FetchBranches(plait_store::remote::RemoteError),
    /// The branches of a run spread over workers could not be pushed to its remote.
    #[error(transparent)]
    PushBranches(plait_store::remote::RemoteError),
    /// A run could not be made, made ready to go on or carried on (its lock, record,
    /// branches, worktrees or pipeline), or the orchestrator refused it.
    #[error(transparent)]
    Prepare(#[from] RunError),
    /// Part of the run's pipeline (a merge again, checks, collecting moved branches).
    #[error("{what}: {source}")]
    Run {
        /// The part of the pipeline (`merging again`).
        what: &'static str,
        /// Why it failed.
        source: RunError,
    },
    /// Checking a run, a merge in progress or branches against a plan; `what` names which
    /// (`cannot check run 0abc12`).
    #[error("{what}: {source}")]
    Check {
        /// What was being checked.
        what: String,
        /// Why it could not be.
        source: RunError,
    },
    /// The runs' task work, by which a hook finds the runs a move concerns, cannot be read.
    #[error(transparent)]
    Work(#[from] crate::check::work::WorkError),
    /// The manager's request is not valid: `what` names the part (`goal`, `max-tasks`,
    /// `include`, `manager`).
    #[error("{what}: {message}")]
    Manage {
        /// The part of the request.
        what: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The manager named is neither a built-in model provider nor `claude-code`.
    #[error("the manager `{name}` is neither a built-in model provider nor claude-code")]
    UnknownManager {
        /// The manager as named.
        name: String,
    },
    /// A hook of the user's is in the way of installing plait's: both it and the name it
    /// would be kept under exist.
    #[error("{} exists and so does {}", path.display(), chained.display())]
    HookInTheWay {
        /// The hook's file.
        path: std::path::PathBuf,
        /// Where the user's hook would be kept, to be called by plait's.
        chained: std::path::PathBuf,
    },
    /// git ran a hook plait does not have.
    #[error("unknown hook `{name}`")]
    UnknownHook {
        /// The hook's name.
        name: String,
    },
    /// The git CLI failed at `what`.
    #[error("{what}: {source}")]
    Git {
        /// What git was asked to do.
        what: &'static str,
        /// How it failed.
        source: plait_core::git::GitCliError,
    },
    /// A config file exists but cannot be read.
    #[error("cannot read config {}: {source}", path.display())]
    ConfigUnreadable {
        /// The config file.
        path: std::path::PathBuf,
        /// Why it cannot be read.
        source: std::io::Error,
    },
    /// A worker was given no directory for its clones, and there is no home to keep them
    /// under.
    #[error("no directory for the worker's clones: HOME is not set")]
    NoWorkerDir,
    /// The self-test of the walls could not be carried out.
    #[error("{0}")]
    Doctor(String),
    /// A file of plait's own could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why it could not be read or written.
        source: std::io::Error,
    },
}

impl OpsError {
    /// An I/O failure on `path`.
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> OpsError + '_ {
        move |source| OpsError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

fn list(items: &[(String, String)]) -> String {
    items
        .iter()
        .map(|(branch, why)| format!("\n  - {branch} {why}"))
        .collect()
}
