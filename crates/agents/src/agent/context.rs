//! What every agent shares: the task it is given (`TaskContext`), the run's budget, a
//! role's way through the gateway and its tally, what an agent's round comes to, and the
//! `Agent` trait itself.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use plait_core::cancel::Cancel;
use plait_core::git::TreeFile;
use plait_core::globs::Globs;
use plait_core::state::Usage;
use plait_core::sync::Locked as _;
use plait_sandbox::sandbox::Sandbox;
use plait_sandbox::shell::Launch;

/// Everything an agent gets to know about its task.
#[derive(Debug, Clone)]
pub struct TaskContext {
    /// The run's id.
    pub run: String,
    /// The task's id.
    pub task: String,
    /// What the whole run should achieve.
    pub goal: String,
    /// What the task's agent is told to do.
    pub prompt: String,
    /// The base commit, as a full hex id.
    pub base: String,
    /// The task's worktree, where the agent works.
    pub worktree: PathBuf,
    /// A file listing the owned paths, one per line.
    pub owned_list: PathBuf,
    /// The one owned file, for single-file tasks.
    pub single_file: Option<String>,
    /// Where the agent's output goes.
    pub log: PathBuf,
    /// How long the agent may run.
    pub timeout: Duration,
    /// Fires when the run is interrupted; the agent stops at once.
    pub cancel: Cancel,
    /// The repository (a directory inside it), for reading the base commit.
    pub repo: PathBuf,
    /// The task's `owns` globs and the tracked files they match.
    pub owns: Globs,
    /// The tracked files its `owns` globs match, sorted.
    pub owned: Vec<String>,
    /// Every entry of the base commit's tree, sorted.
    pub files: Arc<Vec<TreeFile>>,
    /// Where a model agent writes its requests and responses (JSON lines).
    pub transcript: PathBuf,
    /// The most turns a model agent may take.
    pub max_turns: u32,
    /// 0 for the first try; then each round of changes the checks or the reviewer asked for.
    pub round: u32,
    /// What the checks and the reviewer asked for, in later rounds.
    pub feedback: Option<String>,
    /// The run's cost budget, shared by every task.
    pub budget: Arc<Budget>,
    /// Tokens this task may use in all, for model agents.
    pub token_budget: Option<u64>,
    /// The walls of every process the agent starts: the worktree, the task's directory.
    pub sandbox: Arc<Sandbox>,
    /// The plait binary, for the hooks agents run (`plait guard`).
    pub plait_program: PathBuf,
    /// The task's whole-tree view, where the commands its agent runs see every file: every
    /// process started through [`TaskContext::launch`] starts in it when it is an overlay;
    /// call [`plait_trees::workspace::view::TaskView::ensure`] before a command either way.
    pub view: Arc<plait_trees::workspace::view::TaskView>,
    /// The task checks (`[checks] task`), which judge each round's commit: an agent that
    /// tests its own edits (aider's `--test-cmd`) runs these.
    pub checks: Vec<String>,
    /// The task's way to its model through plait's gateway, for an agent CLI: the base URL
    /// and stand-in key it is given. Its requests' usage is counted as they end, so the
    /// agent reports none of its own ([`TaskContext::own_usage`]).
    pub gateway: Option<Arc<plait_gateway::Lease>>,
    /// Which attempt this is, of how many (`attempts`): `PLAIT_ATTEMPT` and
    /// `PLAIT_ATTEMPTS`, and a model agent is told so and asked with another temperature
    /// or seed.
    pub attempt: Option<(u32, u32)>,
    /// What a person tells the task while it runs (`plait tell`), for an agent that takes
    /// it at its next turn; `None` for agents that take nothing mid-round.
    pub inbox: Option<Inbox>,
}

/// What people told a running task (`plait tell`, the page), waiting for its agent's next
/// turn, and when each was heard.
#[derive(Debug, Clone, Default)]
pub struct Inbox(Arc<std::sync::Mutex<Heard>>);

#[derive(Debug, Default)]
struct Heard {
    /// Told and not yet taken: when each was told, and what.
    waiting: Vec<(u64, String)>,
    /// Taken: when each was told, and when it was taken.
    taken: Vec<(u64, u64)>,
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, Heard> {
        self.0.locked()
    }

