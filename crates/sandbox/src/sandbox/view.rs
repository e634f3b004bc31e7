//! Starting a process inside a task's whole-tree view, a network namespace of its own, or
//! both: between fork and exec the child makes a user namespace (mapping only its own user
//! and group) and a mount namespace of its own (and a network namespace: [`super::net`]),
//! mounts an overlayfs on the worktree's path (lower: a shared checkout of the base, upper:
//! the worktree), covers the path sockets served outside, steps into it, and only then raises
//! the walls, whose rule for the worktree it opens itself: a rule on the worktree's directory
//! opened before the mount would not cover the overlay, and a process behind Landlock can no
//! longer mount. Everything the child runs is async-signal-safe system calls on data
//! prepared before the fork.
//!
//! Whether this system allows it is asked once per process, by doing it (`support`).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A task's overlay: the worktree (`upper`, also where the view is mounted) over `lower`,
/// with overlayfs's `work` directory on the worktree's file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayView {
    pub lower: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
}

/// Where a child goes between fork and exec, before its walls: a task's whole-tree view,
/// a network namespace of its own, or both (either one needs a user namespace).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Entry<'a> {
    pub(crate) view: Option<&'a OverlayView>,
    pub(crate) net: Option<&'a super::net::Namespace>,
}

/// The overlay mount, as the child passes it to `mount(2)`.
struct Mount {
    target: CString,
    overlay: CString,
    options: CString,
}

/// What the child needs, prepared before the fork.
struct Prepared {
    flags: libc::c_int,
    setgroups: CString,
    uid_map: CString,
    gid_map: CString,
    uid_line: Vec<u8>,
    gid_line: Vec<u8>,
    root: CString,
    mount: Option<Mount>,
    /// Path sockets served outside, each covered with `/dev/null`.
    hide: Vec<CString>,
    devnull: CString,
    net: Option<super::net::Prepared>,
    cwd: Option<CString>,
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("a path holds NUL"))
}

