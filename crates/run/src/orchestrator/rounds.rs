//! A task's rounds: agent → collect → checks and review, each round a `ControlFlow` (the
//! feedback for the next, or `Break` when the task has ended and its end is recorded),
//! until the branch is approved, rejected, or out of rounds. `Worker` holds what the
//! rounds of one task share. Above [`super::collecting`], [`super::entered`] and
//! [`super::shared`]; below the task's entry points (`task`), which call [`work`].

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use git2::Oid;

use super::collecting::collect_round;
use super::run_in_view::{forward, Forward};
use super::shared::{fail_task, Slot, Start};
use super::Shared;
use plait_agents::agent::{self, Agent, AgentOutcome, AgentReport, TaskContext};
use plait_agents::prompts;
use plait_core::cancel::Cancel;
use plait_core::state::TaskDir;
use plait_core::state::{
    now_ms, CheckResult, Review, SandboxRecord, TaskRecord, TaskState, Usage, Verdict,
};
use plait_plan::{AgentConfig, ResolvedTask, Reviewer};
use plait_sandbox::sandbox::{Confinement, Sandbox};
use plait_stages::collect;
use plait_stages::review::checks::{CheckJob, Lineage};
use plait_stages::review::reviewer::{self, ReviewInput};
use plait_trees::workspace::view::{self, TaskView, ViewKind};

/// Rounds of agent → collect → checks and review, from the first of `(round, limit)` to at
/// most the second, until the task is done, rejected or failed.
pub(super) async fn work(
    shared: &Arc<Shared>,
    slot: Slot,
    record: &TaskRecord,
    (mut round, limit): (u32, u32),
    mut feedback: Option<String>,
) {
    // An agent CLI's way to its model, open while its rounds run.
    let task = shared.task(slot);
    let lease = match task.agent.gateway() {
        None => None,
        Some(provider) => {
            let transcript = TaskDir::of_log(&record.log).transcript();
            match shared.gateway_lease(slot, provider, transcript).await {
                Ok(lease) => Some(Arc::new(lease)),
                Err(why) => return fail_task(shared, slot, why, None),
            }
        }
    };
    let start = match shared.start(slot.index) {
        Ok(start) => start,
        Err(why) => return fail_task(shared, slot, why, None),
    };
    let worker = Worker::new(shared, slot, task, record, lease, start);
    let mut confinement = Some(worker.task.sandbox.confinement());
    while let ControlFlow::Continue(next) = worker
        .round(round, limit, feedback.take(), confinement.take())
        .await
    {
        round += 1;
        feedback = Some(next);
    }
    if slot.attempt.is_none() {
        // A later round of it (a send-back) is not stopped by this one's stop.
        shared.stops.clear(slot);
    }
}

/// What the rounds of one task share: the task, its agent, its reviewer and its sandbox.
struct Worker<'a> {
    shared: &'a Arc<Shared>,
    slot: Slot,
    record: &'a TaskRecord,
    /// The task as this slot runs it (an attempt's id and agent).
    task: Cow<'a, ResolvedTask>,
    /// The run's interrupt, or this slot's own stop (`Shared::stops`).
    cancel: Cancel,
    /// What people tell it while it runs (`plait tell`).
    inbox: plait_agents::agent::Inbox,
    agent: Box<dyn Agent>,
    reviewer: Reviewer,
    /// The task's directory: its logs, review files and the agent CLIs' own files.
    task_dir: PathBuf,
    sandbox: Arc<Sandbox>,
    /// Where the commands its agent runs see the whole tree.
    view: Arc<TaskView>,
    /// The task's way through the run's gateway, for an agent CLI.
    gateway: Option<Arc<plait_gateway::Lease>>,
    /// Where its branch started.
    start: Arc<Start>,
    /// Serves `$PLAIT_RUN_IN` for an agent whose view is entered through plait.
    forward: Option<Forward>,
}

