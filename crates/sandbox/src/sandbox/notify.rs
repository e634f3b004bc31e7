//! The sandbox's witness: a seccomp filter that tells plait of every write a confined process
//! attempts, so that a write the wall refuses is recorded even when the program says nothing
//! about it (ruff's "Failed to create temporary file", a tool that swallows `EACCES`).
//! Landlock still decides: the filter only asks plait to look (`SECCOMP_RET_USER_NOTIF`), and
//! plait always lets the call go on to the wall (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).
//!
//! The filter cannot read paths, so it stops every call that may write: the opens that ask to
//! write, create or truncate, `openat2` (whose flags are in memory), and the calls that make,
//! remove, rename or link a name. The supervisor, a thread of plait's per spawn, reads each
//! path from the process (`process_vm_readv`), resolves it against the call's directory fd or
//! the working directory (`/proc/PID/fd/N`, `/proc/PID/cwd`), checks that the notification
//! still stands (`SECCOMP_IOCTL_NOTIF_ID_VALID`: what it read was that caller's), and records
//! the paths outside the sandbox's places whose call gets as far as the wall (the name exists,
//! or its directory does, as the call needs; a `mkdir -p` meeting directories that exist was
//! refused nothing). chmod and chown are not watched: Landlock does not refuse them.
//!
//! One spawn's flow: the spawning thread starts the supervisor first (so that it is bound by
//! neither the walls nor the filter), raises the walls, installs the filter, sends the
//! listener to the supervisor over a channel and calls `posix_spawn`. From then on that thread
//! and every process the child starts wait in each watched call until the supervisor answers,
//! which it does for every notification, whatever it could read; it records before it answers,
//! so a process's refusals are all recorded when it has exited. The supervisor ends when no
//! process uses the filter any more (the listener polls `POLLHUP`). Hazards: a supervisor that
//! stopped answering would hang those processes, and a listener closed early makes their
//! watched calls fail with `ENOSYS` — so the supervisor leaves its loop only on `POLLHUP`, and
//! a process that outlives plait itself meets `ENOSYS` at its next watched call.
//!
//! It observes; it does not enforce, and it may miss a refusal: another thread of the process
//! may change the path after it was read, a name inside the places that a link the process
//! made leads outside is taken as inside, and x32 or 32-bit calls (other numbers, another
//! `arch`) are not watched. The logs are still read for what it missed.

mod filter;

use std::ffi::OsStr;
use std::os::fd::{AsRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, OnceLock};

use super::places::Places;
use filter::Needs::{self, Either, Existing, Missing};
use filter::{Flags, WATCHED};

/// The longest path a call takes, with its NUL.
const PATH_MAX: usize = 4096;

/// The supervisor of one spawn, waiting for the listener of the filter its spawning thread is
/// about to install.
pub(super) struct Observer {
    listener: mpsc::SyncSender<OwnedFd>,
    /// Whether connections are watched too (the network is walled).
    connect: bool,
}

impl Observer {
    /// Starts the supervisor on a thread of its own, before the walls and the filter go up on
    /// the calling thread; `None` if it cannot start (the spawn then goes on unobserved).
    pub(super) fn start(places: Arc<Places>) -> Option<Observer> {
        let connect = places.net.is_some();
        let (sent, received) = mpsc::sync_channel::<OwnedFd>(1);
        std::thread::Builder::new()
            .name("plait-observer".to_string())
            .stack_size(128 * 1024)
            .spawn(move || {
                if let Ok(listener) = received.recv() {
                    supervise(&listener, &places);
                }
            })
            .ok()?;
        Some(Observer {
            listener: sent,
            connect,
        })
    }

    /// Installs the filter on the calling thread, for it and every process it starts, and
    /// hands the listener to the supervisor. When the kernel refuses (no seccomp, or a
    /// listener already in this thread's chain: `EBUSY`, as in a plait run by a plait agent)
    /// the thread goes on unobserved and the supervisor ends.
    pub(super) fn install(self) {
        if let Ok(listener) = filter::install(filter::filter(self.connect)) {
            wake_on_this_cpu(&listener);
            // The supervisor is waiting in `recv`; the channel has room for the one fd.
            let _ = self.listener.send(listener);
        }
    }
}

/// Asks the kernel to switch between a stopped process and the supervisor on one CPU
/// (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, Linux 6.6): each round trip then wakes no other
/// CPU, which measured a fifth cheaper here. Older kernels refuse it, and wake as before.
fn wake_on_this_cpu(listener: &OwnedFd) {
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;
    // SAFETY: the flags are passed by value.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        );
    }
}

