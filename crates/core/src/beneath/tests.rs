use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::*;

fn tree() -> (tempfile::TempDir, Tree, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    fs::create_dir(&root).unwrap();
    let outside = dir.path().join("home");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret"), "the key\n").unwrap();
    let tree = Tree::open(&root).unwrap();
    (dir, tree, outside)
}

#[test]
fn a_link_in_the_tree_is_data_never_a_way_out() {
    links_are_data();
}

#[test]
fn without_openat2_a_link_is_data_too() {
    WALK.with(|w| w.set(true));
    links_are_data();
    flipper_never_wins();
}

fn links_are_data() {
    let (_dir, tree, outside) = tree();
    let root = tree.root().to_path_buf();
    symlink(outside.join("secret"), root.join("owned.txt")).unwrap();
    symlink(&outside, root.join("sub")).unwrap();

    // Read: the link's target, never the file behind it.
    assert_eq!(
        tree.read("owned.txt").unwrap(),
        Some(Content::Link(
            outside.join("secret").as_os_str().as_bytes().to_vec()
        ))
    );
    assert!(tree.read_file("owned.txt").is_err());
    assert_eq!(tree.read("sub/secret").unwrap(), None);
    let err = tree.read_file("sub/secret").unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");

    // Write: the link is replaced by a file; the home is untouched.
    tree.write("owned.txt", b"model text\n", false).unwrap();
    assert_eq!(fs::read(outside.join("secret")).unwrap(), b"the key\n");
    assert_eq!(fs::read(root.join("owned.txt")).unwrap(), b"model text\n");
    assert!(tree.write("sub/new.txt", b"x", false).is_err());
    assert!(!outside.join("new.txt").exists());

    // Remove: the link goes, its target stays.
    tree.remove_all("sub").unwrap();
    assert!(outside.join("secret").exists());
    assert!(!root.join("sub").exists());
    assert_eq!(tree.kind("sub").unwrap(), None);

    // Absolute paths and `..` are not beneath the tree.
    assert!(tree.read("../home/secret").is_err());
    assert!(tree.read(outside.join("secret")).is_err());
}

#[test]
fn a_hard_link_does_not_carry_a_write_out() {
    let (dir, tree, _outside) = tree();
    let shared = dir.path().join("shared.txt");
    fs::write(&shared, "outside\n").unwrap();
    fs::hard_link(&shared, tree.root().join("a.txt")).unwrap();
    tree.write("a.txt", b"inside\n", false).unwrap();
    assert_eq!(fs::read(&shared).unwrap(), b"outside\n");
    assert_eq!(tree.read_file("a.txt").unwrap(), b"inside\n");
}

#[test]
fn a_fifo_is_seen_not_waited_on() {
    let (_dir, tree, _outside) = tree();
    let fifo = tree.root().join("pipe");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    assert_eq!(tree.read("pipe").unwrap(), None);
    assert!(tree.read_file("pipe").is_err());
    assert_eq!(
        tree.kind("pipe").unwrap(),
        Some(Kind::Other { whiteout: false })
    );
}

