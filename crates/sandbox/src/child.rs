//! A process plait starts for a task, and the two ways it starts: through tokio's command
//! (`posix_spawn` where nothing runs between fork and exec), or, where the child must enter
//! namespaces before its program runs (a network wall, a whole-tree view), by a `clone` that
//! shares plait's memory and holds plait's calling thread until the child has `exec`ed
//! ([`spawn_entering`], as `posix_spawn` does it): no copy of plait's page tables, and no
//! copy-on-write fault in plait afterwards for every page it writes, which with `fork` cost
//! a few milliseconds a process in a run of many tasks.
//!
//! [`Spec`] is what to start, [`Child`] what was started, the same for both.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite};

/// One of a process's standard streams.
#[derive(Debug)]
pub enum Io {
    /// `/dev/null`.
    Null,
    /// A pipe to plait ([`Child::stdin`], [`Child::stdout`], [`Child::stderr`]).
    Piped,
    /// This descriptor (a file, a requester's stream).
    Fd(OwnedFd),
}

impl From<std::fs::File> for Io {
    fn from(file: std::fs::File) -> Io {
        Io::Fd(file.into())
    }
}

/// What to start: the program (found on `PATH` when it names no directory), its arguments,
/// working directory, environment (plait's, changed) and standard streams. Killed when its
/// [`Child`] is dropped before it ended.
#[derive(Debug)]
pub struct Spec {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) cwd: PathBuf,
    pub(crate) clear_env: bool,
    /// Changes to the environment, in order: set, or removed (`None`).
    pub(crate) env: Vec<(OsString, Option<OsString>)>,
    pub(crate) stdio: [Io; 3],
}

impl Spec {
    /// `program` in `cwd`, with plait's environment and no standard streams.
    pub fn new(program: impl Into<OsString>, cwd: impl Into<PathBuf>) -> Spec {
        Spec {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.into(),
            clear_env: false,
            env: Vec::new(),
            stdio: [Io::Null, Io::Null, Io::Null],
        }
    }

    /// Its arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Spec {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets `key` to `value`.
    pub fn env(&mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> &mut Spec {
        self.env.push((key.into(), Some(value.into())));
        self
    }

    /// Leaves `key` out.
    pub fn env_remove(&mut self, key: impl Into<OsString>) -> &mut Spec {
        self.env.push((key.into(), None));
        self
    }

    /// Starts from an empty environment.
    pub fn env_clear(&mut self) -> &mut Spec {
        self.clear_env = true;
        self.env.clear();
        self
    }

    /// Its standard input, output and error.
    pub fn stdio(mut self, stdin: Io, stdout: Io, stderr: Io) -> Spec {
        self.stdio = [stdin, stdout, stderr];
        self
    }

    /// The program, as given.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// As tokio's command, killed on drop.
    pub(crate) fn command(self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.args(&self.args)
            .current_dir(&self.cwd)
            .kill_on_drop(true);
        if self.clear_env {
            cmd.env_clear();
        }
        for (key, value) in &self.env {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        let [stdin, stdout, stderr] = self.stdio.map(|io| match io {
            Io::Null => Stdio::null(),
            Io::Piped => Stdio::piped(),
            Io::Fd(fd) => Stdio::from(fd),
        });
        cmd.stdin(stdin).stdout(stdout).stderr(stderr);
        cmd
    }

    /// The environment the program gets, as `KEY=VALUE`.
    fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = if self.clear_env {
            Vec::new()
        } else {
            std::env::vars_os().collect()
        };
        for (key, value) in &self.env {
            env.retain(|(k, _)| k != key);
            if let Some(value) = value {
                env.push((key.clone(), value.clone()));
            }
        }
        env
    }
}

/// A process started from a [`Spec`]: its pipes (where asked for), its id, its end.
pub struct Child {
    inner: Inner,
    /// Its standard input, when piped.
    pub stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    /// Its standard output, when piped.
    pub stdout: Option<Pin<Box<dyn AsyncRead + Send>>>,
    /// Its standard error, when piped.
    pub stderr: Option<Pin<Box<dyn AsyncRead + Send>>>,
}

enum Inner {
    Tokio(tokio::process::Child),
    Cloned(Cloned),
}

/// A child of [`spawn_entering`]: waited for through its pidfd, killed and reaped when
/// dropped before that.
struct Cloned {
    pid: u32,
    pidfd: tokio::io::unix::AsyncFd<OwnedFd>,
    status: Option<ExitStatus>,
    /// Directories made for it alone (its overlays' work directories), removed once it
    /// has ended.
    works: Vec<PathBuf>,
}

impl Drop for Cloned {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let pid = self.pid as libc::pid_t;
        // SAFETY: our own child, not yet reaped (so the id is still its).
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let works = std::mem::take(&mut self.works);
        // Reaped once it is gone, which a killed process soon is.
        let _ = std::thread::Builder::new()
            .name("plait-reap".to_string())
            .stack_size(64 * 1024)
            .spawn(move || {
                let mut status = 0;
                // SAFETY: our own child, reaped once.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                remove_works(&works);
            });
    }
}

