//! A command's processes live and die with it. Every process a confined sandbox starts is
//! the first process of a PID namespace of its own, with its own `/proc`: when it ends, the
//! kernel kills whatever it left in there (`cmd &`, a `setsid` child, a double fork, one
//! that cleared its environment and left the worktree), and from inside no other process
//! of the machine is there to see (another's `cmdline`, plait's among them). Unprivileged,
//! a PID namespace needs a user namespace to own it; as root it needs none (`Direct`),
//! where user namespaces are refused.
//!
//! Whether this system allows it is asked once per process, by doing it (`support`).

use std::sync::OnceLock;

use super::settings::{NetWall, SandboxSettings};
pub(crate) use crate::child::PidNs;
use crate::child::{self, Spec, Stage};

/// Whether processes can start in a PID namespace of their own here, and how; why not.
pub(crate) fn support() -> &'static Result<PidNs, String> {
    static SUPPORT: OnceLock<Result<PidNs, String>> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let with_user = probe(PidNs::User);
        match with_user {
            Ok(()) => Ok(PidNs::User),
            // SAFETY: geteuid has no preconditions.
            Err(why) if unsafe { libc::geteuid() } != 0 => Err(why),
            Err(why) => probe(PidNs::Direct)
                .map(|()| PidNs::Direct)
                .map_err(|direct| format!("{why}; as root alone: {direct}")),
        }
    })
}

/// How a command's leftover processes are stopped on this system, in a phrase for
/// `plait status` and `plait doctor`.
pub fn lifetime() -> String {
    match support() {
        Ok(PidNs::User) => "killed with each command (a PID namespace of its own)".to_string(),
        Ok(PidNs::Direct) => {
            "killed with each command (a PID namespace of its own, as root)".to_string()
        }
        Err(why) => format!(
            "only those in the command's process group are killed when it ends \
             (no PID namespace: {why})"
        ),
    }
}

/// Starts `true` as the first process of a PID namespace made `how`, with its own `/proc`.
fn probe(how: PidNs) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            let entry = super::view::Entry {
                pid: Some(how),
                ..Default::default()
            };
            let (mut entering, _) =
                super::view::entering(entry, None, None).map_err(|e| e.to_string())?;
            let spec = Spec::new("true", "/");
            // SAFETY: `run` makes only async-signal-safe calls on what it holds.
            let started =
                child::spawn_entering(spec, None, true, true, &mut |stage: Stage| unsafe {
                    entering.run(stage)
                })
                .map_err(|e| format!("a PID namespace with its own /proc: {e}"))?;
            let status = child::Child::from_cloned(started)
                .map_err(|e| e.to_string())?
                .wait()
                .await
                .map_err(|e| e.to_string())?;
            if status.success() {
                Ok(())
            } else {
                Err(format!(
                    "the first process of a PID namespace ended with {status}"
                ))
            }
        })
    })
    .join()
    .unwrap_or_else(|_| Err("the probe panicked".to_string()))
}

impl SandboxSettings {
    /// The loopback ports a description names: the plan's, not a lease's own.
    fn described_ports(&self) -> Vec<u16> {
        let lease = self.gateway_port;
        self.ports
            .iter()
            .copied()
            .filter(|p| Some(*p) != lease)
            .collect()
    }

    /// How processes under these settings are confined, in a phrase: writes, network,
    /// how what a command leaves running is stopped, its limits, and what the plan's own
    /// programs brought into reach.
    pub fn describe(&self) -> String {
        let confinement = self.confinement();
        match self.net_wall() {
            NetWall::Open if !confinement.is_confined() => confinement.describe(),
            wall => {
                let tools = match self.tools.as_slice() {
                    [] => String::new(),
                    some => format!(
                        ", readable for the plan's programs: {}",
                        some.iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                format!(
                    "{}, {}, leftovers: {}, {}{tools}",
                    confinement.describe(),
                    wall.describe(self.network, &self.described_ports()),
                    lifetime(),
                    self.limits.describe(support().is_ok())
                )
            }
        }
    }
}
