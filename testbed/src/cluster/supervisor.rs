//! A cluster supervisor: a small process that owns the control-plane
//! processes of one [`ClusterSet`], so that their lifetime is tied to whoever
//! started it, whatever thread or runtime that was.
//!
//! The supervisor prints `READY <clusters.json>` once every cluster works,
//! then holds the clusters until its standard input closes (the parent exited,
//! cleanly or not) or it receives SIGTERM/SIGINT; then it stops every process
//! and removes the state folder. Meanwhile a line `restart <component>` on
//! its standard input kills that component and starts it again; it answers
//! `RESTARTED <component>` or `ERROR <message>`. Its own children die with it (parent-death
//! signal), even if it is killed with SIGKILL.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{SignalKind, signal};

use crate::cluster::ClusterSet;
use crate::cluster::running::{Running, Topology};
use crate::go::controlplane;

/// What a supervisor is asked to run.
#[derive(Debug, Clone, clap::Args)]
pub struct SuperviseArgs {
    /// Folder for certificates, kubeconfigs, etcd data and logs.
    #[arg(long)]
    pub state_dir: PathBuf,
    /// Number of worker clusters besides the manager.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// A cluster (e.g. `worker-1`) that gets a real node (kubelet and
    /// containerd) beside kwok's fake one; repeat for more.
    #[arg(long = "real-node")]
    pub real_nodes: Vec<String>,
    /// Hold the clusters until SIGTERM/SIGINT, ignoring standard input.
    #[arg(long)]
    pub until_signal: bool,
    /// Keep the state folder (logs) after stopping.
    #[arg(long, env = "JOBRELAY_KEEP_STATE", value_parser = clap::builder::BoolishValueParser::new())]
    pub keep_state: bool,
}

const PID_FILE: &str = "supervisor.pid";
const LOG_FILE: &str = "supervisor.log";

/// Runs a supervisor in this process. Call from `main` with a current-thread
/// runtime: the control-plane processes die with the thread that spawned them.
pub async fn supervise(args: SuperviseArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.state_dir)?;
    std::fs::write(
        args.state_dir.join(PID_FILE),
        std::process::id().to_string(),
    )?;
    let binaries = controlplane::cached()?;
    let topology = Topology {
        workers: args.workers,
        real_nodes: args.real_nodes.clone(),
    };
    let mut running = Running::start_with(&binaries, &args.state_dir, &topology).await?;
    println!(
        "READY {}",
        running.set().state_dir.join("clusters.json").display()
    );
    std::io::stdout().flush()?;

    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut commands = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut checks = tokio::time::interval(std::time::Duration::from_secs(2));
    let mut reported = 0;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            line = commands.next_line(), if !args.until_signal => {
                let Ok(Some(line)) = line else { break };
                if let Some(component) = line.trim().strip_prefix("restart ") {
                    match running.restart(component) {
                        Ok(()) => println!("RESTARTED {component}"),
                        Err(error) => println!("ERROR {error}"),
                    }
                    std::io::stdout().flush()?;
                }
            }
            _ = checks.tick() => {
                let exited = running.exited();
                for (name, status) in exited.iter().skip(reported) {
                    eprintln!("supervisor: {name} exited unexpectedly ({status}); see logs/{name}.log");
                }
                reported = exited.len();
            }
        }
    }
    let state_dir = running.set().state_dir.clone();
    running.stop();
    if !args.keep_state {
        let _ = std::fs::remove_dir_all(&state_dir);
    }
    Ok(())
}

/// A supervisor running as a child process, seen from its parent.
pub struct Supervisor {
    child: Child,
    set: ClusterSet,
    /// Its standard output after READY, for answers to commands.
    answers: std::sync::Mutex<Option<BufReader<std::process::ChildStdout>>>,
}

impl Supervisor {
    /// Starts `command` (a program that calls [`supervise`]) with the state
    /// folder and worker count appended, and waits for it to report ready.
    /// With `detach`, the supervisor gets its own process group and no
    /// standard input, and lives on until signalled ([`stop_detached`]).
    pub fn start(
        mut command: Command,
        state_dir: &Path,
        workers: usize,
        detach: bool,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(state_dir)?;
        let log = std::fs::File::create(state_dir.join(LOG_FILE))?;
        command
            .arg(format!("--state-dir={}", state_dir.display()))
            .arg(format!("--workers={workers}"))
            .stdout(Stdio::piped())
            .stderr(log);
        if detach {
            use std::os::unix::process::CommandExt;
            command
                .arg("--until-signal")
                .stdin(Stdio::null())
                .process_group(0);
        } else {
            command.stdin(Stdio::piped());
        }
        let described = format!("{command:?}");
        // Attached, it is told to stop (SIGTERM) when this process ends, and
        // stops its clusters — real nodes' shims and bridges included;
        // detached, it must outlive this process.
        let spawned = if detach {
            command.spawn()
        } else {
            crate::host::processes::spawn_ending_with(command, libc::SIGTERM)
        };
        let mut child =
            spawned.map_err(|e| anyhow::anyhow!("starting cluster supervisor {described}: {e}"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("supervisor has no stdout"))?;
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let Some(path) = line.trim().strip_prefix("READY ") else {
            let _ = child.wait();
            let log = std::fs::read_to_string(state_dir.join(LOG_FILE)).unwrap_or_default();
            anyhow::bail!(
                "the test clusters did not start (state and component logs kept in {}):\n{}",
                state_dir.display(),
                log.trim()
            );
        };
        let set = ClusterSet::load(Path::new(path).parent().unwrap_or(state_dir))?;
        Ok(Supervisor {
            child,
            set,
            answers: std::sync::Mutex::new(Some(stdout)),
        })
    }

    /// Kills one control-plane component (e.g. `worker-1-kube-apiserver`)
    /// and starts it again.
    pub fn restart(&self, component: &str) -> anyhow::Result<()> {
        let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        let (Some(stdin), Some(stdout)) = (self.child.stdin.as_ref(), answers.as_mut()) else {
            anyhow::bail!("this supervisor takes no commands");
        };
        let mut stdin = stdin;
        writeln!(stdin, "restart {component}")?;
        stdin.flush()?;
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        match line.trim().strip_prefix("RESTARTED ") {
            Some(_) => Ok(()),
            None => anyhow::bail!("restarting {component}: {}", line.trim()),
        }
    }

    pub fn set(&self) -> &ClusterSet {
        &self.set
    }

    /// Stops the clusters and waits until they are gone.
    pub fn stop(mut self) -> anyhow::Result<()> {
        drop(self.child.stdin.take());
        crate::host::processes::signal(&self.child, libc::SIGTERM);
        self.child.wait()?;
        Ok(())
    }
}

/// Stops a detached supervisor by its state folder and waits until it is gone.
pub async fn stop_detached(state_dir: &Path) -> anyhow::Result<bool> {
    let Ok(pid) = std::fs::read_to_string(state_dir.join(PID_FILE)) else {
        return Ok(false);
    };
    let pid: libc::pid_t = pid.trim().parse()?;
    let alive = |signal| crate::host::processes::signal_pid(pid, signal);
    if alive(libc::SIGTERM) {
        crate::wait::try_until(
            format!("cluster supervisor {pid} to stop"),
            std::time::Duration::from_secs(60),
            || async {
                if alive(0) {
                    crate::wait::Seen::Waiting("still running".into())
                } else {
                    crate::wait::Seen::Ready(())
                }
            },
        )
        .await?;
    }
    let _ = std::fs::remove_dir_all(state_dir);
    Ok(true)
}
