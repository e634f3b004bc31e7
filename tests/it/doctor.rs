//! `plait doctor` turns plait's own code against a task's moves, as issue 57's attacks did:
//! a process swapping the file its editor tool edits with a link outside, a check planting
//! links in its layer and git directory, paths climbing out of the provider's API through
//! the gateway. Each is judged from outside, with namespaces and without.

use crate::support::sandbox::{landlock, plait_without_namespaces};
use crate::support::{stderr, stdout, TestRepo};

/// The probes of plait's own code, by how their lines start.
const DEPUTY: &[&str] = &[
    "a swapped link against plait's editor tool",
    "links a check planted in its layer and git directory",
    "paths climbing out of the provider's API through the gateway",
];

fn refused_each(out: &std::process::Output) {
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(out)));
    let probes = report["probes"].as_array().unwrap();
    for what in DEPUTY {
        let probe = probes
            .iter()
            .find(|p| p["what"] == *what)
            .unwrap_or_else(|| panic!("no probe `{what}`: {report:#}"));
        assert_eq!(probe["refused"], true, "{probe}");
        assert_eq!(probe["detail"], "", "{probe}");
    }
}

#[test]
fn doctor_turns_none_of_plaits_own_code() {
    if !landlock() {
        return;
    }
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    refused_each(&repo.plait(&["doctor", "--json"]));
    let text = stdout(&repo.plait(&["doctor"]));
    for what in DEPUTY {
        assert!(
            text.lines()
                .any(|l| l.starts_with(what) && l.ends_with(" refused")),
            "{what}: {text}"
        );
    }
    refused_each(&plait_without_namespaces(&repo, &["doctor", "--json"]));
}
