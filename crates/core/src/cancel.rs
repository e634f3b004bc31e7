//! The run's interrupt: one signal, fired by the command line on Ctrl-C or SIGTERM (or
//! never, in a library caller), that every task, agent, check and HTTP request watches.

/// A signal that the run was interrupted, shared by every task.
#[derive(Debug, Clone)]
pub struct Cancel(tokio::sync::watch::Receiver<bool>);

impl Cancel {
    /// A signal and the sender that fires it.
    pub fn new() -> (tokio::sync::watch::Sender<bool>, Cancel) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (tx, Cancel(rx))
    }

    /// Whether the run has been interrupted.
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
