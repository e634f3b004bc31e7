//! The kernel's walls as the tests meet them: whether this machine has them (a test that
//! needs them says it is skipped), a home for a task, what a task's record says was
//! refused, and plait run where the system calls behind the walls fail.

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Output};

use plait_sandbox::sandbox::{support, Support};

use super::{init, skip, TestRepo};

/// Whether this kernel can confine; the tests that need it say so when it cannot.
pub fn landlock() -> bool {
    match support() {
        Support::Landlock(_) => true,
        Support::Missing(why) => {
            skip(format_args!("this system cannot confine processes ({why})"));
            false
        }
    }
}

/// This kernel's Landlock ABI when it is `min` or later; `None`, the test skipped and
/// saying that `what` needs it, when it is not.
pub fn landlock_abi(min: i32, what: &str) -> Option<i32> {
    match support() {
        Support::Landlock(abi) if *abi >= min => Some(*abi),
        other => {
            skip(format_args!("{what} needs Landlock ABI {min} ({other:?})"));
            None
        }
    }
}

/// Whether this system allows the user and mount namespaces of plait's layered views (the
/// base's layer, a setup's); the tests that need them say so when it does not.
pub fn namespaces() -> bool {
    let allowed = plait_sandbox::sandbox::view_support().is_ok();
    if !allowed {
        skip("this system allows no user and mount namespaces");
    }
    allowed
}

/// A home directory of the test's own, so a write that got through would not touch the
/// real one.
pub fn home(repo: &TestRepo) -> PathBuf {
    let home = repo.scratch.join("home");
    fs::create_dir_all(&home).unwrap();
    home
}

/// What a task's record (`plait status --json`) says the sandbox refused.
pub fn refused(task: &serde_json::Value) -> Vec<String> {
    task["sandbox"]["refused"]
        .as_array()
        .map(|r| r.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Runs the real `plait` binary where `unshare` answers `EPERM`, as in a container that
/// allows no user namespaces.
pub fn plait_without_namespaces(repo: &TestRepo, args: &[&str]) -> Output {
    plait_without_namespaces_env(repo, args, &[])
}

/// [`plait_without_namespaces`] with extra environment variables.
pub fn plait_without_namespaces_env(
    repo: &TestRepo,
    args: &[&str],
    env: &[(&str, String)],
) -> Output {
    init();
    let home = home(repo);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plait"));
    cmd.args(args)
        .current_dir(&repo.path)
        .env("NO_COLOR", "1")
        .env("HOME", home);
    for (k, v) in env {
        cmd.env(k, v);
    }
    // SAFETY: the closure runs between fork and exec and only makes system calls on data
    // prepared before the fork.
    unsafe {
        cmd.pre_exec(deny_unshare);
    }
    cmd.output().expect("run plait")
}

/// Makes `unshare` fail with `EPERM`.
fn deny_unshare() -> std::io::Result<()> {
    deny_calls(&[libc::SYS_unshare as u32], libc::EPERM)
}

/// Installs a seccomp filter that makes the system calls numbered `calls` fail with
/// `errno`, as a kernel or a container that lacks them does; for `pre_exec`.
pub fn deny_calls(calls: &[u32], errno: i32) -> std::io::Result<()> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    const ALLOW: u32 = 0x7fff_0000;
    const ERRNO: u32 = 0x0005_0000;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    // The system call's number; then, for each call, a jump to the refusal at the end. On
    // the stack: this runs between fork and exec, where nothing may allocate.
    const MOST: usize = 8;
    assert!(calls.len() <= MOST, "at most {MOST} calls");
    let mut filter = [op(RET_K, 0, 0, ALLOW); MOST + 3];
    filter[0] = op(LD_W_ABS, 0, 0, 0);
    for (i, &nr) in calls.iter().enumerate() {
        filter[1 + i] = op(JEQ_K, (calls.len() - i) as u8, 0, nr);
    }
    let len = calls.len() + 3;
    filter[len - 2] = op(RET_K, 0, 0, ALLOW);
    filter[len - 1] = op(RET_K, 0, 0, ERRNO | errno as u32);
    let program = libc::sock_fprog {
        len: len as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: plain system calls; `program` outlives them.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &program as *const libc::sock_fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