#[test]
fn walks_read_what_the_directory_holds() {
    let (_dir, tree, outside) = tree();
    let root = tree.root().to_path_buf();
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::write(root.join("a/b/c.txt"), "c").unwrap();
    fs::write(root.join("a/x.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(root.join("a/x.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    symlink(&outside, root.join("a/out")).unwrap();
    let mut seen = Vec::new();
    tree.walk(&mut |entry| {
        seen.push((entry.rel.to_string(), entry.kind, entry.read().unwrap()));
        Ok(Step::Descend)
    })
    .unwrap();
    let names: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(names, ["a", "a/b", "a/b/c.txt", "a/out", "a/x.sh"]);
    assert_eq!(seen[3].1, Kind::Link);
    assert_eq!(seen[4].1, Kind::File { executable: true });
    assert_eq!(
        seen[4].2,
        Some(Content::File {
            bytes: b"#!/bin/sh\n".to_vec(),
            executable: true
        })
    );
}

#[test]
fn removes_what_its_task_locked_up() {
    let (_dir, tree, outside) = tree();
    let root = tree.root().to_path_buf();
    fs::create_dir_all(root.join("d/e")).unwrap();
    fs::write(root.join("d/e/f"), "f").unwrap();
    symlink(&outside, root.join("d/e/home")).unwrap();
    fs::set_permissions(root.join("d/e"), fs::Permissions::from_mode(0o000)).unwrap();
    fs::set_permissions(root.join("d"), fs::Permissions::from_mode(0o500)).unwrap();
    tree.remove_all("d").unwrap();
    assert!(!root.join("d").exists());
    assert_eq!(fs::read(outside.join("secret")).unwrap(), b"the key\n");
    // set_mode through a handle refuses a link.
    symlink(outside.join("secret"), root.join("l")).unwrap();
    assert!(tree.set_mode("l", 0o777).is_err());
    let mode = fs::metadata(outside.join("secret"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o777, 0o777);
}

/// A process left behind swaps the file with a link to the home, over and over, while
/// plait reads and writes it: nothing is ever read from or written to the home.
#[test]
fn a_flipper_never_wins() {
    flipper_never_wins();
}

fn flipper_never_wins() {
    let (_dir, tree, outside) = tree();
    let root = tree.root().to_path_buf();
    fs::create_dir(root.join("src")).unwrap();
    fs::write(root.join("src/owned.txt"), "mine\n").unwrap();
    symlink(outside.join("secret"), root.join("src/.swap")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = Arc::clone(&stop);
        let root = root.clone();
        std::thread::spawn(move || {
            let dir = rustix::fs::open(
                root.join("src"),
                OFlags::RDONLY | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .unwrap();
            while !stop.load(Ordering::Relaxed) {
                let _ = rustix::fs::renameat_with(
                    &dir,
                    "owned.txt",
                    &dir,
                    ".swap",
                    rustix::fs::RenameFlags::EXCHANGE,
                );
            }
        })
    };
    let mut wrote = 0;
    for i in 0..2000 {
        if let Ok(Some(Content::File { bytes, .. })) = tree.read("src/owned.txt") {
            assert_ne!(bytes, b"the key\n");
        }
        if tree
            .write("src/owned.txt", format!("write {i}\n").as_bytes(), false)
            .is_ok()
        {
            wrote += 1;
            // Our write replaced the name; put a link back for the flipper to swap.
            let _ = tree.symlink(outside.join("secret").as_os_str().as_bytes(), "src/.swap");
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert!(wrote > 0);
    assert_eq!(fs::read(outside.join("secret")).unwrap(), b"the key\n");
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
}

#[test]
fn new_files_links_and_whiteouts_never_replace_or_follow_what_is_there() {
    let (_dir, tree, outside) = tree();
    let root = tree.root().to_path_buf();
    symlink(outside.join("secret"), root.join("planted")).unwrap();
    symlink(&outside, root.join("sub")).unwrap();

    // Something at the name: nothing written, the link's target untouched.
    assert!(!tree.create_file("planted", b"x", false).unwrap());
    assert!(!tree.create_link(b"elsewhere", "planted").unwrap());
    assert!(!tree.create_whiteout("planted").unwrap());
    assert_eq!(fs::read(outside.join("secret")).unwrap(), b"the key\n");
    // A link on the way: refused, nothing made behind it.
    assert!(tree.create_file("sub/new", b"x", false).is_err());
    assert!(tree.create_link(b"t", "sub/new").is_err());
    assert!(tree.create_whiteout("sub/new").is_err());
    assert!(!outside.join("new").exists());

    // Nothing there: made, with the mode asked for.
    assert!(tree.create_file("run.sh", b"#!/bin/sh\n", true).unwrap());
    assert_eq!(
        tree.kind("run.sh").unwrap(),
        Some(Kind::File { executable: true })
    );
    assert_eq!(fs::read(root.join("run.sh")).unwrap(), b"#!/bin/sh\n");
    assert!(tree.create_link(b"run.sh", "link").unwrap());
    assert_eq!(
        tree.read("link").unwrap(),
        Some(Content::Link(b"run.sh".to_vec()))
    );
    match tree.create_whiteout("gone") {
        Ok(made) => {
            assert!(made);
            assert_eq!(
                tree.kind("gone").unwrap(),
                Some(Kind::Other { whiteout: true })
            );
        }
        // A kernel before 5.8 (or a container) refuses an unprivileged mknod.
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}"),
    }
}
