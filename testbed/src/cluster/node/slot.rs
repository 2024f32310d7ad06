//! A real node's slot on this host. Bridges, subnets, cgroups and sockets
//! are host-wide, and test processes (or `cargo xtask cluster up`) may run
//! side by side, so each node holds one of a few numbered slots with an
//! exclusive lock on `/run/jobrelay-nodes/slot-<n>.lock` for as long as its
//! process lives. The kernel drops the lock when that process dies however it
//! dies, so a slot that can be locked is free — and whatever a dead owner
//! left in it (a shim, a container, a bridge) is swept before it is reused.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Where the slots' locks and the nodes' roots live.
pub(crate) const SLOTS_DIR: &str = "/run/jobrelay-nodes";
/// How many real nodes can run on one host at once.
pub(crate) const SLOTS: usize = 32;

/// A held slot; dropping it (or the process ending) frees it.
#[derive(Debug)]
pub(crate) struct Slot {
    pub index: usize,
    // Held for the lock; closing it releases the slot.
    _lock: File,
}

impl Slot {
    /// Takes the lowest free slot and records who holds it (`holder`, for
    /// people looking at the lock file).
    pub fn acquire(holder: &str) -> std::io::Result<Slot> {
        let dir = Path::new(SLOTS_DIR);
        std::fs::create_dir_all(dir)?;
        for index in 0..SLOTS {
            let mut lock = File::options()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(lock_path(dir, index))?;
            if try_lock(&lock)? {
                lock.set_len(0)?;
                writeln!(lock, "{holder} (pid {})", std::process::id())?;
                return Ok(Slot { index, _lock: lock });
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("all {SLOTS} real-node slots in {SLOTS_DIR} are held by running processes"),
        ))
    }
}

/// Whether a slot other than `mine` is held (by this process or another).
pub(crate) fn others_held(mine: usize) -> bool {
    (0..SLOTS).filter(|&i| i != mine).any(is_held)
}

/// The slots held now (by this process or another).
pub(crate) fn held() -> Vec<usize> {
    (0..SLOTS).filter(|&i| is_held(i)).collect()
}

fn is_held(index: usize) -> bool {
    let Ok(lock) = File::open(lock_path(Path::new(SLOTS_DIR), index)) else {
        return false;
    };
    // Locked by this probe means nobody else held it; the lock goes with
    // `lock` when it is dropped here.
    !matches!(try_lock(&lock), Ok(true))
}

fn lock_path(dir: &Path, index: usize) -> PathBuf {
    dir.join(format!("slot-{index}.lock"))
}

/// Takes an exclusive lock on `file` without waiting; false if another
/// process holds it.
#[allow(unsafe_code)]
fn try_lock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock(2) on a descriptor this function borrows.
    let result = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if result == 0 {
        return Ok(true);
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(error),
    }
}