    /// Adds `text`, told at `at`.
    pub fn tell(&self, at: u64, text: String) {
        self.lock().waiting.push((at, text));
    }

    /// Whether anything waits.
    pub fn has_waiting(&self) -> bool {
        !self.lock().waiting.is_empty()
    }

    /// Takes everything waiting, oldest first, noting it heard now.
    pub fn take(&self) -> Vec<String> {
        let mut heard = self.lock();
        let now = plait_core::state::now_ms();
        let taken: Vec<(u64, String)> = std::mem::take(&mut heard.waiting);
        heard.taken.extend(taken.iter().map(|(at, _)| (*at, now)));
        taken.into_iter().map(|(_, text)| text).collect()
    }

    /// When each message taken since the last call was told and heard.
    pub fn heard(&self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.lock().taken)
    }
}

impl TaskContext {
    /// The task's own directory (beside its log): plait's files, read-only to the agent.
    pub fn dir(&self) -> &std::path::Path {
        self.log.parent().unwrap_or(std::path::Path::new("."))
    }

    /// The one place in the task's directory its agent's processes may write (an agent
    /// CLI's config directory and history), made on first use.
    pub fn scratch(&self) -> PathBuf {
        let dir = plait_core::state::TaskDir(self.dir().to_path_buf()).scratch();
        let _ = std::fs::create_dir_all(&dir);
        dir
    }

    /// How many answers the gateway has counted for the task so far (0 without one): taken
    /// before a round, for [`TaskContext::own_usage`] after it.
    pub fn counted(&self) -> u64 {
        self.gateway.as_ref().map_or(0, |lease| lease.answered())
    }

    /// What of an agent CLI's own account of a round (`usage`) the task's record takes:
    /// all of it, unless the gateway counted answers since `counted` (it added their usage
    /// and cost as they ended); then only what the gateway cannot see.
    pub fn own_usage(&self, usage: Usage, counted: u64) -> Usage {
        if self.counted() == counted {
            return usage;
        }
        Usage {
            refused_writes: usage.refused_writes,
            runs: usage.runs,
            run_ms: usage.run_ms,
            cost_usd: Some(0.0),
            ..Usage::default()
        }
    }

    /// How many requests for an answer the task's agent has sent through the gateway so
    /// far (0 without one): taken before a round, for [`TaskContext::unasked`] after it.
    pub fn asked(&self) -> u64 {
        self.gateway.as_ref().map_or(0, |lease| lease.asked())
    }

    /// An agent CLI that ended its round well without a single request to its model (none
    /// through the gateway since `asked`, and none in its own account, `own_requests`: it
    /// printed an error and exited 0, as aider does when its client refuses to start) did
    /// nothing it was asked: a failed round, naming the last line it printed (`output`,
    /// else its log). Any other outcome stays as it is.
    pub fn unasked(
        &self,
        outcome: AgentOutcome,
        (asked, own_requests): (u64, u64),
        program: &str,
        output: &str,
    ) -> AgentOutcome {
        let quiet = self.gateway.is_some() && self.asked() == asked && own_requests == 0;
        if outcome != AgentOutcome::Finished || !quiet {
            return outcome;
        }
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let last = [output, log.as_str()]
            .into_iter()
            .find_map(|text| text.lines().rev().map(str::trim).find(|l| !l.is_empty()))
            .map(|line| format!(": {}", line.chars().take(300).collect::<String>()))
            .unwrap_or_default();
        AgentOutcome::Failed {
            reason: format!("{program} exited 0 without a single request to its model{last}"),
            exit_code: Some(0),
        }
    }

    /// Counts an agent CLI's own figure of what a round cost against the run's budget,
    /// unless the gateway counted the round's answers (and their cost) itself.
    pub fn spend(&self, usd: Option<f64>, counted: u64) {
        if let (true, Some(usd)) = (self.counted() == counted, usd) {
            self.budget.spend(usd);
        }
    }