/// `path` as overlayfs's option parser reads it: `,`, `:` and `\` escaped.
fn escaped(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in path.as_os_str().as_bytes() {
        if matches!(b, b',' | b':' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

impl Mount {
    fn new(view: &OverlayView) -> io::Result<Mount> {
        let mut options = b"lowerdir=".to_vec();
        options.extend(escaped(&view.lower));
        options.extend(b",upperdir=");
        options.extend(escaped(&view.upper));
        options.extend(b",workdir=");
        options.extend(escaped(&view.work));
        options.extend(b",userxattr");
        Ok(Mount {
            target: c_path(&view.upper)?,
            overlay: CString::new("overlay").unwrap_or_default(),
            options: CString::new(options).map_err(|_| io::Error::other("a path holds NUL"))?,
        })
    }
}

impl Prepared {
    /// Also the parent's end of the channel the child sends its listeners over, when it
    /// makes any.
    fn new(entry: Entry<'_>, cwd: Option<&Path>) -> io::Result<(Prepared, Option<OwnedFd>)> {
        // SAFETY: getuid and getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS;
        let (net, channel) = match entry.net {
            Some(namespace) => {
                flags |= libc::CLONE_NEWNET;
                let (prepared, channel) = super::net::Prepared::new(namespace)?;
                (Some(prepared), channel)
            }
            None => (None, None),
        };
        let hide = entry
            .net
            .map(|n| n.hide.iter().map(|p| c_path(p)).collect())
            .transpose()?
            .unwrap_or_default();
        let prepared = Prepared {
            flags,
            setgroups: CString::new("/proc/self/setgroups").unwrap_or_default(),
            uid_map: CString::new("/proc/self/uid_map").unwrap_or_default(),
            gid_map: CString::new("/proc/self/gid_map").unwrap_or_default(),
            uid_line: format!("{uid} {uid} 1\n").into_bytes(),
            gid_line: format!("{gid} {gid} 1\n").into_bytes(),
            root: CString::new("/").unwrap_or_default(),
            mount: entry.view.map(Mount::new).transpose()?,
            hide,
            devnull: CString::new("/dev/null").unwrap_or_default(),
            net,
            cwd: cwd.map(c_path).transpose()?,
        };
        Ok((prepared, channel))
    }

    /// In the child: the namespaces, the mounts, the network, the working directory again.
    ///
    /// # Safety
    /// Between fork and exec only: plain system calls, no allocation.
    unsafe fn enter(&mut self) -> io::Result<()> {
        let fail = || Err(io::Error::last_os_error());
        if libc::unshare(self.flags) != 0 {
            return fail();
        }
        if !write_all(&self.setgroups, b"deny\n")
            || !write_all(&self.uid_map, &self.uid_line)
            || !write_all(&self.gid_map, &self.gid_line)
        {
            return fail();
        }
        // Nothing mounted here reaches the namespace the mount tree was copied from.
        if libc::mount(
            std::ptr::null(),
            self.root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return fail();
        }
        if let Some(mount) = &self.mount {
            if libc::mount(
                mount.overlay.as_ptr(),
                mount.target.as_ptr(),
                mount.overlay.as_ptr(),
                0,
                mount.options.as_ptr().cast(),
            ) != 0
            {
                return fail();
            }
        }
        // A socket that is gone meanwhile, or that lies where this namespace cannot mount,
        // is left as it is: the first is no way out, and the second is rare.
        for socket in &self.hide {
            libc::mount(
                self.devnull.as_ptr(),
                socket.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            );
        }
        if let Some(net) = &mut self.net {
            net.enter()?;
        }
        if let Some(cwd) = &self.cwd {
            if libc::chdir(cwd.as_ptr()) != 0 {
                return fail();
            }
        }
        Ok(())
    }
}

/// Writes `bytes` to the file at `path` in one call. Async-signal-safe.
unsafe fn write_all(path: &CString, bytes: &[u8]) -> bool {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return false;
    }
    let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    libc::close(fd);
    n == bytes.len() as isize
}

/// The walls raised in the child after its mounts: `ruleset` (every rule but the
/// worktree's, in a view), plus a rule giving `access` beneath the worktree as the child
/// now sees it.
pub(crate) struct Walls {
    pub(crate) ruleset: OwnedFd,
    pub(crate) access: u64,
    /// A session of its own (no controlling terminal) rather than only a process group.
    pub(crate) session: bool,
}

#[cfg(target_os = "linux")]
unsafe fn raise(walls: &Walls, target: Option<&CString>) -> io::Result<()> {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    if walls.session && libc::setsid() < 0 {
        return Err(io::Error::last_os_error());
    }
    if let Some(target) = target {
        let fd = libc::open(target.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let rule = PathBeneath {
            allowed_access: walls.access,
            parent_fd: fd,
        };
        let added = libc::syscall(
            libc::SYS_landlock_add_rule,
            walls.ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &rule as *const PathBeneath,
            0u32,
        );
        libc::close(fd);
        if added != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    super::restrict(walls.ruleset.as_raw_fd())
}

#[cfg(not(target_os = "linux"))]
unsafe fn raise(_walls: &Walls, _target: Option<&CString>) -> io::Result<()> {
    Err(io::Error::other("Landlock is Linux's"))
}

/// Sets `cmd` up to start where `entry` says (its working directory taken again inside),
/// behind `walls` when there are any, in a process group (or a session) of its own. Returns
/// the channel on which the child sends the listeners it made in its network namespace.
pub(crate) fn prepare(
    cmd: &mut tokio::process::Command,
    entry: Entry<'_>,
    cwd: Option<&Path>,
    walls: Option<Walls>,
) -> io::Result<Option<OwnedFd>> {
    use std::os::unix::process::CommandExt as _;
    let (mut prepared, channel) = Prepared::new(entry, cwd)?;
    if !walls.as_ref().is_some_and(|w| w.session) {
        cmd.as_std_mut().process_group(0);
    }
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe
    // system calls on data made before the fork; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            prepared.enter()?;
            match &walls {
                Some(walls) => raise(walls, prepared.mount.as_ref().map(|m| &m.target)),
                None => Ok(()),
            }
        });
    }
    Ok(channel)
}

/// Whether processes can start in an overlay view here, found by starting one; why not.
pub fn support() -> &'static Result<(), String> {
    static SUPPORT: OnceLock<Result<(), String>> = OnceLock::new();
    SUPPORT.get_or_init(probe)
}

fn probe() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let view = OverlayView {
        lower: dir.path().join("lower"),
        upper: dir.path().join("upper"),
        work: dir.path().join("work"),
    };
    for d in [&view.lower, &view.upper, &view.work] {
        std::fs::create_dir(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    std::fs::write(view.lower.join("probe"), b"lower\n").map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let upper = view.upper.clone();
    let result = std::thread::spawn(move || {
        runtime.block_on(async {
            let mut cmd = tokio::process::Command::new("cat");
            cmd.arg("probe")
                .current_dir(&upper)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null());
            prepare(
                &mut cmd,
                Entry {
                    view: Some(&view),
                    net: None,
                },
                Some(&upper),
                None,
            )
            .map_err(|e| e.to_string())?;
            let out = cmd
                .output()
                .await
                .map_err(|e| format!("a user and mount namespace with an overlay: {e}"))?;
            if out.status.success() && out.stdout == b"lower\n" {
                Ok(())
            } else {
                Err("an overlay view showed nothing of its lower layer".to_string())
            }
        })
    })
    .join()
    .unwrap_or_else(|_| Err("the probe panicked".to_string()));
    drop(dir);
    result
}
