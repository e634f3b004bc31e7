//! The gateway: for each run (and each `plait worker`), one HTTP gateway on 127.0.0.1 (a
//! listener per lease) through which every agent CLI (Claude Code, aider, a `{ cli }` agent that names a
//! provider) reaches its model. It passes the providers' own wire formats through to the
//! provider's real base URL: Anthropic's Messages (JSON and server-sent events), OpenAI's
//! chat completions and responses, count_tokens and models, and whatever else lies under
//! the base URL.
//!
//! - **One lease per task, on a port of its own.** An agent is given
//!   `http://127.0.0.1:<port>/t/<token>` as its base URL (or `plait-<token>` as its key,
//!   for a client whose base URL takes no path), in its environment, never on a command
//!   line plait writes (a plan's own `{gateway}` placeholder puts it there). Each lease listens on a port of its own and takes only its own token there; the
//!   task's walls open that port alone (`network = "gateway"`: forwarded into its network
//!   namespace, or Landlock's TCP rule by port), so a task that learns another's token has
//!   no way to the port that takes it. The gateway swaps in the provider's real key, so
//!   the key never enters an agent's process, and takes it out of whatever comes back
//!   (`redact`: a provider that echoes headers); where plait holds no key (a Claude Code
//!   login), the client's own credentials go through as they are. Every request is
//!   attributed to its task.
//! - **Only a model's endpoints.** A request's target is decoded once and refused unless
//!   it is plainly one of them (`endpoints`): no backslash, escaped separator or escape,
//!   dot or empty segment, absolute-form URL; and the URL sent is checked to be exactly
//!   that path under the provider's base URL.
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
//!   it ends, so the task's tokens and cost are live. The meter is a ceiling: each request
//!   for an answer reserves its worst case (its input, and its `max_tokens` of output, at
//!   its model's prices) until it ends, and is admitted only while what was spent and what
//!   is in flight leave room, held while requests in flight hold the rest, and refused
//!   once the budget is spent (the CLI is told in its provider's words); so a budget is
//!   passed by one request's worth at most, however many are sent at once.
//!   An answer that carries no usage (a local server's stream) is estimated from its text
//!   and marked so ([`plait_llm::estimate`]).
//!
//! The crate's files follow a request: `lease` (a task's route, token and port; its
//! reservations), `request` (which task a request is for, and whether it may pass:
//! `endpoints`), `call` (the request sent on, retried, and its answer passed through,
//! `redact`ed), `usage` (what the answer used, and may use at most).
//!
//! Start from [`Gateway`] (one per run) and [`Lease`] (one task's way through it, opened
//! from a [`Route`]: the provider, its limiter, the transcript and the [`Meter`] its
//! answers count against). A crate of its own because it is a server with a life of its
//! own, between the agent CLIs (which it never trusts) and the providers.
//!
//! ```no_run
//! # async fn example(route: plait_gateway::Route) -> Result<(), Box<dyn std::error::Error>> {
//! let gateway = plait_gateway::Gateway::start(plait_llm::client()?).await?;
//! let lease = gateway.open(route)?;
//! // The task's agent CLI is given these in its environment, never on a command line.
//! let (url, key) = (lease.base_url(), lease.key());
//! # let _ = (url, key);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

mod call;
mod endpoints;
mod lease;
mod redact;
mod request;
mod usage;

pub use lease::{Admission, Lease, Meter, Route};
use lease::{Door, Inner};

/// The running gateway: the routes of its leases, each served on a port of its own.
pub struct Gateway {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").finish_non_exhaustive()
    }
}

impl Gateway {
    /// Starts the gateway; `client` sends the requests on (its connections kept alive,
    /// HTTP/2 where the provider speaks it). Each lease it opens listens on a free port of
    /// 127.0.0.1 of its own.
    pub async fn start(client: reqwest::Client) -> std::io::Result<Gateway> {
        Ok(Gateway {
            inner: Arc::new(Inner {
                client,
                routes: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Opens a way through for one task's agent, on a port of its own.
    pub fn open(&self, route: Route) -> std::io::Result<Lease> {
        Lease::open(&self.inner, route)
    }
}

/// Serves `door`'s lease on `listener` until the sender returned is used or dropped
/// (requests in flight finish).
fn serve(listener: tokio::net::TcpListener, door: Arc<Door>) -> oneshot::Sender<()> {
    // Each event of a stream goes out as it comes, not when the last one is acked.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let app = axum::Router::new()
        .fallback(request::handle)
        .with_state(door);
    tokio::spawn(async move {
        let served = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stopped.await;
        });
        if let Err(e) = served.await {
            tracing::warn!("a gateway lease's listener stopped: {e}");
        }
    });
    stop
}

#[cfg(test)]
mod tests;
