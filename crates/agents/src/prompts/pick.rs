//! The words a judge reads when one task ran as several attempts and more than one passed
//! its checks ("best of N"): a system prompt whose first part — its job and the run's
//! goal — is the same for every task, and whose second part is the task; then one message
//! showing each attempt (its agent, checks, closing words and diff) and the numbers it may
//! choose from. The diffs share one allowance, so one huge attempt cannot crowd out the
//! others. The judge is a reviewer (`prompts::reviewer`) asked to compare instead of judge.

use std::fmt::Write as _;
use std::path::Path;

use plait_core::state::CheckResult;
use plait_llm::conversation::System;

/// Bytes of all the attempts' diffs together that a judge is shown; each gets a fair share.
pub(crate) const MAX_DIFFS: usize = 200_000;

/// Bytes of an attempt's closing words that a judge is shown.
const MAX_SUMMARY: usize = 4_000;

/// One attempt as the judge is shown it.
pub struct Shown<'a> {
    /// The attempt's number, which the judge answers with.
    pub number: u32,
    /// The agent that made it.
    pub agent: &'a str,
    /// Its checks' results.
    pub checks: &'a [CheckResult],
    /// The agent's closing words, if any.
    pub summary: Option<&'a str>,
    /// Its diff against the base.
    pub diff: &'a str,
    /// Its worktree, for a judge that can read files there.
    pub worktree: Option<&'a Path>,
}

/// The judge's system prompt for `task`; `answer` says how it answers ("by calling
/// submit_pick").
pub fn system(goal: &str, task: &str, prompt: &str, owns: &[String], answer: &str) -> System {
    let goal = if goal.trim().is_empty() {
        "(none given)"
    } else {
        goal.trim()
    };
    System {
        shared: format!(
            "You review the work of coding agents that change one git repository in parallel, each \
             owning its own files. The goal of the whole run: {goal}\n\n\
             One task was tried several times, by one agent or several. You compare these attempts \
             at one task and choose the best: the one that does what the task asks, correctly and \
             completely, with the smallest sufficient change, without unrelated changes, in the \
             project's style. The checks' results are included. Answer only {answer}, naming the \
             attempt you choose by its number and saying why."
        ),
        task: format!(
            "Pick among the attempts of task: {}\n\nThe task's prompt:\n{}\n\nIt owns: {}",
            task,
            prompt,
            owns.join(", ")
        ),
    }
}

