//! The verdicts of plait's own probes can fail: a changed outside file, a leaked secret or
//! a climb the provider heard is said to have gone through, a race never met is not tried.

use std::fs;

use super::traversal::gateway_verdict;
use super::*;

#[test]
fn an_outside_file_changed_or_added_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("dir")).unwrap();
    fs::write(dir.path().join("victim"), SECRET).unwrap();
    let before = snapshot(dir.path());
    assert_eq!(outside_changed(&before, &snapshot(dir.path())), None);
    fs::write(dir.path().join("victim"), "0123abcd\n").unwrap();
    let changed = outside_changed(&before, &snapshot(dir.path())).unwrap();
    assert!(changed.contains("victim"), "{changed}");
    fs::write(dir.path().join("victim"), SECRET).unwrap();
    fs::write(dir.path().join("dir/new"), "").unwrap();
    let changed = outside_changed(&before, &snapshot(dir.path())).unwrap();
    assert!(changed.ends_with("dir/new"), "{changed}");
    fs::remove_file(dir.path().join("dir/new")).unwrap();
    fs::remove_dir(dir.path().join("dir")).unwrap();
    let changed = outside_changed(&before, &snapshot(dir.path())).unwrap();
    assert!(changed.ends_with("dir"), "{changed}");
}

#[test]
fn the_editor_race_went_through_when_the_outside_changed_or_leaked() {
    let met = EditorSeen {
        leaked: 0,
        links: 40,
    };
    assert_eq!(editor_verdict(&met, None), (true, String::new()));
    let (refused, detail) = editor_verdict(&met, Some("changed outside: /h/id_rsa".into()));
    assert!(!refused);
    assert!(detail.starts_with("it went through"), "{detail}");
    let leaked = EditorSeen {
        leaked: 3,
        links: 40,
    };
    let (refused, detail) = editor_verdict(&leaked, None);
    assert!(!refused);
    assert!(detail.contains("3 answers held"), "{detail}");
    let (refused, detail) = editor_verdict(&EditorSeen::default(), None);
    assert!(!refused);
    assert!(detail.starts_with("not tried"), "{detail}");
}

#[test]
fn a_climb_the_provider_heard_went_through() {
    let plain = "GET /v1/models HTTP/1.1".to_string();
    assert_eq!(
        gateway_verdict(std::slice::from_ref(&plain)),
        (true, String::new())
    );
    let climbed = "GET /admin/organizations/keys HTTP/1.1".to_string();
    let (refused, detail) = gateway_verdict(&[climbed, plain]);
    assert!(!refused);
    assert!(detail.contains("/admin/organizations/keys"), "{detail}");
    let (refused, detail) = gateway_verdict(&[]);
    assert!(!refused);
    assert!(detail.starts_with("not tried"), "{detail}");
}

/// The editor probe's own flipper, run here without walls: it swaps, and stops when told.
#[test]
fn the_flipper_swaps_until_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("id_rsa");
    fs::write(&outside, SECRET).unwrap();
    fs::write(dir.path().join(OWNED), "one\n").unwrap();
    std::os::unix::fs::symlink(&outside, dir.path().join(SWAP)).unwrap();
    let stop = dir.path().join("stop");
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        fs::write(stop, "").unwrap();
    });
    let began = Instant::now();
    let said = flip(dir.path()).unwrap();
    stopper.join().unwrap();
    assert!(began.elapsed() < Duration::from_secs(5), "{said}");
    let swaps: u64 = said.split(' ').next().unwrap().parse().unwrap();
    assert!(swaps > 0, "{said}");
    assert_eq!(fs::read_to_string(&outside).unwrap(), SECRET);
}

/// The layer probe's links, planted here without walls, and plait's old shape of the next
/// round (writing the same git directory's files by path): what it did outside is seen.
#[test]
fn a_round_written_through_planted_links_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let (outside, git, upper) = (
        dir.path().join("outside"),
        dir.path().join("layer/git-1"),
        dir.path().join("layer/upper"),
    );
    fs::create_dir_all(outside.join("dir/c.txt")).unwrap();
    fs::write(outside.join("victim"), SECRET).unwrap();
    for d in [&git, &upper] {
        fs::create_dir_all(d).unwrap();
    }
    let before = snapshot(&outside);
    let target = [&outside, &git, &upper].map(|p| p.display().to_string());
    plant(&target.join("\n")).unwrap();
    assert_eq!(outside_changed(&before, &snapshot(&outside)), None);
    fs::write(git.join("HEAD"), "0123abcd\n").unwrap();
    fs::write(git.join("commondir"), "/repo/.git\n").unwrap();
    fs::remove_dir(upper.join("dir/c.txt")).unwrap();
    let changed = outside_changed(&before, &snapshot(&outside)).unwrap();
    for name in ["victim", "new", "c.txt"] {
        assert!(changed.contains(name), "{name}: {changed}");
    }
}