impl<'a> Worker<'a> {
    /// The worker of task (or attempt) `slot`, run as `task`, its agent and reviewer as the
    /// plan says.
    fn new(
        shared: &'a Arc<Shared>,
        slot: Slot,
        task: Cow<'a, ResolvedTask>,
        record: &'a TaskRecord,
        gateway: Option<Arc<plait_gateway::Lease>>,
        start: Arc<Start>,
    ) -> Worker<'a> {
        let agent = agent::from_config(&task.agent, &shared.client, &shared.limiters);
        let reviewer = shared.plan.review.reviewer_for(&task);
        // The agent's processes may write its worktree and the task's scratch (the agent
        // CLIs' own files), and nothing of any other task: the rest of the task's directory
        // (logs, transcript, the guard's rules and Claude Code's settings) is plait's.
        let task_dir = record
            .log
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let scratch = TaskDir(task_dir.clone()).scratch();
        let view = Arc::new(task_view(shared, record, &task, &start));
        // With `network = "gateway"`, the gateway's port is the one way out.
        let mut settings = match &gateway {
            Some(lease) => task.sandbox.through_gateway(lease.port()),
            None => task.sandbox.clone(),
        };
        settings
            .readable
            .extend(given_files(&task_dir, &task.agent));
        let own = vec![record.worktree.clone(), scratch];
        let sandbox = Sandbox::new(&settings, own.clone()).with_view(view.overlay().cloned());
        let (sandbox, forwarding) = match view.entered() {
            Some(entered) => forward(shared, &task, entered, sandbox, &settings, own),
            None => (sandbox, None),
        };
        let sandbox = Arc::new(sandbox);
        Worker {
            shared,
            slot,
            record,
            cancel: shared.stops.watch(slot, &shared.cancel),
            inbox: shared.inbox(slot),
            task,
            agent,
            reviewer,
            task_dir,
            sandbox,
            view,
            gateway,
            start,
            forward: forwarding,
        }
    }

    /// One round: the agent, then collect, checks and review; the feedback for the next
    /// round, or `Break` when the task has ended (and its end is recorded).
    async fn round(
        &self,
        round: u32,
        limit: u32,
        feedback: Option<String>,
        confinement: Option<Confinement>,
    ) -> ControlFlow<(), String> {
        self.start(round, confinement);
        let clock = &self.shared.clock;
        let started = Instant::now();
        let agent = self.run_agent(round, feedback).await;
        clock.task_step("agent", started);
        agent?;
        let started = Instant::now();
        let tip = self.collect().await;
        clock.task_step("collect and commit", started);
        // A branch that changes nothing: the task is done (unless it was told something
        // since, which its next round hears).
        let Some(tip) = tip? else {
            return self.next_round(None, true, round, limit);
        };
        if self.task.checks(&self.shared.plan.checks.task).is_empty()
            && matches!(self.reviewer, Reviewer::Off)
        {
            return self.next_round(None, true, round, limit);
        }
        self.shared
            .update(self.slot, |t| t.state = TaskState::Reviewing);
        self.goes_on();
        let started = Instant::now();
        let checks = self.run_checks(round, tip).await;
        clock.task_step("task checks", started);
        let checks = checks?;
        // Stopped while its checks ran (another attempt chosen): what they said is moot.
        if self.stopped_alone() {
            return self.halted().unwrap_or(ControlFlow::Break(()));
        }
        if let Some(reason) = plans_fault(&checks) {
            // No round of the agent's can fix a check that cannot start.
            self.record_judgement(checks, None);
            return self.fail(reason, None);
        }
        let started = Instant::now();
        let verdict = self.review(round, tip, &checks).await;
        if verdict.is_some() {
            clock.task_step("review", started);
        }
        let next = prompts::feedback::of_round(&checks, verdict.as_ref());
        let rejected = verdict
            .as_ref()
            .is_some_and(|r| r.verdict == Verdict::Reject);
        let none_failed_here = !checks.iter().any(CheckResult::failed_here);
        self.record_judgement(checks, verdict);
        if let Some(halted) = self.halted() {
            return halted;
        }
        if rejected {
            return self.finish(TaskState::Rejected);
        }
        self.next_round(next, none_failed_here, round, limit)
    }

    /// Marks the task running in `round`; a `confinement` (the first round's) records how
    /// its processes are confined, keeping the refusals of earlier tries.
    fn start(&self, round: u32, confinement: Option<Confinement>) {
        self.shared.update(self.slot, |t| {
            t.state = TaskState::Running;
            t.rounds = round;
            if let Some(confinement) = confinement {
                let refused = t.sandbox.take().map(|s| s.refused).unwrap_or_default();
                let mut now = SandboxRecord::from(&confinement);
                // How writes and the network are walled, as this system does it.
                now.how = self.sandbox.settings().describe();
                now.add_refused(&refused);
                t.sandbox = Some(now);
            }
        });
        self.goes_on();
    }

    /// Tells [`Shared::on_commit`] that the task goes on past the commit its branch is at
    /// (into its review, or into a round on top of it).
    fn goes_on(&self) {
        if self.slot.attempt.is_none() {
            (self.shared.on_commit)(self.slot.index);
        }
    }

    /// Runs the agent for the round and records what it used; `Break` when it failed or was
    /// stopped, or the run was interrupted.
    async fn run_agent(&self, round: u32, feedback: Option<String>) -> ControlFlow<()> {
        let shared = self.shared;
        // The base's checkout under the overlay, made the first time an agent of the run
        // may run commands (a model agent without its `run` tool never does).
        let runs_commands = match &self.task.agent {
            AgentConfig::Model { run, .. } => run.offered(),
            _ => true,
        };
        if self.view.layered() && runs_commands {
            let made = match shared.environment() {
                Some(env) if self.start.commit != env.base => env
                    .start_layer(shared.context.dir(), self.start.commit)
                    .await
                    .map(|_| ())
                    .map_err(|why| format!("cannot make the layer of its start: {why}")),
                Some(_) => Ok(()),
                None => shared.view_tree(&self.start).await.map(|_| ()),
            };
            if let Err(why) = made {
                return self.fail(why, None);
            }
        }
        let mut context = context(
            shared,
            &self.task,
            (self.record, &self.start),
            round,
            feedback,
            (&self.sandbox, &self.view),
        );
        context.gateway = self.gateway.clone();
        context.cancel = self.cancel.clone();
        context.inbox = takes_mid_round(&self.task.agent).then(|| self.inbox.clone());
        context.attempt = self
            .slot
            .attempt
            .zip(self.task.attempts.as_ref().map(|t| t.count));
        let report = self.agent.run(&context).await;
        record_report(shared, self.slot, &report);
        self.note_heard();
        let finished = matches!(report.outcome, AgentOutcome::Finished);
        self.note_refused(self.sandbox.denials(), finished);
        if let Some(forward) = &self.forward {
            self.note_refused(forward.denials(), finished);
        }
        if shared.cancel.is_cancelled() {
            return self.keep_interrupted().await;
        }
        if let Some(halted) = self.halted() {
            return halted;
        }
        if self.shared.stops.kept(self.slot) {
            // Stopped to keep its work: what it wrote so far is collected and judged.
            return ControlFlow::Continue(());
        }
        let mut outcome = report.outcome;
        if let (AgentOutcome::Failed { .. }, Some(_)) = (&outcome, &self.gateway) {
            // The gateway refused the CLI's requests once the run's budget was spent.
            if let Some(reason) = shared.budget.exhausted() {
                outcome = AgentOutcome::Stopped { reason };
            }
        }
        match outcome {
            AgentOutcome::Finished => ControlFlow::Continue(()),
            AgentOutcome::Failed { reason, exit_code } => {
                self.fail(with_refused(reason, &self.sandbox.denials()), exit_code)
            }
            AgentOutcome::Stopped { reason } => {
                shared.update(self.slot, |t| {
                    t.state = TaskState::Stopped;
                    t.error = Some(reason);
                    t.finished_at = Some(now_ms());
                });
                ControlFlow::Break(())
            }
        }
    }

    /// Commits what the agent wrote before the run was interrupted (on the task's branch,
    /// not merged) and records the task as interrupted; always `Break`.
    async fn keep_interrupted(&self) -> ControlFlow<()> {
        let message = format!(
            "plait({}): work in progress (interrupted)\n\nPlait-Run: {}\n",
            self.task.id, self.shared.run
        );
        let kept = collect_round(
            self.shared,
            self.slot,
            self.record,
            !self.view.layered(),
            message,
        )
        .await;
        self.shared.update(self.slot, |t| {
            t.state = TaskState::Interrupted;
            t.error = match kept {
                Ok(_) => Some("interrupted".to_string()),
                Err(e) => Some(format!("interrupted; its work could not be committed: {e}")),
            };
        });
        ControlFlow::Break(())
    }

    /// Commits the round's owned changes; the branch's tip (`None` when the branch changes
    /// nothing), or `Break` when collecting failed.
    async fn collect(&self) -> ControlFlow<(), Option<Oid>> {
        self.shared
            .update(self.slot, |t| t.state = TaskState::Collecting);
        let message = collect::commit_message(&self.shared.run, &self.task.id, &self.task.prompt);
        match collect_round(
            self.shared,
            self.slot,
            self.record,
            !self.view.layered(),
            message,
        )
        .await
        {
            Ok(tip) => ControlFlow::Continue(tip),
            Err(e) => self.fail(format!("could not collect the worktree: {e}"), None),
        }
    }

    /// The task checks' results on the round's commit (none when the plan has none);
    /// `Break` when they could not run.
    async fn run_checks(&self, round: u32, tip: Oid) -> ControlFlow<(), Vec<CheckResult>> {
        let shared = self.shared;
        let commands = self.task.checks(&shared.plan.checks.task);
        if commands.is_empty() {
            return ControlFlow::Continue(Vec::new());
        }
        let logs = TaskDir::of_log(&self.record.log).checks(round);
        let job = CheckJob {
            commit: tip,
            commands: &commands,
            own: &self.task.own_checks,
            env: vec![
                ("PLAIT_RUN", shared.run.clone()),
                ("PLAIT_TASK", shared.plan.tasks[self.slot.index].id.clone()),
                ("PLAIT_BASE", self.start.commit.to_string()),
                ("PLAIT_RUN_BASE", shared.plan.base.to_string()),
                ("PLAIT_COMMIT", tip.to_string()),
            ],
            logs: &logs,
            timeout: shared.plan.checks.timeout,
            sandbox: &self.task.check_sandbox,
            lineage: Lineage::Task(self.task.id.clone()),
        };
        match shared.checks.run(&job, self.judging_cancel()).await {
            Ok(results) => {
                self.note_refused(
                    results.iter().flat_map(|r| r.refused.clone()).collect(),
                    false,
                );
                ControlFlow::Continue(results)
            }
            Err(e) => match self.halted() {
                Some(halted) => halted,
                None => self.fail(format!("the task checks could not run: {e}"), None),
            },
        }
    }

    /// The reviewer's judgement of the round's commit, its diff and its checks; `None`
    /// when no reviewer judges it.
    async fn review(&self, round: u32, tip: Oid, checks: &[CheckResult]) -> Option<Review> {
        let (shared, task) = (self.shared, &*self.task);
        let diff = shared.diff(self.start.commit, tip).await;
        let gateway = match self.reviewer.gateway() {
            None => None,
            Some(provider) => {
                let transcript = self.task_dir.join("review.jsonl");
                let who = format!("review:{}", task.id);
                match shared.role_gateway(&who, provider, transcript).await {
                    Ok(g) => Some(g),
                    Err(why) => {
                        tracing::warn!("{why}; the reviewer goes without it");
                        None
                    }
                }
            }
        };
        let input = ReviewInput {
            run: &shared.run,
            goal: &shared.plan.goal,
            task: &task.id,
            prompt: &task.prompt,
            owns: task.owns.patterns(),
            diff: &diff,
            checks,
            round,
            base: self.start.commit.to_string(),
            commit: tip.to_string(),
            worktree: self.record.worktree.clone(),
            dir: self.task_dir.clone(),
            timeout: shared.plan.checks.timeout,
            budget: &shared.budget,
            sandbox: &task.check_sandbox,
            plait_program: shared.context.program(),
            gateway: gateway.as_ref(),
        };
        reviewer::review(
            &self.reviewer,
            &input,
            &shared.client,
            &shared.limiters,
            self.judging_cancel(),
        )
        .await
    }

    /// Records the round's checks and review, and adds what the review used to the task's
    /// usage.
    fn record_judgement(&self, checks: Vec<CheckResult>, verdict: Option<Review>) {
        self.shared.update(self.slot, |t| {
            t.checks = checks;
            if let Some(review) = verdict {
                if let Some(u) = &review.usage {
                    t.usage
                        .get_or_insert_with(|| Usage {
                            cost_usd: Some(0.0),
                            ..Usage::default()
                        })
                        .add(u);
                }
                t.review = Some(review);
            }
        });
    }

    /// After a judged round: the feedback `next` for another round while rounds are left,
    /// else the task's end.
    fn next_round(
        &self,
        next: Option<String>,
        none_failed_here: bool,
        round: u32,
        limit: u32,
    ) -> ControlFlow<(), String> {
        if self.shared.stops.kept(self.slot) {
            // Stopped to keep its work: judged as it is, with no round after.
            return match none_failed_here {
                true => self.finish(TaskState::Done),
                false => self.fail(
                    "stopped by a person to keep its work (plait stop --keep); its checks fail"
                        .to_string(),
                    None,
                ),
            };
        }
        // What a person told it that its agent did not hear this round: the next round's
        // comment, whether the round asked for one or not.
        let told = self.inbox.take();
        if !told.is_empty() {
            self.note_heard();
            let told = prompts::worker::told(&told);
            return ControlFlow::Continue(match next {
                Some(text) => format!("{told}\n\n{text}"),
                None => told,
            });
        }
        match next {
            None => self.finish(TaskState::Done),
            Some(text) if round < limit => ControlFlow::Continue(text),
            Some(_) if !none_failed_here && limit == 0 => self.fail(
                "its checks fail (it had no rounds of changes: an exec agent gets none \
                 unless [review] rounds sets some)"
                    .to_string(),
                None,
            ),
            Some(_) if !none_failed_here => self.fail(
                format!("its checks still fail after {round} round(s) of changes"),
                None,
            ),
            // Out of rounds with changes still requested: done, but not approved.
            Some(_) => self.finish(TaskState::Done),
        }
    }

    /// Keeps what the walls refused the task's processes in its record; a name lookup is
    /// no news when the agent `finished` anyway.
    fn note_refused(&self, mut refused: Vec<String>, finished: bool) {
        if finished {
            refused.retain(|d| !plait_sandbox::sandbox::refused_lookup(d));
        }
        if !refused.is_empty() {
            self.shared.update(self.slot, |t| {
                if let Some(s) = &mut t.sandbox {
                    s.add_refused(&refused);
                }
            });
        }
    }

    /// When this slot was stopped on its own (`Shared::stops`: another attempt was chosen,
    /// or a person stopped it) and the run goes on: its end, `stopped` with the stop's
    /// reason. The run's own interrupt ends it as interrupted instead, elsewhere.
    fn halted<T>(&self) -> Option<ControlFlow<(), T>> {
        if self.shared.cancel.is_cancelled() {
            return Some(self.fail("interrupted".to_string(), None));
        }
        let reason = self.shared.stops.stopped(self.slot)?;
        if self.shared.stops.kept(self.slot) {
            // Its work so far is collected and judged; the round ends there.
            return None;
        }
        let by_person = self.slot.attempt.is_none();
        self.shared.update(self.slot, |t| {
            t.state = TaskState::Stopped;
            t.error = Some(reason);
            t.finished_at = Some(now_ms());
            if by_person {
                // A person's stop decides its work away: the rest lands without it.
                t.decision = Some(plait_core::state::Decision {
                    verdict: Verdict::Reject,
                    at: now_ms(),
                });
            }
        });
        Some(ControlFlow::Break(()))
    }

    /// What the round's checks and review watch: this slot's stop, or, once it was
    /// stopped to keep its work (which they judge), the run's interrupt alone.
    fn judging_cancel(&self) -> &Cancel {
        if self.shared.stops.kept(self.slot) {
            &self.shared.cancel
        } else {
            &self.cancel
        }
    }

    /// Whether this slot was stopped on its own while the run goes on.
    fn stopped_alone(&self) -> bool {
        !self.shared.cancel.is_cancelled()
            && self.shared.stops.stopped(self.slot).is_some()
            && !self.shared.stops.kept(self.slot)
    }

    /// Notes in the record when the agent heard what it was told.
    fn note_heard(&self) {
        let heard = self.inbox.heard();
        if heard.is_empty() {
            return;
        }
        self.shared.update(self.slot, |t| {
            for (at, when) in heard {
                if let Some(told) = t
                    .told
                    .iter_mut()
                    .find(|m| m.at == at && m.heard_at.is_none())
                {
                    told.heard_at = Some(when);
                }
            }
        });
    }

    /// Records that the task failed for `reason`; `Break`, for it has ended.
    fn fail<T>(&self, reason: String, exit_code: Option<i32>) -> ControlFlow<(), T> {
        fail_task(self.shared, self.slot, reason, exit_code);
        ControlFlow::Break(())
    }

    /// Records that the task ended in `state`; `Break`, for it has ended.
    fn finish<T>(&self, state: TaskState) -> ControlFlow<(), T> {
        self.shared.update(self.slot, |t| {
            t.state = state;
            t.finished_at = Some(now_ms());
        });
        ControlFlow::Break(())
    }
}

