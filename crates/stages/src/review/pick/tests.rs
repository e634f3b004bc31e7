//! The judge's tests: reading its answers, and each kind of judge asked for real — a
//! command, an agent program, and a model behind a small HTTP server that speaks the
//! Anthropic messages API.

use super::*;
use std::sync::{Arc, Mutex};

use plait_llm::provider::{resolve_provider, ProviderFile};
use plait_sandbox::sandbox::SandboxMode;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[test]
fn an_answer_naming_a_candidate_is_taken_with_its_reason() {
    let answer = json!({"attempt": 3, "why": " smaller and complete "});
    assert_eq!(
        decide(&answer, &[1, 3]),
        Ok((3, "smaller and complete".to_string()))
    );
    // A program may print the number as text.
    let answer = json!({"attempt": "#1", "why": ""});
    assert_eq!(
        decide(&answer, &[1, 3]),
        Ok((1, "(the judge gave no reason)".to_string()))
    );
}

#[test]
fn an_answer_naming_no_candidate_is_asked_for_again() {
    let again = |answer: Value| match decide(&answer, &[1, 3]) {
        Err(Trouble::Again(problem)) => problem,
        other => panic!("{answer} was taken: {other:?}"),
    };
    assert_eq!(
        again(json!({"attempt": 7, "why": "x"})),
        "the judge named 7, not a candidate"
    );
    assert_eq!(
        again(json!({"attempt": 2, "why": "x"})),
        "the judge named 2, not a candidate"
    );
    let beyond = u64::from(u32::MAX) + 1;
    assert_eq!(
        again(json!({"attempt": beyond + 1})),
        format!("the judge named {}, not a candidate", beyond + 1)
    );
    assert!(again(json!({"attempt": -1})).contains("not an attempt's number"));
    assert!(again(json!({"attempt": "the second"})).contains("not an attempt's number"));
    assert!(again(json!({"attempt": 1.5})).contains("not an attempt's number"));
    assert_eq!(again(json!({"why": "x"})), "the answer named no attempt");
    assert!(again(json!([3])).contains("not a JSON object"));
}

#[test]
fn the_note_says_what_was_asked_again() {
    assert_eq!(answered_after(&[], 1), None);
    let problems = ["the judge named 7, not a candidate".to_string()];
    assert_eq!(
        answered_after(&problems, 2).as_deref(),
        Some("the judge named 7, not a candidate; asked again (answered on ask 2 of 3)")
    );
}

/// A task directory with two attempts' worktrees, and what a pick is given.
struct Setup {
    dir: tempfile::TempDir,
    budget: Budget,
    sandbox: SandboxSettings,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        for n in [1, 3] {
            std::fs::create_dir(dir.path().join(format!("attempt-{n}"))).unwrap();
        }
        Setup {
            dir,
            budget: Budget::new(Some(10.0)),
            sandbox: SandboxSettings {
                mode: SandboxMode::Off,
                ..SandboxSettings::default()
            },
        }
    }

    /// Attempts `numbers`, each with a diff, a commit and a worktree of its own.
    fn candidates(&self, numbers: &[u32]) -> Vec<Candidate<'static>> {
        let words = ["zero", "one", "two", "three"];
        numbers
            .iter()
            .map(|&n| Candidate {
                number: n,
                agent: "exec".to_string(),
                diff: format!("+{}\n", words[n as usize]),
                checks: &[],
                commit: format!("c{n}"),
                worktree: self.dir.path().join(format!("attempt-{n}")),
                summary: Some(format!("I wrote {}.", words[n as usize])),
            })
            .collect()
    }

    fn input<'a>(&'a self, candidates: &'a [Candidate<'a>]) -> PickInput<'a> {
        PickInput {
            run: "r1",
            goal: "count",
            task: "t1",
            prompt: "write a number",
            owns: &[],
            candidates,
            base: "base".to_string(),
            dir: self.dir.path().to_path_buf(),
            timeout: Duration::from_secs(30),
            budget: &self.budget,
            sandbox: &self.sandbox,
            plait_program: Path::new("plait"),
            gateway: None,
        }
    }
}

async fn pick_by(reviewer: &Reviewer, input: &PickInput<'_>) -> Picked {
    let (_fire, cancel) = Cancel::new();
    let client = reqwest::Client::new();
    pick(reviewer, input, &client, &Limiters::default(), &cancel).await
}

fn command(script: &str) -> Reviewer {
    Reviewer::Command(script.to_string())
}