impl Child {
    /// A child tokio started.
    pub(crate) fn from_tokio(mut child: tokio::process::Child) -> Child {
        Child {
            stdin: child
                .stdin
                .take()
                .map(|s| Box::pin(s) as Pin<Box<dyn AsyncWrite + Send>>),
            stdout: child
                .stdout
                .take()
                .map(|s| Box::pin(s) as Pin<Box<dyn AsyncRead + Send>>),
            stderr: child
                .stderr
                .take()
                .map(|s| Box::pin(s) as Pin<Box<dyn AsyncRead + Send>>),
            inner: Inner::Tokio(child),
        }
    }

    /// Removes `works` (directories made for it alone) once it has ended; at once when
    /// it is not a cloned child.
    pub(crate) fn remove_when_ended(&mut self, works: Vec<PathBuf>) {
        match &mut self.inner {
            Inner::Cloned(c) if c.status.is_none() => c.works.extend(works),
            _ => remove_works(&works),
        }
    }

    /// Its process id, until it has been waited for.
    pub fn id(&self) -> Option<u32> {
        match &self.inner {
            Inner::Tokio(child) => child.id(),
            Inner::Cloned(c) => c.status.is_none().then_some(c.pid),
        }
    }

    /// Waits for it to end.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        // Its input closes first, as tokio's own wait does: a program reading it to its
        // end must not wait for plait.
        self.stdin = None;
        match &mut self.inner {
            Inner::Tokio(child) => child.wait().await,
            Inner::Cloned(c) => {
                if let Some(status) = c.status {
                    return Ok(status);
                }
                loop {
                    let mut ready = c.pidfd.readable().await?;
                    let mut status = 0;
                    // SAFETY: our own child; WNOHANG does not block.
                    let got =
                        unsafe { libc::waitpid(c.pid as libc::pid_t, &mut status, libc::WNOHANG) };
                    if got == c.pid as libc::pid_t {
                        use std::os::unix::process::ExitStatusExt as _;
                        let status = ExitStatus::from_raw(status);
                        c.status = Some(status);
                        // Its PID namespace's processes went with it (or, without one,
                        // its overlays are its own no longer).
                        remove_works(&std::mem::take(&mut c.works));
                        return Ok(status);
                    }
                    if got < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    ready.clear_ready();
                }
            }
        }
    }

    /// Waits for it to end, reading its piped output to the end meanwhile.
    pub async fn wait_with_output(mut self) -> io::Result<std::process::Output> {
        async fn read_all(pipe: Option<Pin<Box<dyn AsyncRead + Send>>>) -> io::Result<Vec<u8>> {
            let mut out = Vec::new();
            if let Some(mut pipe) = pipe {
                pipe.read_to_end(&mut out).await?;
            }
            Ok(out)
        }
        self.stdin = None;
        let (stdout, stderr) = (self.stdout.take(), self.stderr.take());
        let (stdout, stderr) = tokio::try_join!(read_all(stdout), read_all(stderr))?;
        let status = self.wait().await?;
        Ok(std::process::Output {
            status,
            stdout,
            stderr,
        })
    }
}

fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| io::Error::other("an argument holds NUL"))
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just made both, and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// What the cloned child does, all of it made before the clone: it allocates nothing.
struct Exec<'a> {
    /// The paths to try, in order (the `PATH` search made ahead).
    candidates: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    stdio: [RawFd; 3],
    /// A descriptor to keep open across the exec.
    pass: Option<RawFd>,
    /// A process group of its own (else `enter` makes it a session).
    group: bool,
    /// Entering its namespaces and raising its walls, at each [`Stage`].
    enter: &'a mut dyn FnMut(Stage) -> io::Result<()>,
    /// A PID namespace of its own: the stack of the process cloned into it (see
    /// [`spawn_entering`]), made before the first clone.
    inner_stack: Option<Vec<u8>>,
    /// That process's id, as plait sees it; 0 until it is cloned.
    inner: libc::pid_t,
    /// What went wrong in the child, as `errno`; 0 when it `exec`ed.
    error: libc::c_int,
}

/// Where a cloned child stands when it calls its `enter` (see [`spawn_entering`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// First, in the child plait cloned: its user namespace entered, and a PID namespace
    /// asked for the process it clones next (when it has one).
    Outer,
    /// Then, in the process that runs the program (the same one without a PID
    /// namespace): the rest of its namespaces, its mounts and its walls.
    Inner,
}

/// What a cloned child runs: a closure of plait's, then `_exit` with what it returned.
struct Call<'a>(&'a mut dyn FnMut() -> libc::c_int);