/// Why the round's checks failed through no fault of the agent's: a check whose own
/// program was not found.
fn plans_fault(checks: &[CheckResult]) -> Option<String> {
    checks.iter().filter(|c| !c.passed).find_map(|c| {
        let program = plait_plan::commands::program_not_found(&c.command, c.exit_code, &c.tail)?;
        Some(format!(
            "the check `{}` cannot run: `{program}` was not found (exit 127); fix [checks] in the plan and run it again",
            c.command
        ))
    })
}

/// A failure's reason, with the writes the sandbox refused the agent, which may be why.
fn with_refused(reason: String, refused: &[String]) -> String {
    if refused.is_empty() {
        return reason;
    }
    // A refused connection's words name the setting that allows it; a write's do not.
    let hint = if refused.iter().any(|r| r.starts_with("write to ")) {
        " (if the tool needs that path, add it to [sandbox] writable)"
    } else {
        ""
    };
    format!(
        "{reason}; the sandbox refused it: {}{hint}",
        refused.join(", ")
    )
}

/// What the agent is told and given for one round.
fn context(
    shared: &Shared,
    task: &ResolvedTask,
    (record, start): (&TaskRecord, &Start),
    round: u32,
    feedback: Option<String>,
    (sandbox, view): (&Arc<Sandbox>, &Arc<TaskView>),
) -> TaskContext {
    TaskContext {
        run: shared.run.clone(),
        task: task.id.clone(),
        goal: shared.plan.goal.clone(),
        prompt: task.prompt.clone(),
        base: start.commit.to_string(),
        worktree: record.worktree.clone(),
        owned_list: TaskDir::of_log(&record.log).owned_list(),
        single_file: match start.owned.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        },
        log: record.log.clone(),
        timeout: task.timeout,
        cancel: shared.cancel.clone(),
        repo: shared.context.dir().to_path_buf(),
        owns: task.owns.clone(),
        owned: start.owned.to_vec(),
        files: start.files.clone(),
        transcript: TaskDir::of_log(&record.log).transcript(),
        max_turns: task.max_turns,
        round,
        feedback,
        budget: shared.budget.clone(),
        token_budget: task.token_budget,
        sandbox: sandbox.clone(),
        plait_program: shared.context.program().to_path_buf(),
        view: view.clone(),
        checks: shared.plan.checks.task.clone(),
        gateway: None,
        attempt: None,
        inbox: None,
    }
}

