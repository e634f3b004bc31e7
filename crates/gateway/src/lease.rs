//! A task's way through the gateway: the route its requests take (provider, limiter,
//! transcript, meter), the token that names it, and the lease its agent holds while it runs.

use std::collections::HashMap;
use std::future::Future;
use std::io::Read as _;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use plait_core::state::Usage;
use plait_core::sync::Locked as _;
use plait_llm::limiter::Limiter;
use plait_llm::provider::ProviderSettings;
use serde_json::Value;
use tokio::sync::oneshot;

/// What an agent CLI is given as its key when the gateway holds the real one.
pub(crate) const KEY_PREFIX: &str = "plait-";

/// What a [`Meter`] says of a request for an answer, in time: admitted (its worst case
/// reserved), or why not.
pub type Admission<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// What a task's requests are counted against: a budget that is a ceiling, so each
/// request for an answer is admitted against what may still be spent, its worst case held
/// while it is in flight.
pub trait Meter: Send + Sync {
    /// Admits a request that may cost at most `worst` dollars, reserving it until the
    /// request is settled; waits while requests in flight hold what is left; `Err` says
    /// why it may not be sent (the run's budget is spent).
    fn admit(&self, worst: f64) -> Admission<'_>;
    /// A request admitted with `worst` has ended: its reservation given back and, when it
    /// was answered, its tokens, cost and time counted.
    fn settle(&self, worst: f64, usage: Option<&Usage>);
}

/// A request's reservation against its task's [`Meter`]: settled once, by its answer, or
/// given back whole when the request ends without one (refused, broken, abandoned).
pub(crate) struct Reservation {
    meter: Arc<dyn Meter>,
    worst: f64,
    settled: AtomicBool,
}

impl Reservation {
    /// Admits a request of `worst` dollars at most against `meter`.
    pub(crate) async fn admit(meter: &Arc<dyn Meter>, worst: f64) -> Result<Reservation, String> {
        meter.admit(worst).await?;
        Ok(Reservation {
            meter: meter.clone(),
            worst,
            settled: AtomicBool::new(false),
        })
    }

    /// The request ended having used `usage` (`None`: nothing to count).
    pub(crate) fn settle(&self, usage: Option<&Usage>) {
        if !self.settled.swap(true, Ordering::SeqCst) {
            self.meter.settle(self.worst, usage);
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.settle(None);
    }
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

/// One lease's listener: the only port on which its token is taken, so a task whose walls
/// let it reach its own port alone cannot use another's lease even knowing its token.
pub(crate) struct Door {
    pub(crate) inner: Arc<Inner>,
    pub(crate) token: String,
}

/// A task's way through the gateway: held while its agent runs; dropping it closes it
/// (its listener stops taking connections; requests in flight finish).
pub struct Lease {
    token: String,
    port: u16,
    routes: Weak<Inner>,
    stop: Option<oneshot::Sender<()>>,
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
    /// Enters `route` in the gateway's table under a new token, served on a listener of
    /// its own on 127.0.0.1, and the lease that holds it.
    pub(crate) fn open(inner: &Arc<Inner>, route: Route) -> std::io::Result<Lease> {
        let token = token();
        let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let port = listener.local_addr()?.port();
        let door = Arc::new(Door {
            inner: inner.clone(),
            token: token.clone(),
        });
        let stop = crate::serve(listener, door);
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
        Ok(Lease {
            token,
            port,
            routes: Arc::downgrade(inner),
            stop: Some(stop),
            holds_key,
            answered,
            asked,
        })
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

    /// The lease's own port on 127.0.0.1: the one its task's walls let it reach.
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
                *entry.login.locked() = Some(credentials);
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
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(inner) = self.routes.upgrade() {
            lock(&inner.routes).remove(&self.token);
        }
    }
}

pub(crate) fn lock(routes: &Routes) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Entry>>> {
    routes.locked()
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
    plait_core::hex::lower(&bytes)
}
