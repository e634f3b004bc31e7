//! Starting a process inside a task's whole-tree view, a network namespace of its own, or
//! both: between fork and exec the child makes a user namespace (mapping only its own user
//! and group) and a mount namespace of its own (and a network namespace: [`super::net`]),
//! mounts the view at its stable path (an overlayfs of the process's own layer over the
//! read-only layers of the base, or plait's own base layer bound writable), the directories
//! of the user's checkout the setup shares (`[setup] include`, each a layer of its own), the
//! view again at every alias (the task's worktree), the tools' caches each over a layer of
//! the sandbox's own, covers the path sockets served outside, steps into it, and only then
//! raises the walls, whose rules for the view and the caches it opens itself: a rule on a
//! directory opened before the mount would not cover what is mounted there, and a process
//! behind Landlock can no longer mount. Everything the child runs is async-signal-safe
//! system calls on data prepared before the fork.
//!
//! Whether this system allows it is asked once per process, by doing it (`support`).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::ffi::{add_rule, c_path, c_str};
use crate::child::Stage;

/// What a process sees at the view's stable path: its own layer (`upper`, with overlayfs's
/// `work` directory beside it) over the read-only `lower` layers, uppermost first. Without
/// an upper layer the first lower layer is mounted writable: plait's own steps on the base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayView {
    /// Where the view is mounted, the same path for every view and check of a repository,
    /// and where a working directory under an alias is taken to.
    pub target: PathBuf,
    /// The read-only layers, uppermost first.
    pub lower: Vec<PathBuf>,
    /// The writable layer on top, if any.
    pub upper: Option<Layer>,
    /// Other paths that show the view too (a task's worktree, so that paths naming it hold).
    pub aliases: Vec<PathBuf>,
    /// Directories of the view with layers of their own, mounted over it.
    pub nested: Vec<Nested>,
}

/// A writable layer: where its writes land, and overlayfs's work directory on the same
/// file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// Where its writes land.
    pub upper: PathBuf,
    /// overlayfs's work directory.
    pub work: PathBuf,
}

/// A directory of a view (`path`, relative to its target) showing `source` (a directory of
/// the user's checkout), under a layer of its own when `layer` is given, else read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nested {
    /// Where, relative to the view's target.
    pub path: PathBuf,
    /// The directory of the user's checkout it shows.
    pub source: PathBuf,
    /// Its own writable layer; `None`: read-only.
    pub layer: Option<Layer>,
    /// The device and inode `source` must be once mounted (as plait found it beneath the
    /// checkout, with no link followed): a link put at its path or on the way since is
    /// refused (`ELOOP`) rather than followed.
    pub identity: Option<(u64, u64)>,
}

impl OverlayView {
    /// The names at the root of the view (its layers' roots and its nested directories'
    /// first components), but `.git`: the entries shown at the user's checkout (see
    /// `super::checkout`). A name a layer above hides is found gone when it is opened.
    pub(crate) fn root_names(&self) -> Vec<std::ffi::OsString> {
        let mut names: Vec<std::ffi::OsString> = Vec::new();
        let roots = self.upper.iter().map(|l| &l.upper).chain(&self.lower);
        for root in roots {
            for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
                names.push(entry.file_name());
            }
        }
        for nested in &self.nested {
            if let Some(std::path::Component::Normal(first)) = nested.path.components().next() {
                names.push(first.to_os_string());
            }
        }
        names.sort();
        names.dedup();
        names.retain(|n| n != ".git");
        names
    }

    /// Where the view is mounted: its target and its aliases.
    pub(crate) fn mounted_at(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.target.as_path()).chain(self.aliases.iter().map(PathBuf::as_path))
    }

    /// A task's view: its worktree (`upper`) over `lower`, mounted at `target` and shown at
    /// the worktree's own path too, overlayfs's work directory at `work`.
    pub fn of_worktree(
        target: PathBuf,
        lower: Vec<PathBuf>,
        upper: PathBuf,
        work: PathBuf,
    ) -> Self {
        OverlayView {
            target,
            lower,
            upper: Some(Layer {
                upper: upper.clone(),
                work,
            }),
            aliases: vec![upper],
            nested: Vec::new(),
        }
    }

    /// Every path of the host this view names, which no cache layer may cover.
    pub(crate) fn paths(&self) -> Vec<&Path> {
        let mut all: Vec<&Path> = vec![&self.target];
        all.extend(self.lower.iter().map(PathBuf::as_path));
        all.extend(self.aliases.iter().map(PathBuf::as_path));
        for layer in self
            .upper
            .iter()
            .chain(self.nested.iter().filter_map(|n| n.layer.as_ref()))
        {
            all.extend([layer.upper.as_path(), layer.work.as_path()]);
        }
        all.extend(self.nested.iter().map(|n| n.source.as_path()));
        all
    }

    /// `cwd` as the child takes it: under the target where it lies under an alias.
    pub(crate) fn map_cwd(&self, cwd: &Path) -> PathBuf {
        for alias in &self.aliases {
            if let Ok(rest) = cwd.strip_prefix(alias) {
                return self.target.join(rest);
            }
        }
        cwd.to_path_buf()
    }
}

