//! The editor tools against a worktree a process left behind keeps changing: a real flipper
//! process swaps the owned file with a link to a file outside the worktree, and the tools'
//! reads and writes never reach it.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::*;

const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY----- outside\n";

/// Where the flipper process works, when this test binary is one.
const FLIP_DIR: &str = "PLAIT_TEST_FLIP_DIR";

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

/// The flipper: a process of its own, as a command's leftover would be.
fn start_flipper(dir: &Path, target: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "agent::model::tools::tests::flipper_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(FLIP_DIR, dir)
        .env("PLAIT_TEST_FLIP_TARGET", target)
        .spawn()
        .unwrap()
}

/// Not a test: the body of the flipper process [`start_flipper`] starts. It keeps a link to
/// the target at `.swap` and swaps it with `owned.txt` with `renameat2(RENAME_EXCHANGE)`,
/// until a file `stop` appears (or a minute passes).
#[test]
#[ignore = "the flipper process of the race tests, run by them"]
fn flipper_process() {
    let (Some(dir), Some(target)) = (
        std::env::var_os(FLIP_DIR),
        std::env::var_os("PLAIT_TEST_FLIP_TARGET"),
    ) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let swaps = flip_until_stopped(&dir, &PathBuf::from(target));
    eprintln!("flipper: {swaps} swaps");
}

/// Swaps `owned.txt` and a link `.swap` to `target` in `dir` until `dir/stop` appears (or a
/// minute passes); how many swaps it made.
fn flip_until_stopped(dir: &Path, target: &Path) -> u64 {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt as _;
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap();
    let (cdir, ctarget) = (c(dir), c(target));
    let (owned, swap) = (c(Path::new("owned.txt")), c(Path::new(".swap")));
    // SAFETY: plain system calls on C strings that outlive them; the fd is closed at the end.
    unsafe {
        let fd = libc::open(cdir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
        assert!(fd >= 0, "cannot open {}", dir.display());
        let started = Instant::now();
        let mut swaps = 0u64;
        while !dir.join("stop").exists() && started.elapsed() < Duration::from_secs(60) {
            for _ in 0..64 {
                let is_file = |name: &CString| {
                    let mut st: libc::stat = std::mem::zeroed();
                    libc::fstatat(fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0
                        && st.st_mode & libc::S_IFMT == libc::S_IFREG
                };
                if is_file(&owned) && is_file(&swap) {
                    // The editor's write replaced the link: plant it again.
                    libc::unlinkat(fd, swap.as_ptr(), 0);
                }
                libc::symlinkat(ctarget.as_ptr(), fd, swap.as_ptr());
                if libc::renameat2(fd, owned.as_ptr(), fd, swap.as_ptr(), libc::RENAME_EXCHANGE)
                    == 0
                {
                    swaps += 1;
                }
            }
        }
        libc::close(fd);
        swaps
    }
}

/// 200 edits, views and searches while a flipper process swaps the owned file with a link
/// to a key outside the worktree: the key is never written, and never in any answer.
#[test]
fn a_flipper_never_turns_the_editor() {
    let f = fixture();
    let src = f.worktree.join("src");
    let mut flipper = start_flipper(&src, &f.outside.join("id_rsa"));
    // Let it start swapping.
    let began = Instant::now();
    while fs::symlink_metadata(src.join(".swap")).is_err()
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
    fs::write(src.join("stop"), "").unwrap();
    let status = flipper.wait().unwrap();
    assert!(status.success(), "the flipper failed: {status}");
    eprintln!("200 calls: {written} written, {links_seen} met a link, {other_errors} other errors");
    assert_eq!(
        fs::read_to_string(f.outside.join("id_rsa")).unwrap(),
        SECRET
    );
    assert_eq!(fs::read_dir(&f.outside).unwrap().count(), 1);
    assert!(written > 0, "no edit got through");
    assert!(links_seen > 0, "the flipper never won a swap before a call");
}