/// Answers every notification of `listener` until no process uses its filter any more,
/// recording on the way the writes outside `places` that reach the wall.
fn supervise(listener: &OwnedFd, places: &Places) {
    let fd = listener.as_raw_fd();
    let (notif_size, resp_size) = sizes();
    let mut notif = Buffer::new(notif_size);
    let mut resp = Buffer::new(resp_size);
    while wait(fd) {
        notif.clear();
        // SAFETY: the buffer is zeroed (as the kernel requires) and as large as the kernel's
        // `struct seccomp_notif`.
        if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, notif.as_mut_ptr()) } != 0 {
            // ENOENT: the caller was killed meanwhile; EINTR. Nothing waits for an answer.
            continue;
        }
        // SAFETY: the kernel wrote a `struct seccomp_notif` at the start of the buffer.
        let call: libc::seccomp_notif = unsafe { notif.read() };
        // Whatever goes wrong in looking, the call is answered and the loop goes on.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            observe(fd, &call, places);
        }));
        resp.clear();
        // SAFETY: the buffer holds at least a `struct seccomp_notif_resp`.
        unsafe {
            resp.write(libc::seccomp_notif_resp {
                id: call.id,
                val: 0,
                error: 0,
                flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
            });
            // ENOENT: the caller is gone; nothing waits.
            libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, resp.as_mut_ptr());
        }
    }
}

/// Waits until the listener holds a notification (true) or no process uses its filter any
/// more (false).
fn wait(fd: RawFd) -> bool {
    loop {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid `pollfd`.
        if unsafe { libc::poll(&mut poll, 1, -1) } < 0 {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                // ENOMEM: try again soon; leaving would make the processes' writes fail.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            continue;
        }
        if poll.revents & libc::POLLIN != 0 {
            return true;
        }
        if poll.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return false;
        }
    }
}

/// The sizes of the kernel's `struct seccomp_notif` and `struct seccomp_notif_resp`, which
/// may be larger than the ones this program was built with.
fn sizes() -> (usize, usize) {
    static SIZES: OnceLock<(usize, usize)> = OnceLock::new();
    *SIZES.get_or_init(|| {
        let mut sizes = libc::seccomp_notif_sizes {
            seccomp_notif: 0,
            seccomp_notif_resp: 0,
            seccomp_data: 0,
        };
        // SAFETY: the kernel writes one `struct seccomp_notif_sizes`.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_NOTIF_SIZES,
                0,
                &mut sizes as *mut libc::seccomp_notif_sizes,
            );
        }
        (
            usize::from(sizes.seccomp_notif).max(size_of::<libc::seccomp_notif>()),
            usize::from(sizes.seccomp_notif_resp).max(size_of::<libc::seccomp_notif_resp>()),
        )
    })
}

/// Zeroed, 8-byte aligned memory for a kernel structure of a size known at run time.
struct Buffer(Vec<u64>);

impl Buffer {
    fn new(bytes: usize) -> Buffer {
        Buffer(vec![0; bytes.div_ceil(8)])
    }

    fn clear(&mut self) {
        self.0.fill(0);
    }

    fn as_mut_ptr(&mut self) -> *mut libc::c_void {
        self.0.as_mut_ptr().cast()
    }

    /// # Safety
    /// The buffer holds a valid `T` at its start, and is at least as large.
    unsafe fn read<T>(&self) -> T {
        std::ptr::read_unaligned(self.0.as_ptr().cast())
    }

    /// # Safety
    /// The buffer is at least as large as a `T`.
    unsafe fn write<T>(&mut self, value: T) {
        std::ptr::write_unaligned(self.0.as_mut_ptr().cast(), value);
    }
}