/// A tool's cache the processes of a sandbox write through a layer of the sandbox's own:
/// reads see the user's cache, writes reach neither it nor another sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CacheLayer {
    pub dir: PathBuf,
    pub layer: Layer,
    /// Where beneath `dir` (or `dir` itself) its processes may read and write, once it is
    /// mounted.
    pub rules: Vec<PathBuf>,
}

/// Where a child goes between fork and exec, before its walls: a task's whole-tree view,
/// a network namespace of its own, or both (either one needs a user namespace).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Entry<'a> {
    pub(crate) view: Option<&'a OverlayView>,
    pub(crate) caches: &'a [CacheLayer],
    /// Files bound read-only over others (`source`, `target`): what the process reads in
    /// the target's place.
    pub(crate) binds: &'a [(PathBuf, PathBuf)],
    /// A network namespace of its own, with its ports and the sockets to cover; with
    /// `joined`, only the sockets to cover beyond those covered there.
    pub(crate) net: Option<&'a super::net::ports::Namespace>,
    /// The user, network and mount namespaces of its sandbox to join (`net::holder`).
    pub(crate) joined: Option<[std::os::fd::RawFd; 3]>,
    /// A PID namespace of its own, with its own `/proc` (see `super::pids`).
    pub(crate) pid: Option<crate::child::PidNs>,
    /// How much it may take.
    pub(crate) limits: super::limits::Limits,
    /// The user's checkout, shown as the view (see `super::checkout`).
    pub(crate) checkout: Option<&'a super::checkout::Checkout>,
}

/// One mount, as the child passes it to `mount(2)`: an overlay, or a bind (read-only when
/// `remount` says so, which takes a second call).
struct Mount {
    source: CString,
    target: CString,
    fstype: Option<CString>,
    flags: libc::c_ulong,
    options: Option<CString>,
    read_only: bool,
    /// A failure leaves the rest to go on (a tool's cache), rather than failing the spawn.
    optional: bool,
    /// The device and inode the target must show once mounted; else it is taken down and
    /// the mount fails with `ELOOP` (a link was followed to something else).
    expect: Option<(u64, u64)>,
}

