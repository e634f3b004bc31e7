//! A task's way through the gateway: the route its requests take (provider, limiter,
//! transcript, meter), the token that names it, and the lease its agent holds while it runs.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use plait_core::state::Usage;
use plait_llm::limiter::Limiter;
use plait_llm::provider::ProviderSettings;
use serde_json::Value;

/// What an agent CLI is given as its key when the gateway holds the real one.
pub(crate) const KEY_PREFIX: &str = "plait-";

/// What a task's requests are counted against.
pub trait Meter: Send + Sync {
    /// Why no further request may be sent (the run's budget is spent), if so.
    fn refused(&self) -> Option<String>;
    /// One answered request: its tokens, cost and time.
    fn answered(&self, usage: &Usage);
}

/// Where one task's requests go, and what they are counted against.
pub struct Route {
    /// The task's id, for the logs.
    pub task: String,
    /// The provider whose base URL and key the requests are sent with (no key: the
    /// client's own credentials go through).
    pub provider: Arc<ProviderSettings>,
    /// The limiter of that provider and key, which plait's own requests share.
    pub limiter: Arc<Limiter>,
    /// The task's transcript, appended to.
    pub transcript: PathBuf,
    /// What its answers are counted against.
    pub meter: Arc<dyn Meter>,
}

pub(crate) struct Entry {
    pub(crate) route: Route,
    /// The credentials file of a login (Claude Code's) whose bearer the gateway sends in
    /// place of the stand-in the client was given (see [`Lease::login`]).
    pub(crate) login: Mutex<Option<PathBuf>>,
    /// Requests for an answer so far, numbered in the transcript.
    pub(crate) turns: AtomicU32,
    /// Answers counted so far.
    pub(crate) answered: Arc<AtomicU64>,
    /// Requests for an answer received so far, answered or not.
    pub(crate) asked: Arc<AtomicU64>,
}

pub(crate) type Routes = Mutex<HashMap<String, Arc<Entry>>>;

pub(crate) struct Inner {
    pub(crate) client: reqwest::Client,
    pub(crate) routes: Routes,
}

/// A task's way through the gateway: held while its agent runs; dropping it closes it.
pub struct Lease {
    token: String,
    port: u16,
    routes: Weak<Inner>,
    holds_key: bool,
    answered: Arc<AtomicU64>,
    asked: Arc<AtomicU64>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("port", &self.port).finish()
    }
}

impl Lease {
    /// Enters `route` in the gateway's table under a new token, and the lease that holds it.
    pub(crate) fn open(inner: &Arc<Inner>, port: u16, route: Route) -> Lease {
        let token = token();
        // A server that takes no key gets none, but its clients get the stand-in: some
        // (litellm, under aider) refuse to send a request without a key.
        let holds_key = route.provider.api_key.is_some() || route.provider.keyless;
        let answered = Arc::new(AtomicU64::new(0));
        let asked = Arc::new(AtomicU64::new(0));
        lock(&inner.routes).insert(
            token.clone(),
            Arc::new(Entry {
                route,
                login: Mutex::new(None),
                turns: AtomicU32::new(0),
                answered: answered.clone(),
                asked: asked.clone(),
            }),
        );
        Lease {
            token,
            port,
            routes: Arc::downgrade(inner),
            holds_key,
            answered,
            asked,
        }
    }
}

impl Lease {
    /// The base URL the agent is given: its provider's base URL, as the gateway serves it
    /// to this task.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/t/{}", self.port, self.token)
    }

    /// What the agent is given as its key: a stand-in the gateway replaces with the real
    /// one (or drops, for a server that takes no key); `None` when plait holds no key and
    /// the client's own credentials go through.
    pub fn key(&self) -> Option<String> {
        self.holds_key
            .then(|| format!("{KEY_PREFIX}{}", self.token))
    }

    /// The gateway's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many answers the gateway has counted for this task so far.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// How many requests for an answer the task's agent has sent so far, whatever became
    /// of them: none after a round means its model was never asked.
    pub fn asked(&self) -> u64 {
        self.asked.load(Ordering::Relaxed)
    }
}

impl Lease {
    /// Keeps a login in plait: the client is given `plait-<token>` as its bearer (in a
    /// credentials file of its own that plait writes), and the gateway sends the login's
    /// real access token, read from `credentials` (Claude Code's `.credentials.json`) at each
    /// request, so a refresh the user's own CLI makes meanwhile is taken. Returns the
    /// stand-in.
    pub fn login(&self, credentials: PathBuf) -> String {
        if let Some(inner) = self.routes.upgrade() {
            if let Some(entry) = lock(&inner.routes).get(&self.token) {
                *entry.login.lock().unwrap_or_else(|e| e.into_inner()) = Some(credentials);
            }
        }
        format!("{KEY_PREFIX}{}", self.token)
    }
}

/// The OAuth access token of a Claude Code login's credentials file.
pub(crate) fn login_token(credentials: &std::path::Path) -> Option<String> {
    let text = std::fs::read(credentials).ok()?;
    let value: Value = serde_json::from_slice(&text).ok()?;
    value["claudeAiOauth"]["accessToken"]
        .as_str()
        .map(str::to_string)
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(inner) = self.routes.upgrade() {
            lock(&inner.routes).remove(&self.token);
        }
    }
}

pub(crate) fn lock(routes: &Routes) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Entry>>> {
    routes.lock().unwrap_or_else(|e| e.into_inner())
}

/// 128 random bits, in hex.
fn token() -> String {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // No /dev/urandom: the clock and an address, which no agent sees before it runs.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let here = &bytes as *const _ as usize as u128;
        bytes = (nanos ^ here.rotate_left(64)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
