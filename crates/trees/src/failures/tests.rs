use super::Failure;

const PYTEST_BASE: &str = "\
============================= test session starts ==============================
platform linux -- Python 3.11.2, pytest-8.3.4, pluggy-1.5.0
rootdir: /tmp/plait-x1/view
collected 3 items

tests/test_feature.py F..                                                [100%]

=================================== FAILURES ===================================
_________________________________ test_feature _________________________________
    def test_feature():
>       assert feature() == 2
E       assert 1 == 2

tests/test_feature.py:4: AssertionError
=========================== short test summary info ============================
FAILED tests/test_feature.py::test_feature - assert 1 == 2
========================= 1 failed, 2 passed in 0.03s ==========================
";

#[test]
fn pytest_failures_are_their_tests_and_messages_whatever_the_timing_and_paths() {
    let base = Failure::of(PYTEST_BASE);
    assert_eq!(base.runner.as_deref(), Some("pytest"));
    assert_eq!(
        base.lines,
        ["FAILED tests/test_feature.py::test_feature: assert 1 == 2"]
    );
    // Another run: other timing, another directory, one more test that passes.
    let again = PYTEST_BASE
        .replace("0.03s", "1.20s")
        .replace("/tmp/plait-x1/view", "/tmp/plait-q9/view")
        .replace("2 passed", "3 passed");
    assert_eq!(Failure::of(&again), base);
    // Another message is another failure.
    let other = PYTEST_BASE.replace("assert 1 == 2", "assert 3 == 2");
    assert_ne!(Failure::of(&other), base);
    // One more failing test is another failure, and it is what is beyond the base's.
    let more = PYTEST_BASE.replace(
        "FAILED tests/test_feature.py::test_feature - assert 1 == 2\n",
        "FAILED tests/test_feature.py::test_feature - assert 1 == 2\n\
         FAILED tests/test_other.py::test_other - KeyError: 'x'\n",
    );
    let more = Failure::of(&more);
    assert_ne!(more, base);
    assert_eq!(
        more.beyond(&base),
        ["FAILED tests/test_other.py::test_other: KeyError: 'x'"]
    );
}

#[test]
fn cargo_test_failures_are_their_tests_and_panics_wherever_the_line() {
    let out = "\
running 2 tests
test tests::adds ... FAILED
test tests::subtracts ... ok

failures:

---- tests::adds stdout ----

thread 'tests::adds' panicked at src/lib.rs:12:9:
assertion `left == right` failed
  left: 3
 right: 4
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::adds

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
    let failure = Failure::of(out);
    assert_eq!(failure.runner.as_deref(), Some("cargo test"));
    assert_eq!(
        failure.lines,
        ["tests::adds: thread 'tests::adds' panicked / assertion `left == right` failed / left: 3 / right: 4"]
    );
    let moved = out.replace("src/lib.rs:12:9", "src/lib.rs:40:9");
    assert_eq!(Failure::of(&moved), failure);
    let other = out.replace("left: 3", "left: 5");
    assert_ne!(Failure::of(&other), failure);
}

#[test]
fn go_unittest_jest_and_vitest_are_read_too() {
    let go =
        "=== RUN   TestAdd\n    add_test.go:9: got 3, want 4\n--- FAIL: TestAdd (0.00s)\nFAIL\n";
    let go_failure = Failure::of(go);
    assert_eq!(go_failure.runner.as_deref(), Some("go test"));
    assert_eq!(go_failure.lines, ["TestAdd: got 3, want 4"]);
    let go = "--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3, want 4\nFAIL\n";
    assert_eq!(Failure::of(go).lines, ["TestAdd: got 3, want 4"]);

    let unittest = "\
.F
======================================================================
FAIL: test_add (tests.test_math.MathTests.test_add)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/work/proj/tests/test_math.py\", line 7, in test_add
    self.assertEqual(add(1, 2), 4)
AssertionError: 3 != 4

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1)
";
    let failure = Failure::of(unittest);
    assert_eq!(failure.runner.as_deref(), Some("unittest"));
    assert_eq!(
        failure.lines,
        ["FAIL test_add (tests.test_math.MathTests.test_add): AssertionError: 3 != 4"]
    );

    let jest = "\
FAIL src/sum.test.js
  ● sum › adds two numbers

    expect(received).toBe(expected) // Object.is equality