    /// How the agent's program runs: in the worktree, with `env`, into the log, in the
    /// task's sandbox.
    pub fn launch<'a>(&'a self, env: &'a [(&'a str, String)]) -> Launch<'a> {
        Launch {
            dir: &self.worktree,
            env,
            log: &self.log,
            timeout: self.timeout,
            cancel: &self.cancel,
            sandbox: &self.sandbox,
        }
    }
}

/// The run's cost budget: once it is spent no new model request starts. It is a ceiling
/// for the requests that go through the gateway however many run at once: each is admitted
/// against what may still be spent, its worst case reserved while it is in flight
/// ([`Budget::reserve`]) and settled to what it used as it ends, so the run passes its
/// `--max-cost` by one request's worth at most.
#[derive(Debug, Default)]
pub struct Budget {
    max_cost: Option<f64>,
    spend: std::sync::Mutex<Spend>,
    /// Told each time a reservation is settled, for the requests waiting to be admitted.
    settled: tokio::sync::Notify,
}

/// What was spent, and what the requests in flight hold.
#[derive(Debug, Default, Clone, Copy)]
struct Spend {
    spent: f64,
    reserved: f64,
}

impl Budget {
    /// A budget of `max_cost` dollars for the run; `None`: no limit.
    pub fn new(max_cost: Option<f64>) -> Budget {
        Budget {
            max_cost,
            ..Budget::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Spend> {
        self.spend.locked()
    }

    /// Counts `usd` as spent.
    pub fn spend(&self, usd: f64) {
        self.lock().spent += usd;
        self.settled.notify_waiters();
    }

    /// Why no more may be spent, if so.
    pub fn exhausted(&self) -> Option<String> {
        let max = self.max_cost?;
        let spent = self.lock().spent;
        (spent >= max).then(|| spent_words(spent, max))
    }

    /// Admits a request that may cost `worst` at most: while what was spent and what the
    /// requests in flight hold is below the budget it is reserved at once; while the
    /// requests in flight hold the rest it waits for them to settle; once the budget is
    /// spent it is refused, saying so.
    pub async fn reserve(&self, worst: f64) -> Result<(), String> {
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            {
                let mut spend = self.lock();
                match self.max_cost {
                    Some(max) if spend.spent >= max => return Err(spent_words(spend.spent, max)),
                    Some(max) if spend.spent + spend.reserved >= max => {}
                    _ => {
                        spend.reserved += worst;
                        return Ok(());
                    }
                }
            }
            settled.await;
        }
    }

    /// A request admitted with `worst` has ended having cost `usd`.
    pub fn settle(&self, worst: f64, usd: f64) {
        {
            let mut spend = self.lock();
            spend.reserved = (spend.reserved - worst).max(0.0);
            spend.spent += usd;
        }
        self.settled.notify_waiters();
    }
}

/// What one request holds of the run's budget while it is in flight ([`Budget::hold`]):
/// settled to what it cost, or given back whole when dropped unsettled.
pub struct Hold<'a> {
    budget: &'a Budget,
    worst: f64,
    settled: bool,
}

impl Budget {
    /// [`Budget::reserve`]s `worst` for one request, held until the request is settled.
    pub async fn hold(&self, worst: f64) -> Result<Hold<'_>, String> {
        self.reserve(worst).await?;
        Ok(Hold {
            budget: self,
            worst,
            settled: false,
        })
    }
}

impl Hold<'_> {
    /// The request cost `usd`.
    pub fn settle(mut self, usd: f64) {
        self.settled = true;
        self.budget.settle(self.worst, usd);
    }
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.budget.settle(self.worst, 0.0);
        }
    }
}

/// A spent budget, in words.
fn spent_words(spent: f64, max: f64) -> String {
    format!("stopped by budget: the run spent ${spent:.4} of its ${max:.2}")
}

/// A role's way to its model through plait's gateway (a Claude Code or `{ cli }`
/// reviewer's, a supervisor's): its lease, and what its requests used.
pub struct RoleGateway {
    /// Its lease of the gateway.
    pub lease: plait_gateway::Lease,
    /// What its requests used.
    pub tally: Arc<Tally>,
}

/// What a role's requests through the gateway used, added up as each answer ends; the
/// run's budget pays for them then, and refuses them once it is spent.
pub struct Tally {
    budget: Arc<Budget>,
    used: std::sync::Mutex<Option<Usage>>,
}