/// What the child needs, prepared before the fork.
struct Prepared {
    flags: libc::c_int,
    /// Namespaces to join rather than make (user, network, mount).
    joined: Option<[std::os::fd::RawFd; 3]>,
    setgroups: CString,
    uid_map: CString,
    gid_map: CString,
    uid_line: Vec<u8>,
    gid_line: Vec<u8>,
    root: CString,
    mounts: Vec<Mount>,
    /// Which mounts were made, written by the child (made before the fork: no allocation).
    mounted: Vec<bool>,
    /// The paths the child opens for its write rules after its mounts, each with the mount
    /// that must have been made for the rule to be given.
    rules: Vec<(CString, Option<usize>)>,
    /// The view shown at the user's checkout, made after the mounts; its entries' rules
    /// are opened with no link followed (see `super::checkout`).
    shown: Option<super::checkout::Shown>,
    /// Path sockets served outside, each covered with `/dev/null`.
    hide: Vec<CString>,
    devnull: CString,
    net: Option<super::net::ports::Prepared>,
    cwd: Option<CString>,
    /// A PID namespace asked for (`CLONE_NEWPID`) in [`Stage::Outer`], and `/proc` mounted
    /// afresh for it in [`Stage::Inner`].
    pid: bool,
    proc: CString,
    proc_type: CString,
    /// The overlays' work directories made for this process alone.
    works: Vec<PathBuf>,
    /// Its limits: `RLIMIT_NPROC` and `RLIMIT_DATA`, and its PID namespace's `pid_max`
    /// (the file and what is written to it).
    nproc: Option<libc::rlim_t>,
    data: Option<libc::rlim_t>,
    pid_max: Option<(CString, Vec<u8>)>,
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

/// A work directory of overlayfs's for one mount alone, made beneath `layer`'s: a mount
/// clears the work directory it is given, so two that shared one (commands started at
/// once in one view) broke each other (mounted read-only, or not at all: `EINVAL`).
/// Removed with the sandbox (see [`remove_works`]).
fn own_work(layer: &Layer, made: &mut Vec<PathBuf>) -> io::Result<Layer> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let work = layer.work.join(format!("m{}-{n}", std::process::id()));
    std::fs::create_dir(&work)?;
    made.push(work.clone());
    Ok(Layer {
        upper: layer.upper.clone(),
        work,
    })
}

pub(crate) use crate::child::remove_works;

impl Mount {
    fn overlay(target: &Path, lower: &[&Path], layer: &Layer, optional: bool) -> io::Result<Mount> {
        let mut options = b"lowerdir=".to_vec();
        for (i, dir) in lower.iter().enumerate() {
            if i > 0 {
                options.push(b':');
            }
            options.extend(escaped(dir));
        }
        options.extend(b",upperdir=");
        options.extend(escaped(&layer.upper));
        options.extend(b",workdir=");
        options.extend(escaped(&layer.work));
        options.extend(b",userxattr");
        Ok(Mount {
            source: c_str("overlay"),
            target: c_path(target)?,
            fstype: Some(c_str("overlay")),
            flags: 0,
            options: Some(CString::new(options).map_err(|_| io::Error::other("a path holds NUL"))?),
            read_only: false,
            optional,
            expect: None,
        })
    }

    fn bind(source: &Path, target: &Path, read_only: bool) -> io::Result<Mount> {
        Ok(Mount {
            source: c_path(source)?,
            target: c_path(target)?,
            fstype: None,
            flags: libc::MS_BIND | libc::MS_REC,
            options: None,
            read_only,
            optional: false,
            expect: None,
        })
    }

    /// In the child: the mount. Async-signal-safe.
    unsafe fn make(&self) -> bool {
        let fstype = self
            .fstype
            .as_ref()
            .map_or(std::ptr::null(), |f| f.as_ptr());
        let options = self
            .options
            .as_ref()
            .map_or(std::ptr::null(), |o| o.as_ptr().cast());
        if libc::mount(
            self.source.as_ptr(),
            self.target.as_ptr(),
            fstype,
            self.flags,
            options,
        ) != 0
        {
            return false;
        }
        if let Some((dev, ino)) = self.expect {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::stat(self.target.as_ptr(), &mut st) != 0
                || st.st_dev != dev
                || st.st_ino != ino
            {
                libc::umount2(self.target.as_ptr(), libc::MNT_DETACH);
                *libc::__errno_location() = libc::ELOOP;
                return false;
            }
        }
        !self.read_only
            || libc::mount(
                std::ptr::null(),
                self.target.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                std::ptr::null(),
            ) == 0
    }
}