#[tokio::test]
async fn one_candidate_or_no_judge_is_decided_without_asking() {
    let setup = Setup::new();
    let failing = command("exit 1");
    let one = setup.candidates(&[3]);
    let picked = pick_by(&failing, &setup.input(&one)).await;
    assert_eq!((picked.chosen, picked.by.as_str()), (3, "plait"));
    assert_eq!(picked.why, "the only attempt that passed");
    assert!(!setup.dir.path().join("pick.log").exists(), "not asked");
    let two = setup.candidates(&[3, 1]);
    let picked = pick_by(&Reviewer::Off, &setup.input(&two)).await;
    assert_eq!(picked.chosen, 1, "the lowest number, whatever the order");
    assert_eq!(picked.why, "no judge: the first attempt that passed");
    let picked = pick_by(&failing, &setup.input(&[])).await;
    assert_eq!(picked.chosen, 0);
}

#[tokio::test]
async fn a_command_judge_sees_the_candidates_and_is_asked_again_when_it_names_none() {
    let setup = Setup::new();
    let candidates = setup.candidates(&[1, 3]);
    let input = setup.input(&candidates);
    let sees = command(
        r#"test "$PLAIT_CANDIDATES" = "1 3" && test "$PLAIT_CANDIDATE_3" = c3 \
           && test "$(cat "$PLAIT_CANDIDATE_3_DIFF")" = "+three" \
           && test "$PLAIT_CANDIDATE_1_WORKTREE" = "$PWD" && echo 3"#,
    );
    let picked = pick_by(&sees, &input).await;
    assert_eq!(picked.chosen, 3, "{picked:?}");
    assert_eq!(
        (picked.why.as_str(), picked.by.as_str()),
        ("the pick command's choice", "command")
    );
    assert_eq!(picked.note, None);

    let second = command(
        r#"if [ -n "$PLAIT_PICK_PROBLEM" ]; then echo "it is smaller"; echo 3; else echo 7; fi"#,
    );
    let picked = pick_by(&second, &input).await;
    assert_eq!((picked.chosen, picked.why.as_str()), (3, "it is smaller"));
    assert_eq!(
        picked.note.as_deref(),
        Some("the judge named 7, not a candidate; asked again (answered on ask 2 of 3)")
    );

    let stubborn = pick_by(&command("echo 7"), &input).await;
    assert_eq!(stubborn.chosen, 1);
    let note = stubborn.note.unwrap();
    assert!(
        note.starts_with("fell back to the first that passed: "),
        "{note}"
    );
    assert_eq!(
        note.matches("the judge named 7").count(),
        3,
        "asked three times: {note}"
    );
}

#[tokio::test]
async fn a_judge_that_fails_or_may_not_spend_is_not_asked_again() {
    let mut setup = Setup::new();
    let candidates = setup.candidates(&[1, 3]);
    let picked = pick_by(&command("echo 3; exit 1"), &setup.input(&candidates)).await;
    assert_eq!(picked.chosen, 1);
    let note = picked.note.unwrap();
    assert!(
        note.contains("did not answer: command exited with status 1"),
        "{note}"
    );
    assert!(!note.contains("; then "), "asked once: {note}");

    setup.budget = Budget::new(Some(0.0));
    let picked = pick_by(&command("echo 3"), &setup.input(&candidates)).await;
    assert_eq!(picked.chosen, 1);
    assert!(picked
        .note
        .unwrap()
        .contains("not asked: stopped by budget"));
}

#[tokio::test]
async fn a_cli_judge_reads_the_attempts_in_its_prompt_and_answers_in_json() {
    let setup = Setup::new();
    let candidates = setup.candidates(&[1, 3]);
    let script = r###"case "$1" in
        *"## Attempt 3 (exec)"*"Choose one of: 1, 3"*)
            echo 'thinking...'; echo '{"attempt": 3, "why": "it says three"}';;
        *) echo '{"attempt": 9}';;
    esac"###;
    let argv = ["sh", "-c", script, "sh", "{prompt}"];
    let cli = plait_plan::CliSettings {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        gateway: None,
        answers_json: true,
    };
    let picked = pick_by(&Reviewer::Cli(Arc::new(cli)), &setup.input(&candidates)).await;
    assert_eq!(
        (picked.chosen, picked.why.as_str()),
        (3, "it says three"),
        "{picked:?}"
    );
    assert_eq!(picked.by, "cli sh");
    let prompt = std::fs::read_to_string(setup.dir.path().join("pick.schema.json")).unwrap();
    assert!(
        prompt.contains("\"attempt\""),
        "the schema is submit_pick's: {prompt}"
    );
}

/// A model server on `127.0.0.1:0` that answers each request with a `submit_pick` call
/// of the next of `inputs`, as the Anthropic messages API does without streaming; it
/// keeps each request's first line and body.
async fn serve(inputs: Vec<Value>) -> (String, Arc<Mutex<Vec<(String, Value)>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        let mut inputs = inputs.into_iter();
        while let Ok((mut socket, _)) = listener.accept().await {
            let request = read_request(&mut socket).await;
            let input = inputs.next().unwrap_or_else(|| json!({}));
            let n = kept.lock().unwrap().len() + 1;
            kept.lock().unwrap().push(request);
            let reply = json!({
                "id": format!("msg_{n}"), "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": format!("toolu_{n}"),
                             "name": SUBMIT_PICK, "input": input}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 1000, "output_tokens": 20}
            })
            .to_string();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nrequest-id: req_{n}\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    (url, seen)
}

