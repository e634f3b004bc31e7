//! HTTP replies: an answer's status, headers and body, delivered whole, a few bytes at a time
//! or cut short; and the providers' error bodies.

use axum::body::{Body, Bytes};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::answer::Call;
use super::Provider;

/// An answer before it becomes an HTTP response.
pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    body: Vec<u8>,
    pub(super) delivery: Delivery,
    /// Load mode: counts the request in flight until its body is sent or dropped.
    pub(super) in_flight: Option<InFlight>,
    /// The output tokens the answer used (0 for an error or a fault).
    pub(super) output_tokens: u64,
}

/// Runs its closure once, when dropped.
pub(super) struct InFlight(Option<Box<dyn FnOnce() + Send + Sync>>);

impl InFlight {
    pub(super) fn new(done: impl FnOnce() + Send + Sync + 'static) -> InFlight {
        InFlight(Some(Box::new(done)))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            done();
        }
    }
}

#[derive(Clone, Copy)]
pub(super) enum Delivery {
    /// The body in one piece.
    Whole,
    /// Chunks of 5 to 13 bytes, each flushed on its own.
    Trickle,
    /// The full body's content-length, half the body, then the connection drops.
    CutShort,
}

impl Reply {
    pub(super) fn new(call: &Call, status: u16, content_type: &str, body: Vec<u8>) -> Reply {
        Reply {
            status,
            headers: base_headers(call.provider, call.serial, content_type),
            body,
            delivery: Delivery::Whole,
            in_flight: None,
            output_tokens: 0,
        }
    }

    pub(super) fn into_response(self) -> Response {
        let mut response = Response::builder().status(self.status);
        for (name, value) in &self.headers {
            response = response.header(name, value);
        }
        let in_flight = self.in_flight;
        let pieces = match self.delivery {
            Delivery::Whole if in_flight.is_none() => {
                return response.body(Body::from(self.body)).expect("a response")
            }
            Delivery::Whole => vec![Ok(Bytes::from(self.body))],
            Delivery::Trickle => trickle(self.body).into_iter().map(Ok).collect(),
            Delivery::CutShort => {
                response = response.header("content-length", self.body.len());
                let half = Bytes::copy_from_slice(&self.body[..self.body.len() / 2]);
                vec![
                    Ok(half),
                    Err(std::io::Error::other("the mock cuts the body short")),
                ]
            }
        };
        let body = futures_util::stream::iter(pieces).then(|piece| async move {
            // Pending once, so the server flushes each piece by itself.
            tokio::task::yield_now().await;
            piece
        });
        // The guard lives as long as the body: until it is sent, or dropped with the connection.
        let body = body.map(move |piece| {
            let _counted = &in_flight;
            piece
        });
        response.body(Body::from_stream(body)).expect("a response")
    }
}

/// Cuts a body into pieces of 5 to 13 bytes, wherever they fall.
fn trickle(body: Vec<u8>) -> Vec<Bytes> {
    let sizes = [5, 9, 13, 7, 11, 6, 12, 8, 10].into_iter().cycle();
    let mut rest = body.as_slice();
    let mut pieces = Vec::new();
    for size in sizes {
        if rest.is_empty() {
            break;
        }
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        pieces.push(Bytes::copy_from_slice(piece));
        rest = tail;
    }
    pieces
}

fn base_headers(provider: Provider, serial: u64, content_type: &str) -> Vec<(String, String)> {
    let request_id = match provider {
        Provider::Anthropic => "request-id",
        Provider::OpenAi => "x-request-id",
    };
    vec![
        ("content-type".into(), content_type.into()),
        (request_id.into(), format!("req_{serial}")),
    ]
}

/// A scripted HTTP error; its headers replace the mock's own of the same name.
pub(super) fn status_reply(
    call: &Call,
    status: u16,
    body: String,
    headers: Vec<(String, String)>,
) -> Reply {
    let mut reply = error_reply(call.provider, call.serial, status, default_message(status));
    if !body.is_empty() {
        if serde_json::from_str::<Value>(&body).is_err() {
            let content_type = reply.headers.iter_mut().find(|(n, _)| n == "content-type");
            content_type.expect("error replies have a content-type").1 = "text/plain".into();
        }
        reply.body = body.into_bytes();
    }
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        reply.headers.retain(|(n, _)| *n != name);
        reply.headers.push((name, value));
    }
    reply
}

/// A 200 whose JSON body is not a model's turn (a token count, the CLI's preflight).
pub(super) fn json_reply(provider: Provider, serial: u64, body: &Value) -> Reply {
    Reply {
        status: 200,
        headers: base_headers(provider, serial, "application/json"),
        body: body.to_string().into_bytes(),
        delivery: Delivery::Whole,
        in_flight: None,
        output_tokens: 0,
    }
}

pub(super) fn error_reply(provider: Provider, serial: u64, status: u16, message: &str) -> Reply {
    Reply {
        status,
        headers: base_headers(provider, serial, "application/json"),
        body: error_body(provider, serial, status, message)
            .to_string()
            .into_bytes(),
        delivery: Delivery::Whole,
        in_flight: None,
        output_tokens: 0,
    }
}

/// The provider's error body for `status`.
pub(super) fn error_body(provider: Provider, serial: u64, status: u16, message: &str) -> Value {
    match provider {
        Provider::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                402 => "billing_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                500.. => "api_error",
                _ => "invalid_request_error",
            };
            let error = json!({"type": kind, "message": message});
            json!({"type": "error", "error": error, "request_id": format!("req_{serial}")})
        }
        Provider::OpenAi => {
            let (kind, code) = match status {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                404 => ("invalid_request_error", json!("unknown_url")),
                429 => ("requests", json!("rate_limit_exceeded")),
                500.. => ("server_error", Value::Null),
                _ => ("invalid_request_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
    }
}

/// The status and message of the provider's "try again later" error.
pub(super) fn overloaded(provider: Provider) -> (u16, &'static str) {
    match provider {
        Provider::Anthropic => (529, "Overloaded"),
        Provider::OpenAi => (500, "The server had an error while processing your request"),
    }
}

fn default_message(status: u16) -> &'static str {
    match status {
        401 => "invalid api key",
        429 => "Rate limit reached; slow down",
        529 => "Overloaded",
        500.. => "Internal server error",
        _ => "Request failed",
    }
}