/// The whole-tree view of a task: an overlay of its worktree on the base's checkout where
/// this system allows it, else the worktree filled in at the first command. An exec agent
/// starts in it when the run has a base layer (its codemod finds the project's
/// `node_modules/.bin`, its venv, its build); without one, or with `view = false`, its own
/// command runs in the sparse worktree and `$PLAIT_RUN_IN` enters the view.
fn task_view(shared: &Shared, record: &TaskRecord, task: &ResolvedTask, start: &Start) -> TaskView {
    use plait_sandbox::sandbox::ViewMode;
    let entered = task.sandbox.view == ViewMode::Off;
    let support = match (&task.agent, task.sandbox.view) {
        // A shell command in the task's sparse worktree, as before views: a task that runs
        // nothing costs what it owns; without a base layer, one that runs a command
        // through `$PLAIT_RUN_IN` has the worktree filled in then.
        (AgentConfig::Exec(_), _) if shared.environment().is_none() => Err("an exec agent, \
            which enters it through `$PLAIT_RUN_IN`"
            .to_string()),
        (_, ViewMode::Auto | ViewMode::Off) => plait_sandbox::sandbox::view_support().clone(),
        (_, ViewMode::Filled) => Err("[sandbox] view = \"filled\"".to_string()),
    };
    let kind = match (support, shared.environment()) {
        (Ok(()), Some(env)) => {
            let work = view::work_dir(&record.worktree);
            let _ = std::fs::create_dir_all(&work);
            let own = plait_trees::environment::LayerDir(view::include_dir(&record.worktree));
            let _ = env.make_layer(&own);
            let start_layer = (start.commit != env.base)
                .then(|| env.dir.join("starts").join(start.commit.to_string()));
            let view = env.task_view(start_layer, &record.worktree, work, &own);
            if entered {
                ViewKind::Entered(view)
            } else {
                ViewKind::Overlay(view)
            }
        }
        (Ok(()), None) => {
            let work = view::work_dir(&record.worktree);
            let _ = std::fs::create_dir_all(&work);
            let view = plait_sandbox::sandbox::OverlayView::of_worktree(
                record.worktree.clone(),
                vec![shared.store.views_dir().join(start.commit.to_string())],
                record.worktree.clone(),
                work,
            );
            if entered {
                ViewKind::Entered(view)
            } else {
                ViewKind::Overlay(view)
            }
        }
        (Err(why), _) => ViewKind::Materialize(why),
    };
    TaskView::new(
        kind,
        record.worktree.clone(),
        shared.context.dir().to_path_buf(),
        start.files.clone(),
        task.owns.clone(),
        TaskDir::of_log(&record.log).view_filled(),
    )
}

