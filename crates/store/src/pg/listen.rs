//! Hearing the queue's changes: `NOTIFY` on one channel when a task of a run changes (and
//! on another when a request of a run is made or answered), and a connection that waits
//! for them (`LISTEN`), so neither a coordinator nor a worker need poll.

use std::time::Duration;

use tokio_postgres::{Client, Config};

use super::config::open;
use super::requests::REQUESTS_CHANNEL;
use super::{PgError, PgStore};

/// The channel `NOTIFY` speaks on when a task of a run changes; the payload is the run id.
pub(crate) const TASKS_CHANNEL: &str = "plait_tasks";

impl PgStore {
    /// Tells the listeners that a task of `run` changed.
    pub(super) async fn notify(&self, run: &str) -> Result<(), PgError> {
        self.client
            .execute("SELECT pg_notify($1, $2)", &[&TASKS_CHANNEL, &run])
            .await?;
        Ok(())
    }
}

/// A connection that waits for the store's task changes (`LISTEN`), for a coordinator
/// that must not poll.
pub struct PgListener {
    _client: Client,
    changes: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl PgListener {
    /// Connects and listens for the changes of tasks.
    pub async fn connect(config: &Config, timeout: Duration) -> Result<PgListener, PgError> {
        Self::listen(config, timeout, TASKS_CHANNEL).await
    }

    /// Connects and listens for requests made of running tasks, and their answers
    /// (`PgStore::ask`, `PgStore::answer`).
    pub async fn requests(config: &Config, timeout: Duration) -> Result<PgListener, PgError> {
        Self::listen(config, timeout, REQUESTS_CHANNEL).await
    }

    async fn listen(
        config: &Config,
        timeout: Duration,
        channel: &str,
    ) -> Result<PgListener, PgError> {
        let (client, mut connection) = open(config, timeout).await?;
        let (tx, changes) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = futures_util::StreamExt::next(&mut messages).await {
                match message {
                    Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                        if tx.send(n.payload().to_string()).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!("store listener ended: {e}");
                        return;
                    }
                }
            }
        });
        client.batch_execute(&format!("LISTEN {channel}")).await?;
        Ok(PgListener {
            _client: client,
            changes,
        })
    }

    /// Waits at most `timeout` for a task (or request) of any run to change; true when one
    /// did (and every change heard by then is taken).
    pub async fn any(&mut self, timeout: Duration) -> bool {
        match tokio::time::timeout(timeout, self.changes.recv()).await {
            Ok(Some(_)) => {
                while self.changes.try_recv().is_ok() {}
                true
            }
            Ok(None) | Err(_) => false,
        }
    }

    /// Waits at most `timeout` for a task of `run` to change; true when one did (and
    /// every change heard by then is taken).
    pub async fn changed(&mut self, run: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.changes.recv()).await {
                Ok(Some(changed)) if changed == run => {
                    while self.changes.try_recv().is_ok() {}
                    return true;
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return false,
            }
        }
    }
}