/// Records the paths of a stopped call (`call`, still waiting on `listener`) that lie outside
/// `places` and would reach the wall.
fn observe(listener: RawFd, call: &libc::seccomp_notif, places: &Places) {
    let nr = libc::c_long::from(call.data.nr);
    if nr == libc::SYS_connect {
        if let Some(watch) = &places.net {
            let (pid, args) = (call.pid, call.data.args);
            let mut addr = [0u8; 128];
            let len = (args[2] as usize).min(addr.len());
            let read = read_memory(pid, args[1], &mut addr[..len]);
            let refused = watch.refused(pid, &addr[..read]);
            if let Some(what) = refused.filter(|_| still_waiting(listener, call.id)) {
                places.record_connect(what);
            }
        }
        return;
    }
    let Some(watched) = WATCHED.iter().find(|w| w.nr == nr) else {
        return;
    };
    let (pid, args) = (call.pid, call.data.args);
    let flags = match watched.flags {
        Flags::None => None,
        Flags::Arg(i) => Some(args[i] as i32),
        Flags::OpenHow(i) => {
            let mut how = [0u8; 8];
            if read_memory(pid, args[i], &mut how) < how.len() {
                return;
            }
            Some(u64::from_ne_bytes(how) as i32)
        }
    };
    let open_needs = match flags.map(filter::open_needs) {
        Some(None) => return,
        Some(needs) => needs,
        None => None,
    };
    let mut attempts = Vec::with_capacity(watched.paths.len());
    for arg in watched.paths {
        let Some(raw) = read_path(pid, args[arg.path]) else {
            continue;
        };
        let dirfd = arg.dirfd.map_or(libc::AT_FDCWD, |i| args[i] as i32);
        if let Some(path) = resolve(pid, dirfd, &raw) {
            attempts.push((path, open_needs.unwrap_or(arg.needs)));
        }
    }
    // What was read is that caller's only if its call still waits for the answer.
    if attempts.is_empty() || !still_waiting(listener, call.id) {
        return;
    }
    for (path, needs) in attempts {
        if !places.may_write(&path)
            && reaches_the_wall(&path, needs)
            && !places.may_write(&real(&path))
        {
            places.record(&path);
        }
    }
}

/// Whether the call of notification `id` still waits for its answer.
fn still_waiting(listener: RawFd, id: u64) -> bool {
    // SAFETY: the kernel reads one u64.
    unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id as *const u64,
        ) == 0
    }
}

/// The NUL-ended string at `addr` in process `pid`, without its NUL.
fn read_path(pid: u32, addr: u64) -> Option<Vec<u8>> {
    let mut buf = [0u8; PATH_MAX];
    // Most paths end in the page they start in: that page's part first (one page for the
    // kernel to look up), the next page only if the path goes on into it.
    let page = page_size() as u64;
    let first = (page - addr % page).min(PATH_MAX as u64) as usize;
    let mut read = read_memory(pid, addr, &mut buf[..first]);
    if read == first && first < PATH_MAX && !buf[..first].contains(&0) {
        read += read_memory(pid, addr.wrapping_add(first as u64), &mut buf[first..]);
    }
    let end = buf[..read].iter().position(|b| *b == 0)?;
    Some(buf[..end].to_vec())
}