extern "C" fn call_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Call` of `clone_vfork`, whose thread waits (CLONE_VFORK) until
    // this child has `exec`ed or ended.
    let call = unsafe { &mut *(arg as *mut Call<'_>) };
    let code = (call.0)();
    // SAFETY: ends the child without running anything of plait's.
    unsafe { libc::_exit(code) }
}

/// Runs `run` in a child cloned with `flags` and `CLONE_VM | CLONE_VFORK`: on a stack of its
/// own, in plait's memory, this thread held until the child has `exec`ed or ended, every
/// signal blocked in it (a handler of plait's must not run there). `run` makes only
/// async-signal-safe calls and allocates nothing. The child's id, and its pidfd when
/// `flags` ask for one (`CLONE_PIDFD`).
pub(crate) fn clone_vfork(
    flags: libc::c_int,
    run: &mut dyn FnMut() -> libc::c_int,
) -> io::Result<(libc::pid_t, Option<OwnedFd>)> {
    let mut call = Call(run);
    // Its stack: plain memory of plait's, unused while the child runs on it.
    let mut stack = vec![0u8; 256 * 1024];
    // SAFETY: the end of the stack, which grows down, aligned as the ABI wants.
    let top = unsafe { stack.as_mut_ptr().add(stack.len()) };
    let top = ((top as usize) & !0xf) as *mut libc::c_void;
    let mut pidfd: libc::c_int = -1;
    // SAFETY: all-zero is a valid `sigset_t`, which the calls fill.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut before: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain calls on sets of ours; the child uses only `call` and its own stack,
    // and this thread is held until it has `exec`ed or ended (CLONE_VFORK).
    let pid = unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
        let pid = libc::clone(
            call_main,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD | flags,
            (&raw mut call).cast(),
            &raw mut pidfd,
        );
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        pid
    };
    drop(stack);
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel made it for this child (CLONE_PIDFD).
    let pidfd = (flags & libc::CLONE_PIDFD != 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    Ok((pid, pidfd))
}

/// The cloned child of [`spawn_entering`]: its signals back to their defaults, the
/// [`Stage::Outer`] of its entering, then either the program itself or, with a PID
/// namespace, the clone of the process that runs it (its first process, a child of
/// plait's through `CLONE_PARENT`), after which it ends. Plain system calls on what `Exec`
/// holds; it returns only by failing, or when the process it cloned has `exec`ed or ended.
fn child_main(exec: &mut Exec<'_>) -> libc::c_int {
    // SAFETY: system calls on data prepared before the clone.
    unsafe {
        // Handlers plait set would run here, on plait's memory: back to the default (those
        // ignored stay so, but for SIGPIPE, which programs expect to kill them).
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        for signal in 1..libc::SIGRTMAX() {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_IGN || signal == libc::SIGPIPE {
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
        if let Err(e) = (exec.enter)(Stage::Outer) {
            exec.error = e.raw_os_error().unwrap_or(libc::EINVAL);
            return 127;
        }
        let Some(stack) = exec.inner_stack.as_mut() else {
            return run_program(exec);
        };
        let top = stack.as_mut_ptr().add(stack.len());
        let top = ((top as usize) & !0xf) as *mut libc::c_void;
        // In plait's memory too, this child held until it has `exec`ed or ended; its
        // parent is plait, which waits for it, and its exit status is the command's.
        let pid = libc::clone(
            inner_main,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PARENT | libc::SIGCHLD,
            (exec as *mut Exec<'_>).cast(),
        );
        if pid < 0 {
            exec.error = *libc::__errno_location();
            return 127;
        }
        exec.inner = pid;
        0
    }
}

extern "C" fn inner_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Exec` of `child_main`, held (CLONE_VFORK) until this process
    // has `exec`ed or ended.
    let exec = unsafe { &mut *(arg as *mut Exec<'_>) };
    let code = run_program(exec);
    // SAFETY: ends the process without running anything of plait's.
    unsafe { libc::_exit(code) }
}

/// The process that runs the program: its streams, group, directory, the
/// [`Stage::Inner`] of its entering, and the program. Returns only by failing.
fn run_program(exec: &mut Exec<'_>) -> libc::c_int {
    // SAFETY: system calls on data prepared before the clone.
    unsafe {
        let fail = |exec: &mut Exec<'_>| -> libc::c_int {
            exec.error = *libc::__errno_location();
            if exec.error == 0 {
                exec.error = libc::EINVAL;
            }
            127
        };
        for (target, fd) in exec.stdio.iter().enumerate() {
            let target = target as RawFd;
            let done = if *fd == target {
                libc::fcntl(target, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(*fd, target) == target
            };
            if !done {
                return fail(exec);
            }
        }
        if let Some(pass) = exec.pass {
            libc::fcntl(pass, libc::F_SETFD, 0);
        }
        if exec.group && libc::setpgid(0, 0) != 0 {
            return fail(exec);
        }
        if libc::chdir(exec.cwd.as_ptr()) != 0 {
            return fail(exec);
        }
        if let Err(e) = (exec.enter)(Stage::Inner) {
            exec.error = e.raw_os_error().unwrap_or(libc::EINVAL);
            return 127;
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        let mut denied = false;
        for candidate in &exec.candidates {
            libc::execve(candidate.as_ptr(), exec.argv.as_ptr(), exec.envp.as_ptr());
            match *libc::__errno_location() {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                _ => break,
            }
        }
        if denied && *libc::__errno_location() != libc::ENOEXEC {
            *libc::__errno_location() = libc::EACCES;
        }
        fail(exec)
    }
}

/// Starts `spec` by a `clone` sharing plait's memory, `enter` run in the child before its
/// program at each [`Stage`] (entering namespaces, raising walls: async-signal-safe calls
/// only, no allocation); `pass` kept open across the exec; a process group of its own when
/// `group` (else `enter` gives it a session). Must be called on a thread that may be held
/// until the child has `exec`ed; returns the child and the pidfd to register, both for
/// [`Child::from_cloned`].
///
/// With `pid_ns` the program runs as the first process of a PID namespace of its own,
/// which its `Stage::Outer` asks for (a namespace is entered by a process's children
/// only): the child plait clones clones it in turn, as plait's child (`CLONE_PARENT`), and
/// ends. When that first process ends, the kernel kills every process left in its
/// namespace, wherever they went (`&`, `setsid`, a double fork): nothing a command started
/// outlives it.
pub(crate) fn spawn_entering(
    spec: Spec,
    pass: Option<RawFd>,
    group: bool,
    pid_ns: bool,
    enter: &mut dyn FnMut(Stage) -> io::Result<()>,
) -> io::Result<Started> {
    let (candidates, args, vars) = c_strings(&spec)?;
    let null_ptrs = |strings: &[CString]| -> Vec<*const libc::c_char> {
        strings
            .iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let cwd = c_string(spec.cwd.as_os_str())?;
    let Streams {
        theirs,
        ours,
        stdio,
    } = streams(spec.stdio)?;
    let mut exec = Exec {
        candidates,
        argv: null_ptrs(&args),
        envp: null_ptrs(&vars),
        cwd,
        stdio,
        pass,
        group,
        enter,
        inner_stack: pid_ns.then(|| vec![0u8; 256 * 1024]),
        inner: 0,
        error: 0,
    };
    let flags = if pid_ns { 0 } else { libc::CLONE_PIDFD };
    let cloned = clone_vfork(flags, &mut || child_main(&mut exec));
    drop(theirs);
    let (pid, pidfd) = cloned?;
    let (pid, pidfd) = if pid_ns {
        // The outer child has ended, once the process it cloned has `exec`ed or ended.
        reap(pid);
        inner_started(exec.inner, exec.error)?
    } else {
        let pidfd = pidfd.ok_or_else(|| io::Error::other("the kernel gave no pidfd"))?;
        if exec.error != 0 {
            reap(pid);
            return Err(io::Error::from_raw_os_error(exec.error));
        }
        (pid, pidfd)
    };
    Ok(Started {
        pid: pid as u32,
        pidfd,
        pipes: ours,
    })
}

/// Reaps plait's own child `pid`, which has ended (or is being killed); once.
fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: our own child; reaped once.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// The process the outer child cloned into its PID namespace (`inner`, plait's own child
/// by `CLONE_PARENT`), with a pidfd of it; the error the child wrote (`error`) if it did
/// not start.
fn inner_started(inner: libc::pid_t, error: i32) -> io::Result<(libc::pid_t, OwnedFd)> {
    if error != 0 || inner <= 0 {
        if inner > 0 {
            reap(inner);
        }
        let code = if error != 0 { error } else { libc::EINVAL };
        return Err(io::Error::from_raw_os_error(code));
    }
    match pidfd_open(inner) {
        Ok(fd) => Ok((inner, fd)),
        Err(e) => {
            // SAFETY: our own child, not yet reaped (so the id is still its).
            unsafe { libc::kill(inner, libc::SIGKILL) };
            reap(inner);
            Err(e)
        }
    }
}

/// `spec`'s program as the paths to try (each `PATH` entry's, for a bare name), its
/// arguments and its environment, as C strings made before the fork.
fn c_strings(spec: &Spec) -> io::Result<(Vec<CString>, Vec<CString>, Vec<CString>)> {
    let env = spec.environment();
    let program = spec.program.as_bytes();
    let candidates: Vec<CString> = if program.contains(&b'/') {
        vec![c_string(&spec.program)?]
    } else {
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
        path.as_bytes()
            .split(|b| *b == b':')
            .map(|dir| {
                let dir = if dir.is_empty() { &b"."[..] } else { dir };
                let mut full = dir.to_vec();
                full.push(b'/');
                full.extend_from_slice(program);
                CString::new(full).map_err(|_| io::Error::other("a path holds NUL"))
            })
            .collect::<io::Result<_>>()?
    };
    let args: Vec<CString> = std::iter::once(&spec.program)
        .chain(&spec.args)
        .map(|a| c_string(a))
        .collect::<io::Result<_>>()?;
    let vars: Vec<CString> = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).map_err(|_| io::Error::other("a variable holds NUL"))
        })
        .collect::<io::Result<_>>()?;
    Ok((candidates, args, vars))
}

