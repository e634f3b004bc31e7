//! Collect against a worktree a process left behind keeps changing: a real flipper process
//! swaps every owned file with a link to a key outside the worktree as collect walks it.

use std::fs;
use std::path::Path;
use std::process::Command;

use super::*;
use crate::test_flipper;

const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY----- the user's key\n";
const FILES: usize = 200;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("git's output is UTF-8")
}

fn names() -> Vec<String> {
    (0..FILES).map(|i| format!("f{i:03}.txt")).collect()
}

/// A repository whose branch `task` holds `FILES` owned files, checked out in a worktree
/// where each has been changed.
fn setup(dir: &Path) -> (Repository, std::path::PathBuf) {
    let repo_dir = dir.join("repo");
    fs::create_dir_all(repo_dir.join("owned")).unwrap();
    git(&repo_dir, &["init", "-q", "-b", "main"]);
    for name in names() {
        fs::write(repo_dir.join("owned").join(&name), format!("{name} v1\n")).unwrap();
    }
    git(&repo_dir, &["add", "-A"]);
    git(&repo_dir, &["commit", "-qm", "base"]);
    let worktree = dir.join("wt");
    git(
        &repo_dir,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "task",
            worktree.to_str().unwrap(),
        ],
    );
    for name in names() {
        fs::write(worktree.join("owned").join(&name), format!("{name} v2\n")).unwrap();
    }
    let repo = Repository::open(&repo_dir).unwrap();
    (repo, worktree)
}

/// Every blob of `branch`'s tree with its path and mode.
fn blobs(repo: &Repository, branch: &str) -> Vec<(String, u32, Vec<u8>)> {
    let tree = repo
        .find_branch(branch, git2::BranchType::Local)
        .unwrap()
        .get()
        .peel_to_tree()
        .unwrap();
    let mut out = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(ObjectType::Blob) {
            let blob = repo.find_blob(entry.id()).unwrap();
            let path = format!("{dir}{}", entry.name().unwrap_or("?"));
            out.push((path, entry.filemode() as u32, blob.content().to_vec()));
        }
        git2::TreeWalkResult::Ok
    })
    .unwrap();
    out
}

/// 200 owned files, each swapped with a link to a key outside the worktree over and over
/// while collect walks and reads them: the key is in no blob, and what was committed from a
/// link is a link.
#[test]
fn a_flipper_never_slips_a_key_into_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, worktree) = setup(dir.path());
    let outside = dir.path().join("home");
    fs::create_dir_all(&outside).unwrap();
    let key = outside.join("id_rsa");
    fs::write(&key, SECRET).unwrap();
    let owned_dir = worktree.join("owned");
    let flipper = test_flipper::start(&owned_dir, &names(), &key);
    // Let it plant its links before collect starts.
    let began = std::time::Instant::now();
    while fs::symlink_metadata(owned_dir.join(test_flipper::swap_name("f199.txt"))).is_err()
        && began.elapsed() < std::time::Duration::from_secs(20)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let owns = Globs::new(&["/owned/".to_string()]).unwrap();
    let cone = Cone::full();
    let settings = CollectSettings {
        worktree: &worktree,
        branch: "task",
        owns: &owns,
        cone: &cone,
        holds: &|_| true,
        message: "collect under a flipper\n".to_string(),
        violations_diff: None,
    };
    let outcome = collect(&repo, &settings);
    test_flipper::stop(&owned_dir, flipper);
    let outcome = outcome.unwrap();
    assert!(outcome.commit.is_some());
    let blobs = blobs(&repo, "task");
    let key_path = key.as_os_str().as_encoded_bytes();
    // Names the flipper had swapped when collect read them: an owned name read as a link,
    // or its swap name read as a file.
    let (mut links, mut files, mut swapped) = (0, 0, 0);
    for (path, file_mode, content) in &blobs {
        assert!(
            !String::from_utf8_lossy(content).contains("OPENSSH"),
            "{path} carries the key"
        );
        if content.as_slice() == key_path {
            assert_eq!(
                *file_mode,
                mode::LINK,
                "{path} names the key but is no link"
            );
            links += 1;
            swapped += usize::from(path.ends_with(".txt"));
        } else {
            swapped += usize::from(path.ends_with(".swap"));
            assert_ne!(*file_mode, mode::LINK, "{path}");
            files += 1;
        }
    }
    eprintln!(
        "{} blobs: {files} files, {links} links to the key, {swapped} read swapped",
        blobs.len()
    );
    assert!(
        swapped > 0,
        "the flipper never swapped a name collect read: no race ran"
    );
    assert_eq!(fs::read_to_string(&key).unwrap(), SECRET);
}
