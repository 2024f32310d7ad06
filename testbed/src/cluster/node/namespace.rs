//! A real node's own mount namespace, shared by its containerd (and so its
//! shims, runc and CNI plugins) and its kubelet. It keeps the host as it
//! was:
//! - every mount the node makes (snapshots, container root filesystems,
//!   network namespaces, Pod volumes) lives only there, and the kernel tears
//!   them down with the node's last process — nothing to unmount on the host;
//! - host folders the node's programs write into unasked (shim sockets,
//!   CNI's cache, the kubelet's log links and device-plugin socket) are
//!   covered by folders of the node's;
//! - host sysctls the kubelet would set (`kernel.panic_on_oops`,
//!   `vm.overcommit_memory`, …) and the bridge plugin's IPv4 forwarding read
//!   as already set, from files of the node's.
//!
//! The namespace receives the host's mounts but sends none back (a slave
//! of the host's), so nothing done inside shows outside.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use super::config::{PRIVATE_FOLDERS, SYSCTLS};
use super::layout::Layout;

/// Prepares the node's stand-in folders and sysctl files and has `command`
/// start in a new mount namespace with them bound over the host's.
pub(crate) fn start_new(command: &mut Command, layout: &Layout) -> std::io::Result<()> {
    let mut binds = Vec::new();
    for host in PRIVATE_FOLDERS {
        // A bind needs its target; on a host without it, an empty folder.
        std::fs::create_dir_all(host)?;
        let own = layout.private(host);
        std::fs::create_dir_all(&own)?;
        binds.push((c_path(&own)?, c_path(Path::new(host))?));
    }
    let sysctls = layout.sysctl_dir();
    std::fs::create_dir_all(&sysctls)?;
    for (name, value) in SYSCTLS {
        let host = Path::new("/proc/sys").join(name);
        if !host.exists() {
            continue;
        }
        let own = sysctls.join(name.replace('/', "."));
        std::fs::write(&own, format!("{value}\n"))?;
        binds.push((c_path(&own)?, c_path(&host)?));
    }
    let root = c_path(Path::new("/"))?;
    // SAFETY: the closure runs in the child between fork and exec and only
    // makes system calls on memory prepared before the fork.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let slave = libc::MS_REC | libc::MS_SLAVE;
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                slave,
                std::ptr::null(),
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            for (source, target) in &binds {
                if libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok(())
}

/// Has `command` start in the mount namespace of process `pid` (the node's
/// containerd).
pub(crate) fn join(command: &mut Command, pid: u32) -> std::io::Result<()> {
    let namespace = File::open(format!("/proc/{pid}/ns/mnt"))?;
    // SAFETY: setns(2) in the child on a descriptor the closure owns.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            if libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

fn c_path(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
}
