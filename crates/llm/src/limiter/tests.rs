//! The limiter against the clock (paused) and a shared exchange of its own.

use std::time::SystemTime;

use super::*;

fn limits(rpm: Option<u32>, input_tpm: Option<u64>) -> Limits {
    Limits {
        concurrency: 100,
        rpm,
        input_tpm,
        output_tpm: None,
    }
}

const SMALL: Cost = Cost {
    input: 10,
    output: 0,
};

#[tokio::test(start_paused = true)]
async fn a_full_bucket_bursts_then_paces_at_its_refill_rate() {
    // 60 a minute: 60 at once, then one a second, not a minute's pause and a burst.
    let limiter = Limiter::new(limits(Some(60), None));
    let start = Instant::now();
    for _ in 0..60 {
        let p = limiter.acquire(SMALL).await.unwrap();
        limiter.finish(p, Some(SMALL), None);
    }
    assert!(start.elapsed() < Duration::from_millis(10));
    for k in 1..=5u64 {
        let p = limiter.acquire(SMALL).await.unwrap();
        let at = start.elapsed();
        assert!(
            at >= Duration::from_secs(k) && at < Duration::from_millis(1000 * k + 50),
            "request {} of the second minute went at {at:?}",
            k
        );
        limiter.finish(p, Some(SMALL), None);
    }
}

#[tokio::test(start_paused = true)]
async fn output_is_reserved_from_max_tokens_and_given_back() {
    let limiter = Arc::new(Limiter::new(Limits {
        output_tpm: Some(1000),
        ..limits(None, None)
    }));
    let big = Cost {
        input: 0,
        output: 600,
    };
    let first = limiter.acquire(big).await.unwrap();
    // 400 left: a second reservation of 600 must wait for 200 to refill (12 s)...
    let start = Instant::now();
    let waiting = {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            let p = limiter.acquire(big).await.unwrap();
            let at = Instant::now();
            limiter.finish(p, Some(big), None);
            at
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    // ...unless the first answer used only 100 of its 600: then at once.
    limiter.finish(
        first,
        Some(Cost {
            input: 0,
            output: 100,
        }),
        None,
    );
    let at = waiting.await.unwrap();
    assert!(
        at.duration_since(start) < Duration::from_millis(1100),
        "{:?}",
        at.duration_since(start)
    );
}

#[tokio::test(start_paused = true)]
async fn headers_correct_the_level_and_add_the_limits_the_plan_did_not_name() {
    let limiter = Limiter::new(limits(None, None));
    let p = limiter.acquire(SMALL).await.unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(
        "anthropic-ratelimit-input-tokens-limit",
        "6000".parse().unwrap(),
    );
    headers.insert(
        "anthropic-ratelimit-input-tokens-remaining",
        "0".parse().unwrap(),
    );
    let full_at = humantime::format_rfc3339(SystemTime::now() + Duration::from_secs(60));
    headers.insert(
        "anthropic-ratelimit-input-tokens-reset",
        full_at.to_string().parse().unwrap(),
    );
    limiter.finish(p, Some(SMALL), Some(&headers));
    // Empty, refilling 100 a second: 1000 tokens take 10 s, not the minute to full.
    let start = Instant::now();
    let p = limiter
        .acquire(Cost {
            input: 1000,
            output: 0,
        })
        .await
        .unwrap();
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(11),
        "{took:?}"
    );
    limiter.finish(p, None, None);
    assert_eq!(limiter.stats().waits, 1);
}

#[tokio::test(start_paused = true)]
async fn a_request_larger_than_the_bucket_goes_when_it_is_full() {
    let limiter = Limiter::new(limits(None, Some(1000)));
    let huge = Cost {
        input: 5000,
        output: 0,
    };
    let p = limiter.acquire(huge).await.unwrap();
    limiter.finish(p, Some(huge), None);
    // 4000 in debt: the next small request waits for the bucket to climb back above 10.
    let start = Instant::now();
    let p = limiter.acquire(SMALL).await.unwrap();
    assert!(
        start.elapsed() >= Duration::from_secs(240),
        "{:?}",
        start.elapsed()
    );
    limiter.finish(p, Some(SMALL), None);
}