/// Reads `buf.len()` bytes of process `pid`'s memory at `addr`; returns how many it could.
fn read_memory(pid: u32, addr: u64, buf: &mut [u8]) -> usize {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` is `buf`; the remote address is only read, by the kernel, which checks
    // it.
    let read = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    usize::try_from(read).unwrap_or(0)
}

fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: a plain query.
    *PAGE.get_or_init(|| {
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
    })
}

/// The names by which a process reaches its own open files, and where they lead under
/// `/proc/PID`.
const OWN_FILES: &[(&str, &str)] = &[
    ("/dev/stdin", "fd/0"),
    ("/dev/stdout", "fd/1"),
    ("/dev/stderr", "fd/2"),
    ("/dev/fd", "fd"),
    ("/proc/self", ""),
    ("/proc/thread-self", ""),
];

/// The absolute path that process `pid` names with `raw` relative to `dirfd` (`AT_FDCWD`: its
/// working directory), `.` and `..` taken as written. A name of one of its open files
/// (`/dev/stdout`, `/proc/self/fd/1`) is that file's path, and `None` for a pipe or socket,
/// which no wall keeps; `None` too when the base cannot be read.
fn resolve(pid: u32, dirfd: i32, raw: &[u8]) -> Option<PathBuf> {
    let name = Path::new(OsStr::from_bytes(raw));
    let path = if name.is_absolute() {
        name.to_path_buf()
    } else {
        let base = if dirfd == libc::AT_FDCWD {
            format!("/proc/{pid}/cwd")
        } else {
            format!("/proc/{pid}/fd/{dirfd}")
        };
        let base = std::fs::read_link(base).ok()?;
        if !base.is_absolute() {
            // The fd is no directory (`pipe:[…]`); the call fails with `ENOTDIR`.
            return None;
        }
        base.join(name)
    };
    let mut path = super::places::lexical(&path);
    if let Some((name, there)) = OWN_FILES.iter().find(|(n, _)| path.starts_with(n)) {
        let rest = path.strip_prefix(name).ok()?.to_path_buf();
        path = PathBuf::from(format!("/proc/{pid}"));
        for part in [Path::new(there), &rest] {
            if !part.as_os_str().is_empty() {
                path.push(part);
            }
        }
    }
    if !is_fd_link(&path) {
        return Some(path);
    }
    let file = std::fs::read_link(&path).ok()?;
    file.is_absolute().then_some(file)
}

/// Whether `path` is `/proc/N/fd/K`, a link to an open file.
fn is_fd_link(path: &Path) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(rest) = path.to_str().and_then(|p| p.strip_prefix("/proc/")) else {
        return false;
    };
    matches!(rest.split('/').collect::<Vec<_>>()[..], [pid, "fd", fd] if digits(pid) && digits(fd))
}

/// Whether a call that needs `path` to be as `needs` says gets as far as the wall, as plait
/// sees the file system before the call goes on.
fn reaches_the_wall(path: &Path, needs: Needs) -> bool {
    let exists = path.symlink_metadata().is_ok();
    let directory = || path.parent().is_some_and(Path::is_dir);
    match needs {
        Existing => exists,
        Missing => !exists && directory(),
        Either => exists || directory(),
    }
}

/// `path` with the symbolic links of its existing part resolved: a name that leads into a
/// place the process may write through a link is in that place.
fn real(path: &Path) -> PathBuf {
    let mut base = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(mut real) = base.canonicalize() {
            real.extend(rest.iter().rev());
            return real;
        }
        match (base.parent(), base.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                base = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_against_the_directory_fd_or_the_working_directory() {
        let pid = std::process::id();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            resolve(pid, libc::AT_FDCWD, b"a/./b/../c"),
            Some(cwd.join("a/c"))
        );
        assert_eq!(
            resolve(pid, libc::AT_FDCWD, b"/x/../y"),
            Some(PathBuf::from("/y"))
        );

        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let opened = std::fs::File::open(dir.path()).unwrap();
        let fd = opened.as_raw_fd();
        assert_eq!(resolve(pid, fd, b"x/y"), Some(real.join("x/y")));
        assert_eq!(
            resolve(pid, fd, b"../z"),
            real.parent().map(|p| p.join("z"))
        );
        assert_eq!(resolve(pid, fd, b"/abs"), Some(PathBuf::from("/abs")));
        // The process's own open files are the files they are, and a pipe is no path.
        let file = real.join("f");
        let written = std::fs::File::create(&file).unwrap();
        let name = format!("/proc/self/fd/{}", written.as_raw_fd());
        assert_eq!(
            resolve(pid, libc::AT_FDCWD, name.as_bytes()),
            Some(file.clone())
        );
        let name = format!("/dev/fd/{}", written.as_raw_fd());
        assert_eq!(resolve(pid, libc::AT_FDCWD, name.as_bytes()), Some(file));
        let (reader, _writer) = std::io::pipe().unwrap();
        let name = format!("/dev/fd/{}", reader.as_raw_fd());
        assert_eq!(resolve(pid, libc::AT_FDCWD, name.as_bytes()), None);
        // A dirfd that is not open.
        assert_eq!(resolve(pid, 1_000_000, b"x"), None);
    }

    #[test]
    fn a_call_reaches_the_wall_only_if_its_names_allow_it() {
        let dir = tempfile::tempdir().unwrap();
        let there = dir.path().join("there");
        std::fs::write(&there, "").unwrap();
        let missing = dir.path().join("missing");
        let deep = dir.path().join("no/such");
        assert!(reaches_the_wall(&there, Existing));
        assert!(!reaches_the_wall(&missing, Existing));
        assert!(
            !reaches_the_wall(&there, Missing),
            "mkdir -p of what exists"
        );
        assert!(reaches_the_wall(&missing, Missing));
        assert!(!reaches_the_wall(&deep, Missing), "ENOENT first");
        assert!(reaches_the_wall(&there, Either) && reaches_the_wall(&missing, Either));
        assert!(!reaches_the_wall(&deep, Either));
    }

    #[test]
    fn real_paths_follow_links_as_far_as_they_exist() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("target")).unwrap();
        std::os::unix::fs::symlink(root.join("target"), root.join("link")).unwrap();
        assert_eq!(
            real(&root.join("link/new/file")),
            root.join("target/new/file")
        );
        assert_eq!(real(Path::new("/")), PathBuf::from("/"));
    }
}