/// A child's standard streams, made before the fork.
struct Streams {
    /// The child's ends, closed in plait once it has started.
    theirs: Vec<OwnedFd>,
    /// plait's ends of the pipes.
    ours: [Option<OwnedFd>; 3],
    /// The descriptors the child takes as 0, 1 and 2.
    stdio: [RawFd; 3],
}

fn streams(spec: [Io; 3]) -> io::Result<Streams> {
    let mut theirs: Vec<OwnedFd> = Vec::new();
    let mut ours: [Option<OwnedFd>; 3] = [None, None, None];
    let mut stdio = [0 as RawFd; 3];
    for (k, io) in spec.into_iter().enumerate() {
        let fd = match io {
            Io::Fd(fd) => fd,
            Io::Null => std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")?
                .into(),
            Io::Piped => {
                let (read, write) = pipe()?;
                let (child, parent) = if k == 0 { (read, write) } else { (write, read) };
                ours[k] = Some(parent);
                child
            }
        };
        stdio[k] = fd.as_raw_fd();
        theirs.push(fd);
    }
    Ok(Streams {
        theirs,
        ours,
        stdio,
    })
}

/// A pidfd of plait's child `pid`, which is not reaped yet (so the id is still its).
fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: a plain system call; the descriptor it returns is ours alone.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just made it, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// What [`spawn_entering`] started, to become a [`Child`] on the runtime.
pub(crate) struct Started {
    pid: u32,
    pidfd: OwnedFd,
    pipes: [Option<OwnedFd>; 3],
}