Tests:       1 failed, 3 passed, 4 total
Time:        0.512 s
";
    let failure = Failure::of(jest);
    assert_eq!(failure.runner.as_deref(), Some("jest"));
    assert_eq!(
        failure.lines,
        ["sum › adds two numbers: expect(received).toBe(expected) // Object.is equality"]
    );

    let vitest = "\
 FAIL  test/sum.test.ts > sum > adds
AssertionError: expected 3 to be 4 // Object.is equality
 ❯ test/sum.test.ts:5:17
 Test Files  1 failed (1)
      Tests  1 failed | 3 passed (4)
   Duration  412ms
";
    let failure = Failure::of(vitest);
    assert_eq!(failure.runner.as_deref(), Some("vitest"));
    assert_eq!(
        failure.lines,
        ["test/sum.test.ts > sum > adds: AssertionError: expected 3 to be 4 // Object.is equality"]
    );
}

#[test]
fn any_other_output_is_the_same_only_once_its_noise_is_out() {
    let out = "\x1b[31mlint: src/a.txt:3:1: TODO found\x1b[0m\n\
               checked 14 files in 0.21s at 2026-12-08T01:02:03Z (pid 4411, 0x7ffd1234abcd)\n\
               scratch in /tmp/tmp.Xa81/work\n";
    let failure = Failure::of(out);
    assert_eq!(failure.runner, None);
    assert_eq!(failure.lines.len(), 1);
    let noisy = "lint: src/a.txt:9:1: TODO found\n\
                 checked 14 files in 3.5s at 2026-12-09T11:22:33Z (pid 12, 0x55aa00ff01)\n\
                 scratch in /tmp/tmp.Q7/work\n";
    assert_eq!(Failure::of(noisy), failure);
    // Another file's TODO, or another count, is another failure.
    assert_ne!(
        Failure::of(&noisy.replace("src/a.txt", "src/b.txt")),
        failure
    );
    assert_ne!(Failure::of(&noisy.replace("14 files", "15 files")), failure);
    // A runner's failure and a plain one have nothing in common to list.
    assert!(failure.beyond(&Failure::of(PYTEST_BASE)).is_empty());
}

#[test]
fn a_failure_is_no_worse_than_the_bases_when_it_says_nothing_new() {
    // A runner's: fewer failing tests with the same messages is no worse; another message
    // or one more failing test is.
    let base = Failure::of(
        "FAILED tests/a.py::t1 - assert 1 == 2\nFAILED tests/b.py::t2 - KeyError: 'x'\n",
    );
    let fewer = Failure::of("FAILED tests/a.py::t1 - assert 1 == 2\n");
    assert!(fewer.no_worse_than(&base));
    assert!(!base.no_worse_than(&fewer));
    let other = Failure::of("FAILED tests/a.py::t1 - assert 3 == 2\n");
    assert!(!other.no_worse_than(&base));

    // A linter's: a task that fixed one of the base's errors says nothing new (the count
    // aside); one that adds an error does.
    let lint = "src/a.py:3:1: F401 `os` imported but unused\n\
                src/b.py:9:5: E711 comparison to None\n\
                Found 2 errors.\n";
    let base = Failure::of(lint);
    assert_eq!(base.runner, None);
    let fixed = Failure::of("src/a.py:3:1: F401 `os` imported but unused\nFound 1 error.\n");
    assert!(!fixed.no_worse_than(&base), "\"error\" is not \"errors\"");
    let fixed = Failure::of("src/a.py:7:1: F401 `os` imported but unused\nFound 1 errors.\n");
    assert!(fixed.no_worse_than(&base));
    let added = Failure::of(&format!("{lint}src/c.py:1:1: F811 redefinition of `x`\n"));
    assert!(!added.no_worse_than(&base));
    // A runner's failure and a plain output's are never compared as no worse.
    assert!(!fewer.no_worse_than(&Failure::of(lint)));
}
