//! `plait serve`: the review page and its JSON API, on 127.0.0.1 only. The page (HTML, CSS
//! and a little JavaScript, compiled into the binary) lists the repository's runs and, for
//! one run, its tasks, the gate and each task's work (`data`): the run page reads the run's
//! `summary` (a row's worth per task) and what git says of its `branches` (+/− lines,
//! branches moved or merged by hand, the target's move), a task's page its `rounds` and,
//! for a task run as several, its `attempts`; the records come through a `cache` kept by
//! `state.json`'s version. While a run goes on the page follows the run's events
//! (`events`, server-sent: the changed rows, not the record); its decisions and its
//! steering of a running task (`actions`) call the same use cases as the command line
//! (`ops`), in this process, so each does exactly what the command does. Every request must
//! name this server as its `Host`, and every changing one carry the server's token.
//!
//! Start from [`serve`] with [`ServeSettings`] (the repository's `Context`, the run to open
//! on, the token), then `data` for what each page reads. A crate of its own because the
//! page is a second front end beside the command line: it calls the same `ops` and words
//! (`words`) and owns only HTTP, the page and its cache.
//!
//! ```no_run
//! # async fn example(settings: plait_serve::ServeSettings) -> std::io::Result<()> {
//! let listener = plait_serve::bind(0).await?;
//! println!("http://{}", listener.local_addr()?);
//! let (_interrupt, cancel) = plait_core::cancel::Cancel::new();
//! plait_serve::serve(listener, settings, cancel).await
//! # }
//! ```

#![deny(missing_docs)]

mod actions;
mod attempts;
mod branches;
mod cache;
mod data;
mod events;
mod rounds;
mod summary;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use plait_core::cancel::Cancel;
use plait_core::sync::Locked as _;

/// What the server serves.
#[derive(Clone)]
pub struct ServeSettings {
    /// The repository whose runs it shows, opened once for the server: its store, the
    /// environment a landing's checks resolve variables from, and the plait program the
    /// agents' hooks of a send-back's round call back.
    pub context: plait_stages::context::Context,
    /// The run the page opens on, if one was named.
    pub run: Option<String>,
    /// The token every changing request must carry (`X-Plait-Token`).
    pub token: String,
}

/// The header that carries the server's token.
const TOKEN_HEADER: &str = "x-plait-token";

/// The server's shared state.
struct App {
    settings: ServeSettings,
    /// The hosts a request may name: this server's address as `127.0.0.1:PORT` and
    /// `localhost:PORT`.
    hosts: [String; 2],
    cancel: Cancel,
    /// The runs' records as last read, and what was made of them.
    records: cache::Records,
    /// The tasks' +/− lines, by commit.
    lines: branches::LineCounts,
    /// The send-back rounds that outlived their request, waited for before the server
    /// ends (the server's cancellation interrupts them, and they save their run).
    rounds: std::sync::Mutex<Vec<tokio::task::JoinHandle<Result<(), ApiError>>>>,
}

/// A failed API request: its status and what to tell the page.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(serde_json::json!({"error": self.message}));
        (self.status, body).into_response()
    }
}

/// Binds 127.0.0.1:`port` (0: a free port).
pub async fn bind(port: u16) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await
}

/// Serves on `listener` until `cancel` fires.
pub async fn serve(
    listener: tokio::net::TcpListener,
    settings: ServeSettings,
    cancel: Cancel,
) -> std::io::Result<()> {
    let port = listener.local_addr()?.port();
    let app = Arc::new(App {
        settings,
        hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
        cancel: cancel.clone(),
        records: cache::Records::default(),
        lines: branches::LineCounts::default(),
        rounds: Default::default(),
    });
    let router = Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(asset))
        .route("/api/runs", get(data::runs))
        .route("/api/runs/{run}", get(data::run))
        .route("/api/runs/{run}/summary", get(data::run_summary))
        .route("/api/runs/{run}/branches", get(branches::branches))
        .route("/api/runs/{run}/search", get(data::search))
        .route("/api/runs/{run}/tasks/{task}", get(data::task))
        .route("/api/runs/{run}/tasks/{task}/diff", get(data::diff))
        .route("/api/runs/{run}/events", get(events::follow))
        .route(
            "/api/runs/{run}/tasks/{task}/{action}",
            post(actions::decide),
        )
        .route("/api/runs/{run}/tasks/{task}/tell", post(actions::tell))
        .route("/api/runs/{run}/tasks/{task}/stop", post(actions::stop))
        .route("/api/runs/{run}/land", post(actions::land))
        .fallback(|| async { ApiError::not_found("no such page") })
        .layer(middleware::from_fn_with_state(app.clone(), guard));
    let served = axum::serve(listener, router.with_state(app.clone()))
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await;
    let rounds = std::mem::take(&mut *app.rounds.locked());
    for round in rounds {
        let _ = round.await;
    }
    served
}

/// Refuses a request whose `Host` is not this server (a page of another site that
/// reached it through DNS rebinding names its own), and a changing request without the
/// token or from another origin.
async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !app.hosts.iter().any(|h| h == host) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "refused: the request names host `{host}`, and this server answers only as {}",
                app.hosts[0]
            ),
        )
        .into_response();
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        if let Err(refusal) = changing_allowed(&app, headers) {
            return refusal.into_response();
        }
    }
    next.run(request).await
}

/// Whether a changing request carries the server's token and, when it names its origin,
/// comes from this server's page.
fn changing_allowed(app: &App, headers: &HeaderMap) -> Result<(), ApiError> {
    let forbidden = |m: &str| Err(ApiError::new(StatusCode::FORBIDDEN, m));
    let token = headers
        .get(TOKEN_HEADER)
        .and_then(|t| t.to_str().ok())
        .unwrap_or("");
    if !same_secret(token.as_bytes(), app.settings.token.as_bytes()) {
        return forbidden("refused: a changing request needs this server's token (header X-Plait-Token, as the page sends it)");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !app.hosts.iter().any(|h| origin == format!("http://{h}")) {
            return forbidden("refused: the request comes from another origin");
        }
    }
    Ok(())
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh token: 128 bits from the kernel's random source.
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(plait_core::hex::lower(&bytes))
}

/// The page, with the token and the run filled in.
async fn index(State(app): State<Arc<App>>) -> Response {
    let page = include_str!("page/index.html")
        .replace("{{TOKEN}}", &app.settings.token)
        .replace(
            "{{RUN}}",
            &escape_attr(app.settings.run.as_deref().unwrap_or("")),
        );
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            // The page runs its own script only and is never framed.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        page,
    )
        .into_response()
}

fn escape_attr(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The page's files, compiled in.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "attempts.js",
        "text/javascript; charset=utf-8",
        include_str!("page/attempts.js"),
    ),
    (
        "steer.js",
        "text/javascript; charset=utf-8",
        include_str!("page/steer.js"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("page/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("page/style.css"),
    ),
];

async fn asset(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => (
            [
                (header::CONTENT_TYPE, *kind),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *body,
        )
            .into_response(),
        None => ApiError::not_found(format!("no asset `{name}`")).into_response(),
    }
}

/// Runs blocking work (git, files) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(format!("the request's work panicked: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
        assert!(!same_secret(b"", b"a"));
    }

    #[test]
    fn tokens_are_fresh() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
