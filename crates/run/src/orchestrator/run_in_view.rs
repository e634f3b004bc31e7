//! The way into an exec agent's view: its command runs in its sparse worktree, and
//! `$PLAIT_RUN_IN CMD` asks plait, over a descriptor its processes inherit, to start `CMD`
//! in the task's overlay behind the same walls (`plait_sandbox::forward`).
//!
//! Above [`super::shared`]; the round loop (`rounds`) starts it for each task's worker.

use std::path::PathBuf;
use std::sync::Arc;

use super::shared::Shared;
use plait_plan::ResolvedTask;
use plait_sandbox::sandbox::Sandbox;

/// The task running a view's requests, stopped with its worker, and the walls its
/// commands run in (whose refusals are the agent's).
pub(super) struct Forward(tokio::task::JoinHandle<()>, Arc<Sandbox>);

impl Forward {
    /// The writes its commands' walls refused.
    pub(super) fn denials(&self) -> Vec<String> {
        self.1.denials()
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts serving the requests of `view` (entered through plait) for the processes of
/// `sandbox`'s task; the sandbox the agent's processes run in, passing them its end.
pub(super) fn forward(
    shared: &Arc<Shared>,
    task: &ResolvedTask,
    view: &plait_sandbox::sandbox::OverlayView,
    sandbox: Sandbox,
    settings: &plait_sandbox::sandbox::SandboxSettings,
    own: Vec<PathBuf>,
) -> (Sandbox, Option<Forward>) {
    let Ok(channel) = plait_sandbox::forward::Channel::new() else {
        return (sandbox, None);
    };
    let inside = Arc::new(Sandbox::new(settings, own).with_view(Some(view.clone())));
    let (timeout, cancel) = (task.timeout, shared.cancel.clone());
    let walls = inside.clone();
    let served = plait_sandbox::forward::serve(channel.plait, move |request| {
        let (inside, cancel) = (inside.clone(), cancel.clone());
        async move { plait_sandbox::shell::run_request(request, &inside, timeout, &cancel).await }
    });
    match served {
        Ok(handle) => (
            sandbox.passing(Arc::new(channel.agent)),
            Some(Forward(handle, walls)),
        ),
        Err(_) => (sandbox, None),
    }
}
