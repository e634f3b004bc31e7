//! The test suite's mock model server as a process of its own, for measuring plait apart
//! from it: `cargo run --release --example mock_model -- KEY [LATENCY_MS]` prints the base
//! URL, then serves Anthropic-style answers (one `done` turn per task) until killed.

#[allow(dead_code)]
#[path = "../tests/it/mock/mod.rs"]
mod mock;

use std::time::Duration;

fn main() {
    let mut args = std::env::args().skip(1);
    let key = args.next().unwrap_or_else(|| "sk-mock".to_string());
    let latency: u64 = args.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let server = mock::MockModel::start(mock::Provider::Anthropic, &key);
    server.keep_bodies(false);
    server.set_latency(Duration::from_millis(latency));
    println!("{}", server.url());
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
