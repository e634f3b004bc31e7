//! The gateway: for each run (and each `plait worker`), one HTTP server on 127.0.0.1
//! through which every agent CLI (Claude Code, aider, a `{ cli }` agent that names a
//! provider) reaches its model. It passes the providers' own wire formats through to the
//! provider's real base URL: Anthropic's Messages (JSON and server-sent events), OpenAI's
//! chat completions and responses, count_tokens and models, and whatever else lies under
//! the base URL.
//!
//! - **One token per task.** An agent is given `http://127.0.0.1:<port>/t/<token>` as its
//!   base URL (or `plait-<token>` as its key, for a client whose base URL takes no path).
//!   The gateway swaps in the provider's real key, so the key never enters an agent's
//!   process; where plait holds no key (a Claude Code login), the client's own
//!   credentials go through as they are. Every request is attributed to its task.
//! - **One limiter.** A request for an answer is admitted by the same token buckets as
//!   plait's own model agents ([`plait_llm::limiter`], per provider and key, shared
//!   across machines through the store in a spread-out run), which learn from the
//!   answers' limit headers. A 429 (or an overloaded or failing server) is waited out,
//!   `retry-after` first, and the request sent again within a bound, so the CLI sees one
//!   slow answer instead of an error it would retry blindly.
//! - **Streams pass through as they arrive**: each chunk is sent on at once, and read on
//!   the way for the answer's usage (input, output, cache writes and reads), its time to
//!   the first token, and the task's transcript (the same JSON lines a model agent's
//!   requests leave). Each answered request's usage is handed to the task's [`Meter`] as
//!   it ends, so the task's tokens and cost are live; the meter can also refuse further
//!   requests (the run's budget is spent), which the CLI is told in its provider's words.
//!   An answer that carries no usage (a local server's stream) is estimated from its text
//!   and marked so ([`plait_llm::estimate`]).
//!
//! The crate's files follow a request: `lease` (a task's route and token), `request`
//! (which task a request is for, and whether it may pass: `endpoints`), `call` (the
//! request sent on, retried, and its answer passed through), `usage` (what the answer
//! used).

#![deny(missing_docs)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

mod call;
mod endpoints;
mod lease;
mod request;
mod usage;

use lease::Inner;
pub use lease::{Lease, Meter, Route};

/// The running gateway; dropping it stops the server (requests in flight finish).
pub struct Gateway {
    port: u16,
    inner: Arc<Inner>,
    stop: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("port", &self.port).finish()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Gateway {
    /// Starts the gateway on a free port of 127.0.0.1; `client` sends the requests on
    /// (its connections kept alive, HTTP/2 where the provider speaks it).
    pub async fn start(client: reqwest::Client) -> std::io::Result<Gateway> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let port = listener.local_addr()?.port();
        // Each event of a stream goes out as it comes, not when the last one is acked.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let inner = Arc::new(Inner {
            client,
            routes: Mutex::new(HashMap::new()),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let app = axum::Router::new()
            .fallback(request::handle)
            .with_state(inner.clone());
        tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stopped.await;
            });
            if let Err(e) = served.await {
                tracing::warn!("the gateway stopped: {e}");
            }
        });
        Ok(Gateway {
            port,
            inner,
            stop: Some(stop),
        })
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Opens a way through for one task's agent.
    pub fn open(&self, route: Route) -> Lease {
        Lease::open(&self.inner, self.port, route)
    }
}

#[cfg(test)]
mod tests;