/// The mounts of `binds`, `view` and `caches`, in order (each overlay with a work
/// directory of its own, listed in `works`), and the write rules the child opens after them.
#[allow(clippy::type_complexity)]
fn mounts(
    view: Option<&OverlayView>,
    caches: &[CacheLayer],
    binds: &[(PathBuf, PathBuf)],
    works: &mut Vec<PathBuf>,
) -> io::Result<(Vec<Mount>, Vec<(CString, Option<usize>)>)> {
    let mut mounts = Vec::new();
    for (source, target) in binds {
        mounts.push(Mount::bind(source, target, true)?);
    }
    let mut rules = Vec::new();
    if let Some(view) = view {
        let lower: Vec<&Path> = view.lower.iter().map(PathBuf::as_path).collect();
        match (&view.upper, lower.split_first()) {
            (Some(layer), _) => {
                let layer = own_work(layer, works)?;
                mounts.push(Mount::overlay(&view.target, &lower, &layer, false)?)
            }
            (None, Some((base, _))) => mounts.push(Mount::bind(base, &view.target, false)?),
            (None, None) => return Err(io::Error::other("a view with no layer")),
        }
        for nested in &view.nested {
            // The source bound first, and checked to be the directory plait found; then
            // (with a layer) the overlay over that bound directory at the same path.
            let target = view.target.join(&nested.path);
            let mut bind = Mount::bind(&nested.source, &target, nested.layer.is_none())?;
            bind.expect = nested.identity;
            mounts.push(bind);
            if let Some(layer) = &nested.layer {
                let layer = own_work(layer, works)?;
                mounts.push(Mount::overlay(&target, &[&target], &layer, false)?);
            }
        }
        rules.push((c_path(&view.target)?, None));
        for alias in &view.aliases {
            mounts.push(Mount::bind(&view.target, alias, false)?);
            rules.push((c_path(alias)?, None));
        }
    }
    for cache in caches {
        // A cache's layer whose work directory cannot be had is left out, as its mount
        // would be.
        let Ok(layer) = own_work(&cache.layer, works) else {
            continue;
        };
        mounts.push(Mount::overlay(&cache.dir, &[&cache.dir], &layer, true)?);
        for rule in &cache.rules {
            rules.push((c_path(rule)?, Some(mounts.len() - 1)));
        }
    }
    Ok((mounts, rules))
}

impl Prepared {
    /// Also the parent's end of the channel the child sends its listeners over, when it
    /// makes any.
    fn new(entry: Entry<'_>, cwd: Option<&Path>) -> io::Result<(Prepared, Option<OwnedFd>)> {
        // SAFETY: getuid and getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let user = entry.pid != Some(crate::child::PidNs::Direct);
        let mut flags = libc::CLONE_NEWNS | if user { libc::CLONE_NEWUSER } else { 0 };
        let (net, channel) = match entry.net {
            Some(_) if entry.joined.is_some() => (None, None),
            Some(namespace) => {
                flags |= libc::CLONE_NEWNET;
                let (prepared, channel) = super::net::ports::Prepared::new(namespace)?;
                (Some(prepared), channel)
            }
            None => (None, None),
        };
        let hide = entry
            .net
            .map(|n| n.hide.iter().map(|p| c_path(p)).collect())
            .transpose()?
            .unwrap_or_default();
        let mut works = Vec::new();
        let made = mounts(entry.view, entry.caches, entry.binds, &mut works);
        let (mounts, rules) = match made {
            Ok(made) => made,
            Err(e) => {
                remove_works(&works);
                return Err(e);
            }
        };
        let cwd = match (cwd, entry.view) {
            (Some(cwd), Some(view)) => Some(view.map_cwd(cwd)),
            (cwd, _) => cwd.map(Path::to_path_buf),
        };
        let prepared = Prepared {
            flags,
            joined: entry.joined,
            setgroups: c_str("/proc/self/setgroups"),
            uid_map: c_str("/proc/self/uid_map"),
            gid_map: c_str("/proc/self/gid_map"),
            uid_line: format!("{uid} {uid} 1\n").into_bytes(),
            gid_line: format!("{gid} {gid} 1\n").into_bytes(),
            root: c_str("/"),
            mounted: vec![false; mounts.len()],
            mounts,
            rules,
            shown: match (entry.view, entry.checkout) {
                (Some(view), Some(checkout)) => {
                    Some(checkout.prepare(&view.target, view.root_names())?)
                }
                _ => None,
            },
            hide,
            devnull: c_str("/dev/null"),
            net,
            cwd: cwd.as_deref().map(c_path).transpose()?,
            works,
            nproc: entry.limits.pids.map(libc::rlim_t::from),
            data: entry.limits.memory,
            // Its numbers start at 1 and, once they wrap, go on from 300.
            pid_max: entry
                .limits
                .pids
                .filter(|_| entry.pid.is_some())
                .map(|pids| {
                    (
                        c_str("/proc/sys/kernel/pid_max"),
                        (u64::from(pids) + 300).to_string().into_bytes(),
                    )
                }),
            pid: entry.pid.is_some(),
            proc: c_str("/proc"),
            proc_type: c_str("proc"),
        };
        Ok((prepared, channel))
    }