/// Adds a round's usage to the task's and keeps the agent's last words.
fn record_report(shared: &Shared, slot: Slot, report: &AgentReport) {
    shared.update(slot, |t| {
        // This round's word alone: an earlier round's "nothing to do" does not stand.
        t.nothing_to_do.clone_from(&report.nothing_to_do);
        if let Some(u) = &report.usage {
            match &mut t.usage {
                Some(total) => total.add(u),
                None => t.usage = Some(u.clone()),
            }
        }
        if report.summary.is_some() {
            t.summary = report.summary.clone();
        }
    });
}

/// Whether `agent` takes what a person tells it at its next turn (a model agent, whose
/// conversation plait holds; Claude Code, on its stream-json input); the others hear it as
/// their next round's comment.
pub(super) fn takes_mid_round(agent: &AgentConfig) -> bool {
    matches!(
        agent,
        AgentConfig::Model { .. } | AgentConfig::ClaudeCode(_)
    )
}

/// What plait writes in a task's directory for its agent's processes to read: the owned
/// lists (`$PLAIT_OWNED`, `$PLAIT_FILES`), aider's model metadata, and the directory of
/// Claude Code's settings and its guard's rules (the CLI and `plait guard`, its hook, read
/// them; `--settings` and the hook's argument name them). Readable by that task's
/// processes alone, never writable by them (the agent must not switch its hook off); the
/// rest of its directory and plait's store stay unreadable. Each is made here if missing,
/// so the walls, raised at the first command, find it: a rule names what was opened, so
/// plait writes these files in place (an agent fills them in the same inode) and the
/// directory covers whatever is made in it later.
fn given_files(task_dir: &Path, agent: &AgentConfig) -> Vec<PathBuf> {
    let dir = TaskDir(task_dir.to_path_buf());
    let mut files = vec![
        dir.owned_list(),
        task_dir.join(plait_agents::agent::exec::FILES_LIST),
    ];
    if matches!(agent, AgentConfig::Aider(_)) {
        files.push(dir.aider_models());
    }
    let made = |file: &PathBuf| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .is_ok()
    };
    let mut given: Vec<PathBuf> = files.into_iter().filter(made).collect();
    let control = dir.claude_code();
    if matches!(agent, AgentConfig::ClaudeCode(_)) && std::fs::create_dir_all(&control).is_ok() {
        given.push(control);
    }
    given
}
