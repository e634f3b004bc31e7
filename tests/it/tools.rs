//! The tools people bring, named by path as people name them, with default settings: a venv
//! that is not on `PATH` (under the temporary directory, under the home) runs as an exec
//! agent, a task check and a merged check, reading its own `pyvenv.cfg` and site-packages;
//! the home's credentials stay unreadable all the same.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::sandbox::landlock;
use crate::support::{skip, stderr, stdout, task_json, TestRepo};

/// A module the venv holds in its site-packages: upper-cases the files it is given, or
/// with `--verify` fails unless they are upper-case.
const MODULE: &str = r#"import pathlib, sys
def main():
    args = sys.argv[1:]
    verify = args[:1] == ['--verify']
    for name in args[1:] if verify else args:
        p = pathlib.Path(name)
        text = p.read_text()
        if verify and text != text.upper():
            sys.exit(f'{name} is not upper-case')
        p.write_text(text.upper())
if __name__ == '__main__':
    main()
"#;

/// A venv made at `dir` as a user makes one (`python3 -m venv`), holding [`MODULE`] as
/// `upcase` and a console script `bin/upcase` whose `#!` names the venv's python, as pip
/// writes them. `None` (the test skipped) without Python's venv module.
fn venv(dir: &Path) -> Option<PathBuf> {
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(dir)
        .output();
    if !made.is_ok_and(|o| o.status.success()) {
        skip("python3 -m venv is not available");
        return None;
    }
    let lib = fs::read_dir(dir.join("lib")).ok()?.flatten().next()?.path();
    let site = lib.join("site-packages");
    fs::write(site.join("upcase.py"), MODULE).unwrap();
    let script = dir.join("bin/upcase");
    fs::write(
        &script,
        format!(
            "#!{}\nimport sys\nfrom upcase import main\nsys.exit(main())\n",
            dir.join("bin/python").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    Some(dir.to_path_buf())
}

/// The plan: one exec task per file running `tool {file}`, a task check and a merged check
/// through the venv's python; each task also tries the home's key.
fn plan(tool: &str, python: &str) -> String {
    let agent = format!("{tool} {{file}} && (cat ~/.ssh/id_ed25519 || true)");
    let check = format!("{python} -c 'import upcase'");
    let merged = format!("{python} -m upcase --verify a.txt b.txt");
    format!(
        "goal = \"upcase\"\n[checks]\ntask = [{check:?}]\nmerged = [{merged:?}]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.txt\"]\nagent = {{ exec_each = {agent:?} }}\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"b.txt\"]\nagent = {{ exec_each = {agent:?} }}\n"
    )
}

/// Runs [`plan`] with `home` as the home (a key planted in it) and asserts the merge holds
/// both tasks' work, every check passed, and the key was read nowhere.
fn runs_with_default_walls(tool: &str, python: &str, home: &Path) {
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/id_ed25519"), "SECRET-key\n").unwrap();
    let repo = TestRepo::with_files(&[("a.txt", "alpha\n"), ("b.txt", "beta\n")]);
    let plan = repo.plan(&plan(tool, python));
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap()],
        &[("HOME", home.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    let log = fs::read_to_string(
        repo.path
            .join(format!(".git/plait/runs/{run}/tasks/a/agent.log")),
    )
    .unwrap_or_default();
    assert_eq!(merged["a.txt"], "ALPHA\n", "{log}");
    assert_eq!(merged["b.txt"], "BETA\n");
    let status = repo.status_json(&[]);
    for task in ["a", "b"] {
        let checks = task_json(&status, task)["checks"].to_string();
        assert!(checks.contains("\"passed\":true"), "{task}: {checks}");
    }
    repo.assert_not_written("SECRET-key");
    let refused = task_json(&status, "a")["sandbox"]["refused"].to_string();
    assert!(refused.contains(".ssh/id_ed25519"), "{refused}");
}

#[test]
fn a_venv_tool_named_by_path_under_the_temporary_directory_runs_everywhere() {
    if !landlock() {
        return;
    }
    // Outside the tests' own directories, as a CI cache is.
    let dir = tempfile::tempdir().unwrap();
    let Some(venv) = venv(&dir.path().join("ci-cache/venv")) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    runs_with_default_walls(
        &venv.join("bin/upcase").display().to_string(),
        &venv.join("bin/python").display().to_string(),
        home.path(),
    );
}

#[test]
fn a_venv_tool_named_by_path_under_the_home_runs_everywhere() {
    if !landlock() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    if venv(&home.path().join("tools/venv")).is_none() {
        return;
    }
    // Named as a user types it, from the home.
    runs_with_default_walls(
        "~/tools/venv/bin/upcase",
        "~/tools/venv/bin/python",
        home.path(),
    );
}
