//! Starting, stopping and signalling a relay's processes: its manager
//! replicas and its agents.

use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use crate::host::processes;
use crate::wait::{self, Seen};

use super::{Relay, lock};

impl Relay {
    /// Starts the manager (again), appending to its log.
    pub fn start_manager(&self) -> anyhow::Result<()> {
        self.start_replica(0)
    }

    /// Kills the manager with SIGKILL, as a crash or an OOM kill would.
    pub fn kill_manager(&self) {
        self.kill_replica(0);
    }

    /// Manager replicas: those started with [`Options::manager_replicas`],
    /// then the ones of [`Options::manager_surge`], running or not.
    ///
    /// [`Options::manager_replicas`]: super::Options::manager_replicas
    /// [`Options::manager_surge`]: super::Options::manager_surge
    pub fn replicas(&self) -> usize {
        self.replicas.len()
    }

    /// Starts manager replica `index` (again), appending to its log.
    pub fn start_replica(&self, index: usize) -> anyhow::Result<()> {
        let replica = &self.replicas[index];
        let child = start_logged(replica.launch.command(), &replica.log, &self.log_filter)?;
        *lock(&replica.child) = Some(child);
        Ok(())
    }

    /// Kills manager replica `index` with SIGKILL.
    pub fn kill_replica(&self, index: usize) {
        if let Some(mut child) = lock(&self.replicas[index].child).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (e.g. `libc::SIGSTOP`, `libc::SIGCONT`) to manager
    /// replica `index`.
    pub fn signal_replica(&self, index: usize, signal: i32) -> anyhow::Result<()> {
        let child = lock(&self.replicas[index].child);
        let child = child
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("manager replica {index} is not running"))?;
        processes::signal(child, signal);
        Ok(())
    }

    /// The process id of manager replica `index`, while it runs.
    pub fn replica_pid(&self, index: usize) -> Option<u32> {
        lock(&self.replicas[index].child).as_ref().map(Child::id)
    }

    /// The process id of the agent of `worker`, while it runs.
    pub fn agent_pid(&self, worker: &str) -> Option<u32> {
        lock(&self.agents).get(worker).map(Child::id)
    }

    /// Whether manager replica `index` has ended (and how), reaping it.
    pub fn replica_exited(&self, index: usize) -> Option<ExitStatus> {
        let mut child = lock(&self.replicas[index].child);
        let status = child.as_mut()?.try_wait().ok()??;
        *child = None;
        Some(status)
    }

    /// Waits up to `within` until manager replica `index` has ended; how.
    pub async fn wait_replica_exited(
        &self,
        index: usize,
        within: Duration,
    ) -> anyhow::Result<ExitStatus> {
        let exited = wait::try_until(format!("manager-{index} to end"), within, || {
            let exited = self.replica_exited(index);
            async move {
                match exited {
                    Some(status) => Seen::Ready(status),
                    None => Seen::Waiting("still running".into()),
                }
            }
        })
        .await?;
        Ok(exited)
    }

    /// Starts the agent of `worker` (again), appending to its log.
    pub fn start_agent(&self, worker: &str) -> anyhow::Result<()> {
        self.start_agent_with(worker, &[])
    }

    /// Starts the agent of `worker` (again) with `more` flags after the
    /// usual ones (a `--manager-url` adds an endpoint), appending to its log.
    pub fn start_agent_with(&self, worker: &str, more: &[&str]) -> anyhow::Result<()> {
        let mut command = self.agent_command(worker)?;
        command.args(more);
        let child = start_logged(
            command,
            &self.logs.join(format!("jobrelay-agent-{worker}.log")),
            &self.log_filter,
        )?;
        lock(&self.agents).insert(worker.to_string(), child);
        Ok(())
    }

    /// Starts the agent of `worker` again (after a kill) and waits for its
    /// new session with the manager.
    pub async fn restart_agent(&self, worker: &str) -> anyhow::Result<()> {
        let sessions = self.sessions_opened(worker);
        self.start_agent(worker)?;
        self.wait_sessions(worker, sessions + 1).await
    }

    /// Kills the agent of `worker` with SIGKILL.
    pub fn kill_agent(&self, worker: &str) {
        if let Some(mut child) = lock(&self.agents).remove(worker) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(crate) fn start_logged(
    mut command: Command,
    log: &Path,
    filter: &str,
) -> anyhow::Result<Child> {
    processes::log_to(&mut command, log)?;
    command.env("RUST_LOG", filter);
    Ok(processes::spawn(command)?)
}