    /// In the child plait cloned: its user namespace (the sandbox's, joined, or a new one
    /// mapping only plait's user and group), and a PID namespace for its next child.
    ///
    /// # Safety
    /// Between fork (or clone) and exec only: plain system calls, no allocation.
    unsafe fn enter_outer(&mut self) -> io::Result<()> {
        let fail = || Err(io::Error::last_os_error());
        if let Some([user, _, _]) = self.joined {
            if libc::setns(user, libc::CLONE_NEWUSER) != 0 {
                return fail();
            }
        } else if self.flags & libc::CLONE_NEWUSER != 0 {
            if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                return fail();
            }
            if !write_all(&self.setgroups, b"deny\n")
                || !write_all(&self.uid_map, &self.uid_line)
                || !write_all(&self.gid_map, &self.gid_line)
            {
                return fail();
            }
        }
        if self.pid && libc::unshare(libc::CLONE_NEWPID) != 0 {
            return fail();
        }
        Ok(())
    }

    /// In the process that runs the program: its mount (and network) namespace, the
    /// mounts, `/proc` of its PID namespace, the network, the working directory again.
    ///
    /// # Safety
    /// Between fork (or clone) and exec only: plain system calls, no allocation.
    unsafe fn enter_inner(&mut self) -> io::Result<()> {
        let fail = || Err(io::Error::last_os_error());
        if let Some([_, net, mnt]) = self.joined {
            // The sandbox's own: its mounts private already, its sockets covered. A mount
            // namespace of the process's own is made from it only for mounts of its own.
            if libc::setns(net, libc::CLONE_NEWNET) != 0 || libc::setns(mnt, libc::CLONE_NEWNS) != 0
            {
                return fail();
            }
            if (!self.mounts.is_empty() || !self.hide.is_empty() || self.pid)
                && libc::unshare(libc::CLONE_NEWNS) != 0
            {
                return fail();
            }
        } else {
            if libc::unshare(self.flags & !libc::CLONE_NEWUSER) != 0 {
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
        }
        for (i, mount) in self.mounts.iter().enumerate() {
            let made = mount.make();
            if !made && !mount.optional {
                return fail();
            }
            self.mounted[i] = made;
        }
        if let Some(shown) = &mut self.shown {
            shown.make();
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
        // Its own processes only: another's `cmdline` and `environ` are not there to read.
        if self.pid
            && libc::mount(
                self.proc_type.as_ptr(),
                self.proc.as_ptr(),
                self.proc_type.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) != 0
        {
            return fail();
        }
        self.limit();
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

    /// In the process that runs the program: its limits. A kernel that keeps `pid_max`
    /// for the whole machine (before 6.14) refuses it here, and the rest holds.
    ///
    /// # Safety
    /// Between fork (or clone) and exec only: plain system calls, no allocation.
    unsafe fn limit(&self) {
        if let Some((path, value)) = &self.pid_max {
            write_all(path, value);
        }
        for (resource, limit) in [
            (libc::RLIMIT_NPROC, self.nproc),
            (libc::RLIMIT_DATA, self.data),
        ] {
            let Some(limit) = limit else {
                continue;
            };
            let mut now: libc::rlimit = std::mem::zeroed();
            if libc::getrlimit(resource, &mut now) == 0 && now.rlim_cur > limit {
                now.rlim_cur = limit;
                now.rlim_max = limit;
                libc::setrlimit(resource, &now);
            }
        }
    }

    /// The write rules to open after the mounts: those whose mount was made.
    fn rule_targets(&self) -> impl Iterator<Item = &CString> {
        self.rules
            .iter()
            .filter(|(_, needs)| needs.is_none_or(|i| self.mounted[i]))
            .map(|(path, _)| path)
    }

    /// The checkout's entries to open for rules after the mounts, once it is shown.
    fn entry_targets(&self) -> impl Iterator<Item = &CString> {
        self.shown.iter().flat_map(super::checkout::Shown::rules)
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

/// The walls raised in the child after its mounts: `ruleset` (every rule but those of the
/// view and the caches), plus a rule giving `access` beneath each of those as the child
/// now sees them.
pub(crate) struct Walls {
    pub(crate) ruleset: OwnedFd,
    pub(crate) access: u64,
    /// What a rule on the process's own `/proc` grants (0: no rule, reads are open).
    pub(crate) proc_access: u64,
    /// A session of its own (no controlling terminal) rather than only a process group.
    pub(crate) session: bool,
}

#[cfg(target_os = "linux")]
unsafe fn raise<'a>(
    walls: &Walls,
    (targets, entries): (
        impl Iterator<Item = &'a CString>,
        impl Iterator<Item = &'a CString>,
    ),
    proc: Option<&CString>,
) -> io::Result<()> {
    if walls.session && libc::setsid() < 0 {
        return Err(io::Error::last_os_error());
    }
    for target in targets {
        add_rule(walls.ruleset.as_raw_fd(), target, walls.access)?;
    }
    for entry in entries {
        super::checkout::add_entry_rule(walls.ruleset.as_raw_fd(), entry, walls.access)?;
    }
    // A rule names what was opened: the `/proc` mounted here is not the one the
    // sandbox's rules name.
    if let Some(proc) = proc.filter(|_| walls.proc_access != 0) {
        add_rule(walls.ruleset.as_raw_fd(), proc, walls.proc_access)?;
    }
    super::rules::restrict(walls.ruleset.as_raw_fd())
}

/// An overlayfs whiteout at `path` (a character device 0/0, which Linux lets any user make
/// since 5.8): the file of the same name in the layers below is hidden.
pub fn whiteout(path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: a plain system call on a NUL-terminated path.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR, libc::makedev(0, 0)) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
unsafe fn raise<'a>(
    _walls: &Walls,
    _targets: (
        impl Iterator<Item = &'a CString>,
        impl Iterator<Item = &'a CString>,
    ),
    _proc: Option<&CString>,
) -> io::Result<()> {
    Err(io::Error::other("Landlock is Linux's"))
}

/// What a child does before its program runs to start where an [`Entry`] says: its
/// namespaces and mounts, its working directory taken again inside, then its `walls`.
pub(crate) struct Entering {
    prepared: Prepared,
    walls: Option<Walls>,
}

impl Entering {
    /// Whether the walls give it a session of its own (else it needs a process group).
    pub(crate) fn session(&self) -> bool {
        self.walls.as_ref().is_some_and(|w| w.session)
    }

    /// The work directories its overlays use, made for it alone: to be removed once it
    /// has ended (see [`remove_works`]).
    pub(crate) fn take_works(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.prepared.works)
    }

    /// Whether it makes a PID namespace (so the program runs in the process the child
    /// clones: see `crate::child::spawn_entering`).
    pub(crate) fn pid_ns(&self) -> bool {
        self.prepared.pid
    }

    /// In the child, before its program runs, at `stage`.
    ///
    /// # Safety
    /// Between fork (or clone) and exec only: plain system calls, no allocation.
    pub(crate) unsafe fn run(&mut self, stage: Stage) -> io::Result<()> {
        if stage == Stage::Outer {
            return self.prepared.enter_outer();
        }
        self.prepared.enter_inner()?;
        let proc = self.prepared.pid.then_some(&self.prepared.proc);
        match &self.walls {
            Some(walls) => raise(
                walls,
                (self.prepared.rule_targets(), self.prepared.entry_targets()),
                proc,
            ),
            None => Ok(()),
        }
    }

    /// Both stages in one process (no PID namespace of its own).
    ///
    /// # Safety
    /// As [`Entering::run`].
    pub(crate) unsafe fn run_all(&mut self) -> io::Result<()> {
        self.run(Stage::Outer)?;
        self.run(Stage::Inner)
    }
}

/// What a child must do to start where `entry` says (its working directory `cwd` taken
/// again inside), behind `walls` when there are any; and the channel on which it sends
/// the listeners it makes in a network namespace of its own.
pub(crate) fn entering(
    entry: Entry<'_>,
    cwd: Option<&Path>,
    walls: Option<Walls>,
) -> io::Result<(Entering, Option<OwnedFd>)> {
    let (prepared, channel) = Prepared::new(entry, cwd)?;
    Ok((Entering { prepared, walls }, channel))
}

/// Sets `cmd` up to start where `entry` says, as [`entering`] does it, between fork and
/// exec, in a process group (or a session) of its own (the probes here).
fn prepare(
    cmd: &mut tokio::process::Command,
    entry: Entry<'_>,
    cwd: Option<&Path>,
    walls: Option<Walls>,
) -> io::Result<Option<OwnedFd>> {
    use std::os::unix::process::CommandExt as _;
    let (mut entering, channel) = entering(entry, cwd, walls)?;
    if !entering.session() {
        cmd.as_std_mut().process_group(0);
    }
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe
    // system calls on data made before the fork; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || entering.run_all());
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
    let at = |name: &str| dir.path().join(name);
    let view = OverlayView::of_worktree(at("target"), vec![at("lower")], at("upper"), at("work"));
    for d in ["lower", "upper", "work", "target"] {
        std::fs::create_dir(at(d)).map_err(|e| format!("{}: {e}", at(d).display()))?;
    }
    std::fs::write(at("lower").join("probe"), b"lower\n").map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let upper = at("upper");
    let result = std::thread::spawn(move || {
        runtime.block_on(async {
            let mut cmd = tokio::process::Command::new("cat");
            cmd.arg("probe")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null());
            let entry = Entry {
                view: Some(&view),
                ..Entry::default()
            };
            prepare(&mut cmd, entry, Some(&upper), None).map_err(|e| e.to_string())?;
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

/// Whether processes can start in a network namespace of their own here, found by starting
/// one; why not.
pub fn net_support() -> &'static Result<(), String> {
    static SUPPORT: OnceLock<Result<(), String>> = OnceLock::new();
    SUPPORT.get_or_init(probe_net)
}

fn probe_net() -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            let namespace = super::net::ports::Namespace {
                ports: Vec::new(),
                hide: Vec::new(),
            };
            let mut cmd = tokio::process::Command::new("true");
            cmd.stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            let entry = Entry {
                net: Some(&namespace),
                ..Entry::default()
            };
            prepare(&mut cmd, entry, None, None).map_err(|e| e.to_string())?;
            let status = cmd
                .status()
                .await
                .map_err(|e| format!("a user and network namespace: {e}"))?;
            if status.success() {
                Ok(())
            } else {
                Err(format!(
                    "a process in a network namespace ended with {status}"
                ))
            }
        })
    })
    .join()
    .unwrap_or_else(|_| Err("the probe panicked".to_string()))
}