/// The judge's message: each attempt in turn (its agent, its checks' results with a failed
/// one's output, its closing words, its worktree where the judge can read it, and its diff,
/// cut to its share of [`MAX_DIFFS`]), then the numbers it may choose from.
pub fn message(attempts: &[Shown<'_>]) -> String {
    let sizes: Vec<usize> = attempts.iter().map(|a| a.diff.len()).collect();
    let shares = shares(&sizes, MAX_DIFFS);
    let mut text = format!(
        "The task was tried {} times; these attempts passed their checks.\n",
        attempts.len()
    );
    for (attempt, &share) in attempts.iter().zip(&shares) {
        let _ = writeln!(
            text,
            "\n## Attempt {} ({})\n",
            attempt.number, attempt.agent
        );
        checks(&mut text, attempt.checks);
        if let Some(summary) = attempt.summary.filter(|s| !s.trim().is_empty()) {
            let (summary, _) = cut(summary.trim(), MAX_SUMMARY);
            let _ = writeln!(text, "\nIts closing words:\n{summary}");
        }
        if let Some(worktree) = attempt.worktree {
            let _ = writeln!(
                text,
                "\nIts worktree (read it, do not change it): {}",
                worktree.display()
            );
        }
        if attempt.diff.trim().is_empty() {
            text.push_str("\nIt changed nothing.\n");
            continue;
        }
        let (diff, whole) = cut(attempt.diff, share);
        let _ = write!(text, "\nIts diff against the base:\n```diff\n{diff}");
        if !diff.ends_with('\n') {
            text.push('\n');
        }
        if !whole {
            let _ = writeln!(
                text,
                "[diff cut: {} of its {} bytes shown]",
                diff.len(),
                attempt.diff.len()
            );
        }
        text.push_str("```\n");
    }
    let numbers: Vec<u32> = attempts.iter().map(|a| a.number).collect();
    let _ = write!(text, "\nChoose one of: {}", choices(&numbers));
    text
}

/// All an agent program judging is told, in its `{prompt}`: the system prompt, the
/// answer's `schema`, then the `message`.
pub fn for_program(system: &System, schema: &serde_json::Value, message: &str) -> String {
    format!(
        "{}\n\n{}\n\nAnswer with one JSON object of this schema, and nothing after it:\n{}\n\n{}",
        system.shared, system.task, schema, message
    )
}

/// What a judge is told when its answer could not be used (`problem`), to ask it again.
pub fn again(problem: &str, numbers: &[u32]) -> String {
    format!(
        "\n\nYour previous answer could not be used: {problem}. Answer again, choosing one of: {}",
        choices(numbers)
    )
}

/// The numbers a judge may choose from, as it reads them: `1, 3`.
pub fn choices(numbers: &[u32]) -> String {
    numbers
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes each check's result, and a failed one's output.
fn checks(text: &mut String, checks: &[CheckResult]) {
    if checks.is_empty() {
        text.push_str("No checks were run.\n");
    }
    for c in checks {
        let result = match (c.passed, c.as_on_base, c.at_base) {
            (true, _, _) => "passed".to_string(),
            (false, true, _) => format!("FAILED, as it also does on the base\n{}", c.tail),
            (false, false, true) => format!(
                "FAILED, and otherwise than on the base (where it fails too)\n{}",
                c.tail
            ),
            (false, false, false) => format!("FAILED\n{}", c.tail),
        };
        let _ = writeln!(text, "Check `{}`: {result}", c.command);
    }
}

/// Each of `sizes`' share of `total`: an equal share each, where what a smaller one does
/// not need goes to the larger ones. The shares add up to at most `total`.
fn shares(sizes: &[usize], total: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| sizes[i]);
    let mut left = total;
    let mut shares = vec![0; sizes.len()];
    for (done, &i) in order.iter().enumerate() {
        let fair = left / (sizes.len() - done);
        shares[i] = sizes[i].min(fair);
        left -= shares[i];
    }
    shares
}

/// `text` cut to at most `max` bytes at a character's boundary, and whether it is whole.
fn cut(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, true);
    }
    let end = (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    (&text[..end], false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(command: &str, passed: bool, tail: &str) -> CheckResult {
        CheckResult {
            command: command.to_string(),
            passed,
            exit_code: Some(if passed { 0 } else { 1 }),
            tail: tail.to_string(),
            log: "check.log".into(),
            ms: 1,
            refused: Vec::new(),
            at_base: false,
            as_on_base: false,
            beyond_base: Vec::new(),
        }
    }

    fn shown<'a>(
        number: u32,
        agent: &'a str,
        diff: &'a str,
        checks: &'a [CheckResult],
    ) -> Shown<'a> {
        Shown {
            number,
            agent,
            checks,
            summary: None,
            diff,
            worktree: None,
        }
    }

    #[test]
    fn the_message_shows_every_attempt_and_the_numbers_to_choose_from() {
        let checks = [
            check("cargo test", true, ""),
            check("lint", false, "warning: x"),
        ];
        let mut one = shown(1, "exec", "+one\n", &checks);
        one.summary = Some("I added one.");
        let three = shown(3, "model claude-sonnet-4-5 (anthropic)", "+three\n", &[]);
        let text = message(&[one, three]);
        for said in [
            "## Attempt 1 (exec)",
            "## Attempt 3 (model claude-sonnet-4-5 (anthropic))",
            "+one",
            "+three",
            "Check `cargo test`: passed",
            "Check `lint`: FAILED\nwarning: x",
            "Its closing words:\nI added one.",
            "No checks were run.",
        ] {
            assert!(text.contains(said), "{said:?} missing from:\n{text}");
        }
        assert!(text.ends_with("Choose one of: 1, 3"), "{text}");
        assert!(
            !text.contains("worktree"),
            "a model judge reads no worktree"
        );
    }

    #[test]
    fn an_attempt_that_changed_nothing_says_so_and_a_worktree_is_shown_where_it_can_be_read() {
        let mut empty = shown(2, "exec", "", &[]);
        empty.worktree = Some(Path::new("/tmp/attempt-2"));
        let text = message(&[empty]);
        assert!(text.contains("It changed nothing."), "{text}");
        assert!(text.contains("/tmp/attempt-2"), "{text}");
        assert!(!text.contains("```diff"), "{text}");
    }

    #[test]
    fn shares_are_fair_and_what_a_small_diff_leaves_goes_to_the_large_ones() {
        assert_eq!(shares(&[10, 10], 100), vec![10, 10]);
        assert_eq!(shares(&[500, 500], 100), vec![50, 50]);
        // The small one keeps all it needs; the two large ones split the rest evenly.
        assert_eq!(shares(&[1000, 10, 1000], 110), vec![50, 10, 50]);
        assert_eq!(shares(&[], 100), Vec::<usize>::new());
        for sizes in [vec![7, 300, 45, 1], vec![1_000_000; 5], vec![0, 0, 99]] {
            let given = shares(&sizes, 200);
            assert!(given.iter().sum::<usize>() <= 200, "{sizes:?}: {given:?}");
            assert!(
                given.iter().zip(&sizes).all(|(g, s)| g <= s),
                "{sizes:?}: {given:?}"
            );
        }
    }

    #[test]
    fn huge_diffs_are_cut_to_fair_shares_and_a_small_one_is_shown_whole() {
        let huge = format!("+{}\n", "z".repeat(400_000));
        let also_huge = format!("+{}\n", "é".repeat(300_000));
        let small = "+small change\n".to_string();
        let attempts = [
            shown(1, "exec", &huge, &[]),
            shown(2, "exec", &small, &[]),
            shown(3, "exec", &also_huge, &[]),
        ];
        let text = message(&attempts);
        assert!(text.len() < MAX_DIFFS + 2_000, "{} bytes", text.len());
        assert!(
            text.contains("+small change\n```"),
            "the small diff is whole"
        );
        let fair = (MAX_DIFFS - small.len()) / 2;
        let z = text.matches('z').count();
        let e = text.matches('é').count() * 'é'.len_utf8();
        assert!(
            z + 10 >= fair && z <= fair + 10,
            "{z} bytes of attempt 1, fair {fair}"
        );
        assert!(
            e + 10 >= fair && e <= fair + 10,
            "{e} bytes of attempt 3, fair {fair}"
        );
        assert_eq!(
            text.matches("[diff cut:").count(),
            2,
            "both large ones say they are cut"
        );
    }

    #[test]
    fn asking_again_names_the_problem_and_the_choices() {
        let words = again("7 is not one of the attempts", &[1, 3]);
        assert!(words.contains("7 is not one of the attempts"), "{words}");
        assert!(words.ends_with("choosing one of: 1, 3"), "{words}");
    }
}