impl Tally {
    /// A tally whose answers `budget` pays for.
    pub fn new(budget: Arc<Budget>) -> Tally {
        Tally {
            budget,
            used: std::sync::Mutex::new(None),
        }
    }

    /// What was used so far (`None`: no answer yet), and counting starts again.
    pub fn take(&self) -> Option<Usage> {
        self.used.locked().take()
    }
}

impl plait_gateway::Meter for Tally {
    fn admit(&self, worst: f64) -> plait_gateway::Admission<'_> {
        Box::pin(self.budget.reserve(worst))
    }

    fn settle(&self, worst: f64, usage: Option<&Usage>) {
        let cost = usage.and_then(|u| u.cost_usd).unwrap_or(0.0);
        self.budget.settle(worst, cost);
        let Some(usage) = usage else { return };
        let mut used = self.used.locked();
        match used.as_mut() {
            Some(total) => total.add(usage),
            None => *used = Some(usage.clone()),
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
        /// Why it failed.
        reason: String,
        /// The agent's exit code, if it exited.
        exit_code: Option<i32>,
    },
    /// A budget stopped the agent at a turn boundary.
    Stopped {
        /// The budget that stopped it, in words.
        reason: String,
    },
}

/// What an agent's run produced.
#[derive(Debug, Clone)]
pub struct AgentReport {
    /// How it ended.
    pub outcome: AgentOutcome,
    /// Requests, tokens, cost and time, for model agents.
    pub usage: Option<Usage>,
    /// The agent's closing words, if it had any.
    pub summary: Option<String>,
    /// Why it found nothing to change, when it said so (`nothing_to_do`).
    pub nothing_to_do: Option<String>,
}

impl From<AgentOutcome> for AgentReport {
    fn from(outcome: AgentOutcome) -> AgentReport {
        AgentReport {
            outcome,
            usage: None,
            nothing_to_do: None,
            summary: None,
        }
    }
}

/// A future an agent returns.
pub type AgentFuture<'a> = Pin<Box<dyn Future<Output = AgentReport> + Send + 'a>>;

/// A worker that edits one task's worktree.
pub trait Agent: Send + Sync {
    /// Runs the agent on the task until it finishes, fails or times out.
    fn run<'a>(&'a self, task: &'a TaskContext) -> AgentFuture<'a>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// Twenty requests at once against $5, each of $1.02 at most and $1 in fact, answered
    /// slowly: the budget admits what it can pay for, holds the rest while those are in
    /// flight, then refuses them; the run passes its budget by one request at most.
    #[tokio::test]
    async fn a_budget_is_a_ceiling_for_requests_in_flight() {
        let budget = Arc::new(Budget::new(Some(5.0)));
        let (worst, cost) = (1.02, 1.0);
        let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut requests = tokio::task::JoinSet::new();
        for _ in 0..20 {
            let (budget, in_flight, peak) = (budget.clone(), in_flight.clone(), peak.clone());
            requests.spawn(async move {
                budget.reserve(worst).await?;
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                budget.settle(worst, cost);
                Ok::<(), String>(())
            });
        }
        let mut sent = 0;
        while let Some(done) = requests.join_next().await {
            match done.unwrap() {
                Ok(()) => sent += 1,
                Err(why) => assert!(why.contains("stopped by budget"), "{why}"),
            }
        }
        let spent = budget.lock().spent;
        assert!(spent <= 5.0 + worst, "spent ${spent} of $5");
        assert!(spent >= 5.0, "the budget was used: ${spent}");
        assert_eq!(sent, 5);
        // They went out together, not one by one.
        assert_eq!(peak.load(Ordering::SeqCst), 5);
        assert!(budget.lock().reserved.abs() < 1e-9);
        assert!(budget.exhausted().is_some());
    }

    /// Without a budget nothing waits.
    #[tokio::test]
    async fn no_budget_admits_everything() {
        let budget = Budget::new(None);
        for _ in 0..100 {
            budget.reserve(1e9).await.unwrap();
        }
        assert!(budget.exhausted().is_none());
    }
}
