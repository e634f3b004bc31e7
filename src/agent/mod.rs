//! Stage 3: agents. The worker that edits a task's worktree, behind one trait so the
//! orchestrator treats a shell command, a model over HTTP and an agent CLI alike. An agent's
//! failure is an outcome recorded on the task, never an error of plait's.

pub mod exec;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use crate::plan::AgentSpec;

/// Everything an agent gets to know about its task.
#[derive(Debug, Clone)]
pub struct TaskContext {
    pub run: String,
    pub task: String,
    pub goal: String,
    pub prompt: String,
    /// The base commit, as a full hex id.
    pub base: String,
    pub worktree: PathBuf,
    /// A file listing the owned paths, one per line.
    pub owned_list: PathBuf,
    /// The one owned file, for single-file tasks.
    pub single_file: Option<String>,
    /// Where the agent's output goes.
    pub log: PathBuf,
    pub timeout: Duration,
    /// Fires when the run is interrupted; the agent stops at once.
    pub cancel: Cancel,
}

/// A signal that the run was interrupted, shared by every task.
#[derive(Debug, Clone)]
pub struct Cancel(tokio::sync::watch::Receiver<bool>);

impl Cancel {
    /// A signal and the sender that fires it.
    pub fn new() -> (tokio::sync::watch::Sender<bool>, Cancel) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (tx, Cancel(rx))
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until the signal fires (forever if its sender is gone without firing).
    pub async fn cancelled(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|c| *c).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// How an agent's work ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentOutcome {
    /// The agent says it finished; its worktree is ready to collect.
    Finished,
    /// The agent failed; the reason is one line.
    Failed {
        reason: String,
        exit_code: Option<i32>,
    },
}

/// A future an agent returns.
pub type AgentFuture<'a> = Pin<Box<dyn Future<Output = AgentOutcome> + Send + 'a>>;

/// A worker that edits one task's worktree.
pub trait Agent: Send + Sync {
    /// Runs the agent on the task until it finishes, fails or times out.
    fn run<'a>(&'a self, task: &'a TaskContext) -> AgentFuture<'a>;
}

/// Builds the agent a plan names.
pub fn from_spec(spec: &AgentSpec) -> Result<Box<dyn Agent>, String> {
    match spec {
        AgentSpec::Exec(command) => Ok(Box::new(exec::ExecAgent::new(command.clone()))),
        AgentSpec::Named(name) => Err(format!("agent `{name}` is not available in this version")),
        AgentSpec::Cli(_) => Err("`cli` agents are not available in this version".to_string()),
    }
}