#[tokio::test(start_paused = true)]
async fn requests_are_admitted_in_turn() {
    let limiter = Arc::new(Limiter::new(limits(Some(60), None)));
    for _ in 0..60 {
        let p = limiter.acquire(SMALL).await.unwrap();
        limiter.finish(p, Some(SMALL), None);
    }
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for k in 0..5 {
        let (limiter, order) = (limiter.clone(), order.clone());
        handles.push(tokio::spawn(async move {
            let p = limiter.acquire(SMALL).await.unwrap();
            order.lock().unwrap().push(k);
            limiter.finish(p, Some(SMALL), None);
        }));
        tokio::task::yield_now().await;
    }
    for h in handles {
        h.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
}

#[tokio::test(start_paused = true)]
async fn a_pause_holds_every_request() {
    let limiter = Limiter::new(Limits::default());
    let start = Instant::now();
    limiter.pause(Duration::from_secs(5));
    let p = limiter.acquire(SMALL).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(5));
    limiter.finish(p, Some(SMALL), None);
    assert_eq!(limiter.stats().pauses, 1);
}

#[tokio::test]
async fn a_rejected_key_fails_every_later_request_at_once() {
    let limiter = Limiter::new(Limits::default());
    limiter.poison("mock rejected the API key (401): check KEY");
    let err = limiter.acquire(SMALL).await.err().unwrap();
    assert!(err.contains("401"));
}

#[tokio::test(start_paused = true)]
async fn concurrency_is_bounded() {
    let limiter = Arc::new(Limiter::new(Limits {
        concurrency: 2,
        ..Limits::default()
    }));
    let first = limiter.acquire(SMALL).await.unwrap();
    let _second = limiter.acquire(SMALL).await.unwrap();
    let third = tokio::time::timeout(Duration::from_millis(100), limiter.acquire(SMALL)).await;
    assert!(
        third.is_err(),
        "a third request went out with two in flight"
    );
    limiter.finish(first, None, None);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), limiter.acquire(SMALL))
            .await
            .is_ok()
    );
}

#[tokio::test(start_paused = true)]
async fn a_permit_says_what_its_request_waited_for() {
    let limiter = Arc::new(Limiter::new(Limits {
        concurrency: 1,
        ..limits(Some(60), None)
    }));
    // Drawn down to one request: the next after it waits a second for the bucket.
    for _ in 0..59 {
        let p = limiter.acquire(SMALL).await.unwrap();
        limiter.finish(p, Some(SMALL), None);
    }
    let first = limiter.acquire(SMALL).await.unwrap();
    assert_eq!(first.waited(), Waited::default());
    let second = {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            let p = limiter.acquire(SMALL).await.unwrap();
            let waited = p.waited();
            limiter.finish(p, Some(SMALL), None);
            waited
        })
    };
    // It waits for the one slot first, held half a second.
    tokio::time::sleep(Duration::from_millis(500)).await;
    limiter.finish(first, Some(SMALL), None);
    let waited = second.await.unwrap();
    assert!(
        waited.slot >= Duration::from_millis(500) && waited.slot < Duration::from_millis(510),
        "{waited:?}"
    );
    // Then for the bucket, which has a request again a second after the first took its last.
    assert_eq!(waited.why, Some("requests"));
    assert!(
        waited.limit >= Duration::from_millis(490) && waited.limit < Duration::from_millis(520),
        "{waited:?}"
    );
    assert!(waited.total() >= Duration::from_secs(1), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn a_reading_with_little_missing_does_not_slow_the_bucket_for_good() {
    let limiter = Limiter::new(limits(None, None));
    // Early in a server's window: 1% used, the window resetting in 59 s. Taken as a rate,
    // that would be 1 token a second on a 6000-a-minute limit.
    let headers = |remaining: &str, reset_s: u64| {
        let mut h = HeaderMap::new();
        h.insert(
            "anthropic-ratelimit-input-tokens-limit",
            "6000".parse().unwrap(),
        );
        h.insert(
            "anthropic-ratelimit-input-tokens-remaining",
            remaining.parse().unwrap(),
        );
        let at = humantime::format_rfc3339(SystemTime::now() + Duration::from_secs(reset_s));
        h.insert(
            "anthropic-ratelimit-input-tokens-reset",
            at.to_string().parse().unwrap(),
        );
        h
    };
    let p = limiter.acquire(SMALL).await.unwrap();
    limiter.finish(p, Some(SMALL), Some(&headers("5940", 59)));
    // Then empty: refilling at the nominal 100 a second, 1000 tokens take 10 s.
    let p = limiter.acquire(SMALL).await.unwrap();
    limiter.finish(p, Some(SMALL), Some(&headers("0", 60)));
    let start = Instant::now();
    let p = limiter
        .acquire(Cost {
            input: 1000,
            output: 0,
        })
        .await
        .unwrap();
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(11),
        "{took:?}"
    );
    limiter.finish(p, None, None);
}
