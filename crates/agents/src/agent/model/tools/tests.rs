//! The editor tools against a worktree a process left behind keeps changing: a real flipper
//! process swaps the owned file with a link to a file outside the worktree, and the tools'
//! reads and writes never reach it.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::*;
use crate::test_flipper;

const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY----- outside\n";

struct Fixture {
    _dir: tempfile::TempDir,
    worktree: PathBuf,
    outside: PathBuf,
    workspace: Workspace,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let worktree = dir.path().join("wt");
    let outside = dir.path().join("home");
    fs::create_dir_all(worktree.join("src")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("id_rsa"), SECRET).unwrap();
    fs::write(worktree.join("src/owned.txt"), "one\ntwo\n").unwrap();
    let owns = Globs::new(&["/src/".to_string()]).unwrap();
    let workspace = Workspace::new(
        worktree.clone(),
        dir.path().join("no-repo"),
        Arc::new(Vec::new()),
        owns,
    );
    Fixture {
        _dir: dir,
        worktree,
        outside,
        workspace,
    }
}

fn call(ws: &Workspace, input: Value) -> ToolOutcome {
    ws.run(EDITOR, &Ok(input))
}

#[test]
fn a_link_is_shown_and_never_edited_through() {
    let f = fixture();
    let link = f.worktree.join("src/owned.txt");
    fs::remove_file(&link).unwrap();
    symlink(f.outside.join("id_rsa"), &link).unwrap();
    let viewed = call(
        &f.workspace,
        json!({"command": "view", "path": "src/owned.txt"}),
    );
    assert!(!viewed.is_error, "{viewed:?}");
    assert!(viewed.content.contains("(symlink to "), "{viewed:?}");
    assert!(!viewed.content.contains("OPENSSH"), "{viewed:?}");
    for input in [
        json!({"command": "str_replace", "path": "src/owned.txt", "old_str": "outside", "new_str": "x"}),
        json!({"command": "insert", "path": "src/owned.txt", "insert_line": 0, "insert_text": "x"}),
        json!({"command": "create", "path": "src/owned.txt", "file_text": "x"}),
    ] {
        let out = call(&f.workspace, input);
        assert!(out.is_error, "{out:?}");
        assert!(
            out.content.contains("is a symlink; it cannot be edited"),
            "{out:?}"
        );
    }
    let found = f.workspace.run(SEARCH, &Ok(json!({"pattern": "OPENSSH"})));
    assert_eq!(found.content, "no matches");
    // A directory that is a link is no way through either.
    symlink(&f.outside, f.worktree.join("src/out")).unwrap();
    let out = call(
        &f.workspace,
        json!({"command": "create", "path": "src/out/new.txt", "file_text": "x"}),
    );
    assert!(out.content.contains("passes through a symlink"), "{out:?}");
    let out = call(
        &f.workspace,
        json!({"command": "view", "path": "src/out/id_rsa"}),
    );
    assert!(out.is_error && !out.content.contains("OPENSSH"), "{out:?}");
    assert_eq!(
        fs::read_to_string(f.outside.join("id_rsa")).unwrap(),
        SECRET
    );
    assert_eq!(fs::read_dir(&f.outside).unwrap().count(), 1);
}

#[test]
fn an_executable_stays_executable_when_edited() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = fixture();
    let script = f.worktree.join("src/run.sh");
    fs::write(&script, "#!/bin/sh\necho one\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let out = call(
        &f.workspace,
        json!({"command": "str_replace", "path": "src/run.sh", "old_str": "one", "new_str": "two"}),
    );
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        fs::read_to_string(&script).unwrap(),
        "#!/bin/sh\necho two\n"
    );
    assert_ne!(
        fs::metadata(&script).unwrap().permissions().mode() & 0o100,
        0
    );
}

/// 200 edits, views and searches while a flipper process swaps the owned file with a link
/// to a key outside the worktree: the key is never written, and never in any answer.
#[test]
fn a_flipper_never_turns_the_editor() {
    let f = fixture();
    let src = f.worktree.join("src");
    let flipper = test_flipper::start(&src, &["owned.txt".to_string()], &f.outside.join("id_rsa"));
    // Let it start swapping.
    let began = Instant::now();
    while fs::symlink_metadata(src.join(test_flipper::swap_name("owned.txt"))).is_err()
        && began.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let (mut written, mut links_seen, mut other_errors) = (0, 0, 0);
    for i in 0..200 {
        let input = match i % 5 {
            0 => {
                json!({"command": "create", "path": "src/owned.txt", "file_text": format!("one\ntwo {i}\n")})
            }
            1 => {
                json!({"command": "str_replace", "path": "src/owned.txt", "old_str": "one", "new_str": "one"})
            }
            2 => {
                json!({"command": "insert", "path": "src/owned.txt", "insert_line": 0, "insert_text": format!("line {i}")})
            }
            3 => json!({"command": "view", "path": "src/owned.txt"}),
            _ => json!({"pattern": "."}),
        };
        let out = if i % 5 == 4 {
            f.workspace.run(SEARCH, &Ok(input))
        } else {
            call(&f.workspace, input)
        };
        assert!(
            !out.content.contains("OPENSSH"),
            "edit {i} leaked the key: {out:?}"
        );
        if out.content.contains("symlink") {
            links_seen += 1;
        } else if out.is_error {
            other_errors += 1;
        } else if i % 5 < 3 {
            written += 1;
        }
    }
    test_flipper::stop(&src, flipper);
    eprintln!("200 calls: {written} written, {links_seen} met a link, {other_errors} other errors");
    assert_eq!(
        fs::read_to_string(f.outside.join("id_rsa")).unwrap(),
        SECRET
    );
    assert_eq!(fs::read_dir(&f.outside).unwrap().count(), 1);
    assert!(written > 0, "no edit got through");
    assert!(links_seen > 0, "the flipper never won a swap before a call");
}

#[test]
fn viewing_a_glob_lists_the_files_it_matches() {
    let f = fixture();
    let ws = &f.workspace;
    let out = call(ws, json!({"command": "view", "path": "src/*.txt"}));
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("src/owned.txt"), "{}", out.content);
    let none = call(ws, json!({"command": "view", "path": "nowhere/*.rs"}));
    assert!(none.is_error, "{}", none.content);
    assert!(
        none.content.contains("nor matches any file"),
        "{}",
        none.content
    );
}