impl Child {
    /// The child `started`, its pidfd and pipes registered with the runtime. Killed (and
    /// reaped) when that fails.
    pub(crate) fn from_cloned(started: Started) -> io::Result<Child> {
        let Started { pid, pidfd, pipes } = started;
        let [stdin, stdout, stderr] = pipes;
        // SAFETY: the `AsyncFd` owns the descriptor, which stays open and the same while it
        // lives.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
        };
        let inner = match registered {
            Ok(pidfd) => Cloned {
                pid,
                pidfd,
                status: None,
                works: Vec::new(),
            },
            Err(e) => {
                // SAFETY: our own child, not yet reaped.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                    libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
                }
                return Err(e.into_parts().1);
            }
        };
        let receiver = |fd: Option<OwnedFd>| -> io::Result<Option<Pin<Box<dyn AsyncRead + Send>>>> {
            fd.map(|fd| {
                tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
                    .map(|r| Box::pin(r) as Pin<Box<dyn AsyncRead + Send>>)
            })
            .transpose()
        };
        Ok(Child {
            stdin: stdin
                .map(|fd| {
                    tokio::net::unix::pipe::Sender::from_owned_fd(fd)
                        .map(|s| Box::pin(s) as Pin<Box<dyn AsyncWrite + Send>>)
                })
                .transpose()?,
            stdout: receiver(stdout)?,
            stderr: receiver(stderr)?,
            inner: Inner::Cloned(inner),
        })
    }
}

/// Removes the overlay work directories a command's mounts used (`own_work` in the view's
/// module made them), once no mount uses them: overlayfs leaves a directory there its user
/// cannot enter (mode 0), which is opened up through its handle, never by name.
pub(crate) fn remove_works(works: &[std::path::PathBuf]) {
    for work in works {
        let (Some(parent), Some(name)) = (work.parent(), work.file_name()) else {
            continue;
        };
        if let Ok(tree) = plait_core::beneath::Tree::open(parent) {
            let _ = tree.remove_all(name);
        }
    }
}

/// How a process gets a PID namespace of its own here (`sandbox::pids` decides which).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PidNs {
    /// Owned by a user namespace of its own (or the sandbox's): any user.
    User,
    /// Owned by plait's user namespace: root, where user namespaces are refused.
    Direct,
}
