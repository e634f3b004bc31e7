//! The timeline of one run of agent CLIs against the bucketed mock, so the time a run takes
//! can be told apart: when each CLI started, when it first asked its model, when the
//! server admitted and answered each request (and refused one 429), and through plait how
//! long the gateway's limiter held each request and for what. The server's own record
//! (the mock's) is the same for both ways of running; plait's side comes from what a run
//! leaves anyway: its `events.jsonl` (when each task's round began) and the tasks'
//! transcripts (each try of a request: when it ended, how long it took, how long the
//! limiter held it first and for what).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::mock::Recorded;

/// A request for an answer as the gateway's limiter saw it.
struct Held {
    /// When it reached the gateway, in seconds from the origin.
    arrived: f64,
    /// What it waited for, in seconds: a slot, its turn, a bucket or a pause.
    slot: f64,
    turn: f64,
    limit: f64,
    why: Option<String>,
}

/// One run's timeline, every time in seconds from its origin (the command's start).
#[derive(Default)]
pub struct Timeline {
    /// Each CLI's start: plait's round began, or the CLI was spawned.
    starts: BTreeMap<String, f64>,
    /// Requests for an answer at the server: (task, received, answered, status).
    server: Vec<(String, f64, f64, u16)>,
    /// Through plait: each try at the gateway, by task.
    held: BTreeMap<String, Vec<Held>>,
    /// When the server's bucket was charged (every request it did not refuse, token
    /// counts and `HEAD`s too, as the mock charges them), and its size a minute.
    charged: Vec<f64>,
    rpm: f64,
    /// When the last CLI ended.
    end: f64,
}

