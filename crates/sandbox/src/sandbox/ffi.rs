//! The plain C a child runs between fork and exec: paths as C strings, made before the
//! fork, and Landlock's rules added by system call (async-signal-safe: no allocation).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

pub(crate) fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("a path holds NUL"))
}

pub(crate) fn c_str(text: &str) -> CString {
    CString::new(text).unwrap_or_default()
}

/// Adds to `ruleset` a rule granting `access` beneath `path` (processes already behind it
/// keep the rules they were given).
///
/// # Safety
/// Async-signal-safe (plain system calls, no allocation): it may run between fork and exec.
#[cfg(target_os = "linux")]
pub(crate) unsafe fn add_rule(
    ruleset: std::os::fd::RawFd,
    path: &std::ffi::CStr,
    access: u64,
) -> io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let added = add_rule_fd(ruleset, fd, access);
    libc::close(fd);
    added
}

/// A rule giving `access` beneath the file opened at `fd`. Async-signal-safe.
#[cfg(target_os = "linux")]
pub(crate) unsafe fn add_rule_fd(
    ruleset: std::os::fd::RawFd,
    fd: libc::c_int,
    access: u64,
) -> io::Result<()> {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let rule = PathBeneath {
        allowed_access: access,
        parent_fd: fd,
    };
    let added = libc::syscall(
        libc::SYS_landlock_add_rule,
        ruleset,
        LANDLOCK_RULE_PATH_BENEATH,
        &rule as *const PathBeneath,
        0u32,
    );
    if added != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(crate) unsafe fn add_rule(
    _ruleset: std::os::fd::RawFd,
    _path: &std::ffi::CStr,
    _access: u64,
) -> io::Result<()> {
    Err(io::Error::other("Landlock is Linux's"))
}
