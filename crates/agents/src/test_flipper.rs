//! The attacker of the race tests: a process of its own, as a command's leftover would be,
//! that swaps files of a task's tree with symlinks to a file outside it
//! (`renameat2(RENAME_EXCHANGE)` in a loop) while plait reads and writes the tree. The unit
//! tests of plait-agents and plait-stages and the integration tests share this one file
//! (the latter two by `#[path]`): the process is the test binary itself, run for
//! [`flipper_process`].

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const DIR: &str = "PLAIT_TEST_FLIP_DIR";
const TARGET: &str = "PLAIT_TEST_FLIP_TARGET";
const NAMES: &str = "PLAIT_TEST_FLIP_NAMES";

/// The link each name is swapped with: `.<name>.swap`, beside it.
pub(crate) fn swap_name(name: &str) -> String {
    format!(".{name}.swap")
}

/// Starts a flipper over `names` in `dir`, each swapped with a link to `target`, until a
/// file `stop` appears in `dir` (or a minute passes).
pub(crate) fn start(dir: &Path, names: &[String], target: &Path) -> Child {
    // The test's name in whichever test binary holds this module: its path without the
    // crate's name.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            &format!("{module}::flipper_process"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR, dir)
        .env(TARGET, target)
        .env(NAMES, names.join("\n"))
        .spawn()
        .expect("start the flipper")
}

/// Stops the flipper `start` started in `dir`.
pub(crate) fn stop(dir: &Path, mut flipper: Child) {
    std::fs::write(dir.join("stop"), "").expect("write the stop file");
    let status = flipper.wait().expect("wait for the flipper");
    assert!(status.success(), "the flipper failed: {status}");
    let _ = std::fs::remove_file(dir.join("stop"));
}

/// Not a test: the body of the flipper process [`start`] starts.
#[test]
#[ignore = "the flipper process of the race tests, run by them"]
fn flipper_process() {
    let (Some(dir), Some(target), Some(names)) = (
        std::env::var_os(DIR),
        std::env::var_os(TARGET),
        std::env::var(NAMES).ok(),
    ) else {
        return;
    };
    let names: Vec<&str> = names.lines().collect();
    let swaps = flip_until_stopped(&PathBuf::from(dir), &PathBuf::from(target), &names);
    eprintln!("flipper: {swaps} swaps");
}

fn c(bytes: &[u8]) -> CString {
    CString::new(bytes).expect("no NUL in a test name")
}

/// Swaps each of `names` with a link to `target` in turn until `dir/stop` appears; how many
/// swaps it made.
fn flip_until_stopped(dir: &Path, target: &Path, names: &[&str]) -> u64 {
    let pairs: Vec<(CString, CString)> = names
        .iter()
        .map(|n| (c(n.as_bytes()), c(swap_name(n).as_bytes())))
        .collect();
    let (cdir, ctarget) = (
        c(dir.as_os_str().as_bytes()),
        c(target.as_os_str().as_bytes()),
    );
    // SAFETY: plain system calls on C strings that outlive them; the fd is closed at the end.
    unsafe {
        let fd = libc::open(cdir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
        assert!(fd >= 0, "cannot open {}", dir.display());
        let is_file = |name: &CString| {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstatat(fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFREG
        };
        let started = Instant::now();
        let mut swaps = 0u64;
        while !dir.join("stop").exists() && started.elapsed() < Duration::from_secs(60) {
            for (name, swap) in &pairs {
                if is_file(name) && is_file(swap) {
                    // plait replaced the link with a file: plant it again.
                    libc::unlinkat(fd, swap.as_ptr(), 0);
                }
                libc::symlinkat(ctarget.as_ptr(), fd, swap.as_ptr());
                // One swap a pass: each name is a link about half the time.
                let exchanged =
                    libc::renameat2(fd, name.as_ptr(), fd, swap.as_ptr(), libc::RENAME_EXCHANGE);
                if exchanged == 0 {
                    swaps += 1;
                }
            }
        }
        libc::close(fd);
        swaps
    }
}