fn secs(origin: SystemTime, at: SystemTime) -> f64 {
    at.duration_since(origin)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

impl Timeline {
    /// The server's side: its requests for an answer (token counts and `HEAD` left out),
    /// and its bucket of `rpm` requests a minute.
    pub fn new(origin: SystemTime, requests: &[Recorded], took: Duration, rpm: usize) -> Timeline {
        let mut charged: Vec<f64> = requests
            .iter()
            .filter(|r| r.status != 429)
            .map(|r| secs(origin, r.received))
            .collect();
        charged.sort_by(f64::total_cmp);
        let server = requests
            .iter()
            .filter(|r| r.method == "POST" && r.path == "/v1/messages")
            .map(|r| {
                let task = r.task.clone().unwrap_or_default();
                let (received, answered) = (secs(origin, r.received), secs(origin, r.answered));
                (task, received, answered, r.status)
            })
            .collect();
        Timeline {
            server,
            charged,
            rpm: rpm as f64,
            end: took.as_secs_f64(),
            ..Timeline::default()
        }
    }

    /// Each CLI spawned at `at` (the CLIs on their own).
    pub fn spawned(mut self, tasks: usize, at: f64) -> Timeline {
        self.starts = (0..tasks).map(|k| (format!("t{k}"), at)).collect();
        self
    }

    /// plait's side, from the run's directory under `repo`: each task's first round began
    /// (`events.jsonl`) and each try of its requests (its transcript).
    pub fn plait(mut self, origin: SystemTime, repo: &Path) -> Timeline {
        let runs = repo.join(".git/plait/runs");
        let Some(run) = std::fs::read_dir(&runs)
            .ok()
            .and_then(|d| d.flatten().next())
        else {
            return self;
        };
        let events = std::fs::read_to_string(run.path().join("events.jsonl")).unwrap_or_default();
        for event in events
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            let (Some(task), Some(at)) = (event["task"]["task"].as_str(), event["at"].as_str())
            else {
                continue;
            };
            if event["task"]["state"] != "running" || self.starts.contains_key(task) {
                continue;
            }
            if let Ok(at) = humantime::parse_rfc3339_weak(at.trim_end_matches('Z')) {
                self.starts.insert(task.to_string(), secs(origin, at));
            }
        }
        for transcript in walk(run.path(), "transcript.jsonl") {
            let text = std::fs::read_to_string(&transcript).unwrap_or_default();
            for record in text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            {
                let Some(task) = task_of(&record) else {
                    continue;
                };
                let ms = |v: &Value| v.as_u64().unwrap_or(0) as f64 / 1000.0;
                let end = SystemTime::UNIX_EPOCH
                    + Duration::from_millis(record["at"].as_u64().unwrap_or(0));
                let waited = &record["waited"];
                let sent = secs(origin, end) - ms(&record["ms"]);
                self.held.entry(task).or_default().push(Held {
                    arrived: sent - ms(&waited["ms"]),
                    slot: ms(&waited["slot"]),
                    turn: ms(&waited["turn"]),
                    limit: ms(&waited["limit"]) + ms(&waited["shared"]),
                    why: waited["for"].as_str().map(str::to_string),
                });
            }
        }
        self
    }

    /// Each task's first request for an answer: at the gateway through plait, else at the
    /// server.
    fn first_requests(&self) -> BTreeMap<&str, f64> {
        let mut first = BTreeMap::new();
        for (task, held) in &self.held {
            if let Some(at) = held.iter().map(|h| h.arrived).reduce(f64::min) {
                first.insert(task.as_str(), at);
            }
        }
        for (task, received, ..) in &self.server {
            if self.held.contains_key(task) {
                continue;
            }
            let at = first.entry(task.as_str()).or_insert(*received);
            *at = at.min(*received);
        }
        first
    }

    /// Prints the timeline, indented, a row per `step` seconds, then its percentiles.
    pub fn print(&self, how: &str) {
        let step = ((self.end / 10.0 / 5.0).ceil() * 5.0).max(5.0);
        let first = self.first_requests();
        let held: Vec<&Held> = self.held.values().flatten().collect();
        println!("   timeline {how} (cumulative: CLIs started, first requests, answered; in the row: 429s, peak in flight at the server (arrival to first byte) and its request bucket at its lowest, requests the limiter held and its waits by reason):");
        println!(
            "     {:>9}  {:>7}  {:>9}  {:>8}  {:>4}  {:>9}  {:>6}  {:>5}  waited (s): slot / turn / bucket [for]",
            "t (s)", "started", "first req", "answered", "429", "in flight", "bucket", "held"
        );
        let mut from = 0.0;
        while from < self.end {
            let to = from + step;
            let upto = |t: f64| t < to;
            let within = |t: f64| t >= from && t < to;
            let started = self.starts.values().filter(|t| upto(**t)).count();
            let asked = first.values().filter(|t| upto(**t)).count();
            let answered = self
                .server
                .iter()
                .filter(|r| r.3 == 200 && upto(r.2))
                .count();
            let refused = self
                .server
                .iter()
                .filter(|r| r.3 == 429 && within(r.1))
                .count();
            let peak = self.peak_in_flight(from, to);
            let here: Vec<&&Held> = held.iter().filter(|h| within(h.arrived)).collect();
            let waited: Vec<&&&Held> = here
                .iter()
                .filter(|h| h.slot + h.turn + h.limit >= 0.001)
                .collect();
            let sum = |f: fn(&Held) -> f64| waited.iter().map(|h| f(h)).sum::<f64>() + 0.0;
            let mut why: Vec<&str> = waited.iter().filter_map(|h| h.why.as_deref()).collect();
            why.sort();
            why.dedup();
            println!(
                "     {:>4.0}-{:<4.0}  {started:>7}  {asked:>9}  {answered:>8}  {refused:>4}  {peak:>9}  {:>6.1}  {:>5}  {:.1} / {:.1} / {:.1} [{}]",
                from,
                to,
                self.bucket_low(from, to).max(0.0),
                waited.len(),
                sum(|h| h.slot),
                sum(|h| h.turn),
                sum(|h| h.limit),
                why.join(",")
            );
            from = to;
        }
        let starts: Vec<f64> = self.starts.values().copied().collect();
        let lag: Vec<f64> = first
            .iter()
            .filter_map(|(task, at)| Some(at - self.starts.get(*task)?))
            .collect();
        let mut answers: Vec<f64> = self
            .server
            .iter()
            .filter(|r| r.3 == 200)
            .map(|r| r.2)
            .collect();
        answers.sort_by(f64::total_cmp);
        let nth = |n: usize| {
            answers
                .get(n.saturating_sub(1))
                .copied()
                .unwrap_or(f64::NAN)
        };
        println!(
            "     CLI start p50/p90/max {}; its first request after its start {}; answers 1st {:.1} s, 60th {:.1} s, last {:.1} s; end {:.1} s",
            spread(starts),
            spread(lag),
            nth(1),
            nth(60),
            nth(answers.len()),
            self.end
        );
        if !held.is_empty() {
            let total = |f: fn(&Held) -> f64| held.iter().map(|h| f(h)).sum::<f64>();
            let waits = held
                .iter()
                .filter(|h| h.slot + h.turn + h.limit >= 0.001)
                .count();
            println!(
                "     the limiter held {waits} of {} tries: {:.1} s for a slot, {:.1} s for its turn, {:.1} s for a bucket or a pause",
                held.len(),
                total(|h| h.slot),
                total(|h| h.turn),
                total(|h| h.limit)
            );
        }
    }

    /// The lowest level of the server's request bucket between `from` and `to`: what a
    /// request held for the bucket then could have had (a bucket at 1 or more had room).
    fn bucket_low(&self, from: f64, to: f64) -> f64 {
        let (mut level, mut at) = (self.rpm, 0.0);
        let mut low = f64::INFINITY;
        let rate = self.rpm / 60.0;
        for t in self.charged.iter().copied().chain([to]) {
            let t = t.min(to);
            level = (level + (t - at) * rate).min(self.rpm);
            at = t;
            if t >= from {
                low = low.min(level);
            }
            if t >= to {
                break;
            }
            level -= 1.0;
            if t >= from {
                low = low.min(level);
            }
        }
        low
    }

    /// The most requests in flight at the server at once between `from` and `to`.
    fn peak_in_flight(&self, from: f64, to: f64) -> usize {
        let mut edges: Vec<(f64, i32)> = self
            .server
            .iter()
            .filter(|r| r.3 == 200 && r.2 >= from && r.1 < to)
            .flat_map(|r| [(r.1, 1), (r.2, -1)])
            .collect();
        edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let (mut now, mut peak) = (0i32, 0i32);
        for (_, d) in edges {
            now += d;
            peak = peak.max(now);
        }
        peak.max(0) as usize
    }
}

/// p50/p90/max of `values`, in seconds.
fn spread(mut values: Vec<f64>) -> String {
    if values.is_empty() {
        return "-".to_string();
    }
    values.sort_by(f64::total_cmp);
    let at = |p: f64| values[((values.len() - 1) as f64 * p).round() as usize];
    format!("{:.1}/{:.1}/{:.1} s", at(0.5), at(0.9), at(1.0))
}

/// The task a transcript's record is for: the `Task id:` line of its system prompt.
fn task_of(record: &Value) -> Option<String> {
    let system = &record["request"]["system"];
    let text = match system {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let rest = &text[text.find("Task id: ")? + "Task id: ".len()..];
    let id: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || "._~-".contains(*c))
        .collect();
    (!id.is_empty()).then_some(id)
}

/// Every file named `name` under `dir`.
fn walk(dir: std::path::PathBuf, name: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == name) {
                found.push(path);
            }
        }
    }
    found
}
