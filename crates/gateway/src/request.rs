//! One request from an agent CLI: its target read strictly (`endpoints::target`), the
//! task it belongs to (its token, in the path or as its key, which must be the lease of the
//! port it came to), whether it may pass, its worst case admitted against the budget, and
//! the answer handed back as the call gets it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use tokio::sync::{mpsc, oneshot};

use crate::call::{error, Call, Head};
use crate::endpoints::{allowed, target, Target, MAX_BODY};
use crate::lease::{lock, Door, Entry, Reservation, KEY_PREFIX};

/// Why a request names no lease this port serves.
const NOT_HERE: &str = "plait's gateway: no running task holds this token on this port (its \
    agent has ended, the request came from outside the run, or it is another task's lease: \
    each is taken only on its own port)";

/// The route a request belongs to: the token its path (`/t/<token>/rest`) or its key
/// (`plait-<token>`) carries, which must be `door`'s own, as must every stand-in it holds.
fn find(door: &Door, target: &Target, headers: &HeaderMap) -> Option<Arc<Entry>> {
    let stand_ins: Vec<&str> = ["x-api-key", "authorization"]
        .iter()
        .flat_map(|name| headers.get_all(*name))
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.trim().trim_start_matches("Bearer ").trim())
        .filter_map(|v| v.strip_prefix(KEY_PREFIX))
        .collect();
    let token = target.token.as_deref().or(stand_ins.first().copied())?;
    if token != door.token || stand_ins.iter().any(|s| *s != door.token) {
        return None;
    }
    lock(&door.inner.routes).get(token).cloned()
}

pub(crate) async fn handle(State(door): State<Arc<Door>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let target = match target(&parts.uri) {
        Ok(target) => target,
        Err(why) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("plait's gateway refused the request's target: {why}"),
            )
        }
    };
    let Some(entry) = find(&door, &target, &parts.headers) else {
        return error(StatusCode::FORBIDDEN, "authentication_error", NOT_HERE);
    };
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(e) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                &format!("plait's gateway could not read the request: {e}"),
            )
        }
    };
    if let Err(why) = allowed(&parts.method, &target.rest) {
        return error(StatusCode::FORBIDDEN, "permission_error", &why);
    }
    let call = match Call::new(entry, parts.method, &target, parts.headers, body) {
        Ok(call) => call,
        Err(why) => return error(StatusCode::FORBIDDEN, "permission_error", &why),
    };
    let call = match admit(call).await {
        Ok(call) => call,
        Err(refused) => return *refused,
    };
    let (head, told) = oneshot::channel();
    let (chunks, body) = mpsc::unbounded_channel::<Result<Bytes, std::io::Error>>();
    tokio::spawn(call.exchange(door.inner.client.clone(), head, chunks));
    match told.await {
        Ok(Head::Answer { status, headers }) => {
            let stream = futures_util::stream::unfold(body, |mut body| async move {
                body.recv().await.map(|chunk| (chunk, body))
            });
            let mut response = Response::new(Body::from_stream(stream));
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            response
        }
        Ok(Head::Error(response)) => *response,
        Err(_) => error(
            StatusCode::BAD_GATEWAY,
            "api_error",
            "plait's gateway lost the request",
        ),
    }
}

/// A request for an answer admitted against its task's budget, its worst case reserved
/// until it ends (waiting while requests in flight hold what is left); any other request
/// as it is; the refusal, in the provider's words, when the budget is spent.
async fn admit(mut call: Call) -> Result<Call, Box<Response>> {
    let Some(worst) = call.worst_usd() else {
        return Ok(call);
    };
    call.entry().asked.fetch_add(1, Ordering::Relaxed);
    match Reservation::admit(&call.entry().route.meter, worst).await {
        Ok(reservation) => {
            call.reserve(reservation);
            Ok(call)
        }
        Err(why) => Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &format!("plait refused the request: {why} (--max-cost)"),
        ))),
    }
}
