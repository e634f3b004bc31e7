//! The Landlock ruleset of a sandbox: built from the places its processes write and read
//! (and the TCP ports they may reach), and raised on the thread or child that starts them.

use std::path::PathBuf;

#[cfg(target_os = "linux")]
use super::reads;

/// Why a sandbox's walls could not be prepared; the process is then not started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The private temporary directory could not be made.
    #[error("cannot make a private temporary directory in {dir}: {source}")]
    TempDir {
        /// Where it was to be made.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The landlock crate refused the rules.
    #[cfg(target_os = "linux")]
    #[error("cannot build the Landlock rules: {0}")]
    Rules(#[from] landlock::RulesetError),
    /// The kernel gave no ruleset descriptor.
    #[error("the kernel made no Landlock ruleset")]
    NoRuleset,
}

#[cfg(target_os = "linux")]
pub(super) fn restrict(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: plain system calls on a valid ruleset fd; no memory is passed.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(super) fn restrict(_fd: std::os::fd::RawFd) -> std::io::Result<()> {
    Err(std::io::Error::other("Landlock is Linux's"))
}

/// The kernel ruleset that lets a process write beneath `paths` only (files among them:
/// only those files), and signal no process outside its own sandbox (ABI 6 and newer).
/// With `tcp` (ABI 4 and newer), TCP connects only to those ports and binds none, and from
/// ABI 6 abstract UNIX sockets outside the sandbox are out of reach.
#[cfg(target_os = "linux")]
pub(super) fn ruleset(
    abi: i32,
    paths: &[PathBuf],
    reads: Option<&[PathBuf]>,
    tcp: Option<&[u16]>,
) -> Result<std::os::fd::OwnedFd, SandboxError> {
    use landlock::{
        path_beneath_rules, Access as _, AccessFs, AccessNet, CompatLevel, Compatible, NetPort,
        Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
    };
    let version = ABI::from(abi);
    let read = AccessFs::from_read(version);
    // Where reads are walled, the own places are read and written; elsewhere only read.
    let write = match reads {
        Some(_) => AccessFs::from_write(version) | read,
        None => AccessFs::from_write(version),
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(write)?;
    let tcp = tcp.filter(|_| abi >= 4);
    if tcp.is_some() {
        ruleset = ruleset.handle_access(AccessNet::from_all(version))?;
    }
    if abi >= 6 {
        ruleset = ruleset.scope(Scope::Signal)?;
        if tcp.is_some() {
            ruleset = ruleset.scope(Scope::AbstractUnixSocket)?;
        }
    }
    let mut created = ruleset
        .create()?
        .add_rules(path_beneath_rules(paths, write))?;
    if let Some(extra) = reads {
        let file = landlock::AccessFs::from_file(version) & read;
        for (fd, is_file) in reads::machine_opened() {
            let access = if *is_file { file } else { read };
            created = created.add_rule(landlock::PathBeneath::new(fd, access))?;
        }
        created = created.add_rules(path_beneath_rules(extra, read))?;
    }
    for &port in tcp.unwrap_or_default() {
        created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
    }
    let fd: Option<std::os::fd::OwnedFd> = created.into();
    fd.ok_or(SandboxError::NoRuleset)
}

/// The write rights a directory rule grants at `abi`, as the kernel's bits.
#[cfg(target_os = "linux")]
pub(super) fn write_access(abi: i32) -> u64 {
    landlock::AccessFs::from_write(landlock::ABI::from(abi)).bits()
}

#[cfg(not(target_os = "linux"))]
pub(super) fn write_access(_abi: i32) -> u64 {
    0
}

/// The read rights (read, list, execute) at `abi`, as the kernel's bits.
#[cfg(target_os = "linux")]
pub(super) fn read_access(abi: i32) -> u64 {
    landlock::AccessFs::from_read(landlock::ABI::from(abi)).bits()
}

#[cfg(not(target_os = "linux"))]
pub(super) fn read_access(_abi: i32) -> u64 {
    0
}

#[cfg(not(target_os = "linux"))]
pub(super) fn ruleset(
    _abi: i32,
    _paths: &[PathBuf],
    _reads: Option<&[PathBuf]>,
    _tcp: Option<&[u16]>,
) -> Result<std::os::fd::OwnedFd, SandboxError> {
    Err(SandboxError::NoRuleset)
}
