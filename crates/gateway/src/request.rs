//! One request from an agent CLI: the task it belongs to (its token, in the path or as
//! its key), whether it may pass, and the answer handed back as the call gets it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use tokio::sync::{mpsc, oneshot};

use crate::call::{error, Call, Head};
use crate::endpoints::{allowed, MAX_BODY};
use crate::lease::{lock, Entry, Inner, KEY_PREFIX};

/// The route a request belongs to and the path under its base URL: `/t/<token>/rest`, or
/// a key `plait-<token>` on a request to `/rest`.
fn find(inner: &Inner, path: &str, headers: &HeaderMap) -> Option<(Arc<Entry>, String)> {
    let routes = lock(&inner.routes);
    if let Some(rest) = path.strip_prefix("/t/") {
        let (token, rest) = rest.split_once('/').unwrap_or((rest, ""));
        return routes.get(token).map(|e| (e.clone(), rest.to_string()));
    }
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or(bearer)?;
    let token = key.trim().strip_prefix(KEY_PREFIX)?;
    let rest = path.trim_start_matches('/').to_string();
    routes.get(token).map(|e| (e.clone(), rest))
}

pub(crate) async fn handle(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Some((entry, rest)) = find(&inner, parts.uri.path(), &parts.headers) else {
        return error(
            StatusCode::FORBIDDEN,
            "authentication_error",
            "plait's gateway: no running task holds this token (its agent has ended, or the \
             request came from outside the run)",
        );
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
    if let Err(why) = allowed(&parts.method, &rest) {
        return error(StatusCode::FORBIDDEN, "permission_error", &why);
    }
    let path = match parts.uri.query() {
        Some(query) => format!("{rest}?{query}"),
        None => rest.clone(),
    };
    let call = Call::new(entry, parts.method, &rest, path, parts.headers, body);
    if call.asks() {
        call.entry().asked.fetch_add(1, Ordering::Relaxed);
        if let Some(why) = call.entry().route.meter.refused() {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("plait refused the request: {why} (--max-cost)"),
            );
        }
    }
    let (head, told) = oneshot::channel();
    let (chunks, body) = mpsc::unbounded_channel::<Result<Bytes, std::io::Error>>();
    tokio::spawn(call.exchange(inner.client.clone(), head, chunks));
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