/// One HTTP request's first line and JSON body.
async fn read_request(socket: &mut tokio::net::TcpStream) -> (String, Value) {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "the request ended early");
        bytes.extend_from_slice(&buf[..n]);
        let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&bytes[..end]).to_string();
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().unwrap())
            })
            .expect("a content-length");
        if bytes.len() >= end + 4 + length {
            let body = serde_json::from_slice(&bytes[end + 4..end + 4 + length]).unwrap();
            let first = head.lines().next().unwrap_or_default().to_string();
            return (first, body);
        }
    }
}

fn model_at(url: &str) -> Reviewer {
    let file = ProviderFile {
        base_url: Some(url.to_string()),
        api_key_env: Some(String::new()),
        stream: Some(false),
        ..ProviderFile::default()
    };
    Reviewer::Model(Arc::new(
        resolve_provider("anthropic", Some(&file), &|_| None).unwrap(),
    ))
}

#[tokio::test]
async fn a_model_judge_that_names_no_candidate_is_told_so_and_its_second_answer_taken() {
    let (url, seen) = serve(vec![
        json!({"attempt": 7, "why": "the seventh"}),
        json!({"attempt": 3, "why": "three is complete; one misses the test"}),
    ])
    .await;
    let setup = Setup::new();
    let candidates = setup.candidates(&[1, 3]);
    let picked = pick_by(&model_at(&url), &setup.input(&candidates)).await;
    assert_eq!(picked.chosen, 3, "{picked:?}");
    assert_eq!(picked.why, "three is complete; one misses the test");
    assert_eq!(picked.by, "model claude-sonnet-4-5 (anthropic)");
    assert_eq!(
        picked.note.as_deref(),
        Some("the judge named 7, not a candidate; asked again (answered on ask 2 of 3)")
    );
    let usage = picked.usage.unwrap();
    assert_eq!((usage.requests, usage.input_tokens), (2, 2000));
    assert!(usage.cost_usd.unwrap() > 0.0, "{usage:?}");

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for (line, body) in seen.iter() {
        assert!(line.starts_with("POST /v1/messages "), "{line}");
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": SUBMIT_PICK})
        );
        assert_eq!(body["tools"][0]["name"], SUBMIT_PICK);
        let text = body["messages"].to_string();
        for said in [
            "## Attempt 1 (exec)",
            "+three",
            "I wrote one.",
            "Choose one of: 1, 3",
        ] {
            assert!(text.contains(said), "{said:?} not in {text}");
        }
    }
    let first = seen[0].1["messages"].to_string();
    let second = seen[1].1["messages"].to_string();
    assert!(!first.contains("could not be used"), "{first}");
    assert!(
        second.contains("the judge named 7, not a candidate. Answer again, choosing one of: 1, 3"),
        "{second}"
    );
    let transcript = std::fs::read_to_string(setup.dir.path().join("pick.jsonl")).unwrap();
    assert_eq!(transcript.lines().count(), 2);
}

#[tokio::test]
async fn a_model_judges_cost_counts_against_the_budget() {
    let (url, seen) = serve(vec![json!({"attempt": 7}), json!({"attempt": 3})]).await;
    let mut setup = Setup::new();
    // One answer (1000 tokens in, 20 out at Sonnet's prices) spends more than this.
    setup.budget = Budget::new(Some(0.001));
    let candidates = setup.candidates(&[1, 3]);
    let picked = pick_by(&model_at(&url), &setup.input(&candidates)).await;
    assert_eq!(picked.chosen, 1);
    assert_eq!(seen.lock().unwrap().len(), 1, "not asked again");
    let note = picked.note.unwrap();
    assert!(
        note.contains("; then not asked: stopped by budget"),
        "{note}"
    );
}

#[tokio::test]
async fn a_model_judge_that_never_names_a_candidate_leaves_the_first() {
    let wrong = json!({"attempt": 2, "why": "two"});
    let (url, seen) = serve(vec![wrong.clone(), wrong.clone(), wrong]).await;
    let setup = Setup::new();
    let candidates = setup.candidates(&[3, 1]);
    let picked = pick_by(&model_at(&url), &setup.input(&candidates)).await;
    assert_eq!(picked.chosen, 1);
    assert_eq!(seen.lock().unwrap().len(), 3, "asked three times in all");
    let note = picked.note.unwrap();
    assert_eq!(
        note.matches("the judge named 2, not a candidate").count(),
        3,
        "{note}"
    );
    assert_eq!(picked.usage.unwrap().requests, 3);
}
