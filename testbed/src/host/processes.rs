//! Child processes that never outlive the test process.
//!
//! Linux's parent-death signal fires when the *thread* that spawned a child
//! exits, and every test runs on a thread of its own. So children are spawned
//! from one keeper thread that lives as long as the process: whenever the
//! process ends — cleanly, by panic or by SIGKILL — its children get SIGKILL.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::sync::mpsc;

type Request = (Command, libc::c_int, mpsc::Sender<io::Result<Child>>);

static KEEPER: OnceLock<std::sync::Mutex<mpsc::Sender<Request>>> = OnceLock::new();

/// Sends `command`'s output, both streams, to the end of the file at `log`
/// (created if missing), and gives it no input.
pub fn log_to(command: &mut Command, log: &std::path::Path) -> io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    command
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    Ok(())
}

/// Spawns `command` so that it dies with this process.
pub fn spawn(command: Command) -> io::Result<Child> {
    spawn_ending_with(command, libc::SIGKILL)
}

/// Spawns `command` so that it gets `signal` when this process ends: with
/// SIGTERM, a child that stops what it started itself (the cluster
/// supervisor) gets to do so.
pub fn spawn_ending_with(command: Command, signal: libc::c_int) -> io::Result<Child> {
    let keeper = KEEPER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("process-keeper".into())
            .spawn(move || {
                for (mut command, signal, reply) in incoming {
                    signal_on_parent_death(&mut command, signal);
                    let _ = reply.send(command.spawn());
                }
                // The channel's sender lives in a static, so this thread never
                // returns before the process exits.
            })
            .expect("start the process keeper thread");
        std::sync::Mutex::new(requests)
    });
    let (reply, spawned) = mpsc::channel();
    keeper
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((command, signal, reply))
        .map_err(|_| io::Error::other("process keeper is gone"))?;
    spawned
        .recv()
        .map_err(|_| io::Error::other("process keeper is gone"))?
}

/// Has the kernel kill the child when the spawning thread exits, and closes
/// the race where the parent died before that was set up.
pub fn die_with_parent(command: &mut Command) {
    signal_on_parent_death(command, libc::SIGKILL);
}

/// Has the kernel send `signal` to the child when the spawning thread
/// exits; a child whose parent is already gone exits at once.
#[allow(unsafe_code)]
pub fn signal_on_parent_death(command: &mut Command, signal: libc::c_int) {
    // SAFETY: getpid, prctl, getppid and _exit are async-signal-safe; the
    // closure allocates nothing.
    let parent = unsafe { libc::getpid() };
    unsafe {
        command.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, signal);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Sends `signal` to a child that has not been reaped yet.
#[allow(unsafe_code)]
pub fn signal(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) on a pid we spawned and have not reaped.
    unsafe {
        libc::kill(child.id() as libc::pid_t, signal);
    }
}

/// Sends `signal` to process `pid` (0 only asks whether it exists); says
/// whether the process was there to receive it.
#[allow(unsafe_code)]
pub fn signal_pid(pid: libc::pid_t, signal: libc::c_int) -> bool {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, signal) == 0 }
}
