//! A real node's containerd: its folders and configuration (with the
//! snapshotter this host's filesystem allows), started in the node's own
//! mount namespace, and waited for until it answers on its socket.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::wait::{self, Seen};

use super::config::{self, RuntimePaths};
use super::runtime::NodeRuntime;
use super::{Error, RealNode, alive, namespace, write};

/// How long containerd gets to answer on its socket.
const CONTAINERD_TIMEOUT: Duration = Duration::from_secs(60);

impl RealNode {
    pub(super) async fn start_containerd(&mut self, runtime: &NodeRuntime) -> Result<(), Error> {
        let layout = &self.layout;
        for dir in [
            layout.root.clone(),
            layout.cni_conf_dir(),
            layout.pki(),
            layout.kubelet_root(),
            layout.pod_logs.clone(),
        ] {
            std::fs::create_dir_all(&dir).map_err(|e| Error::Io(dir.display().to_string(), e))?;
        }
        let snapshotter = if overlay_works(&layout.root) {
            "overlayfs"
        } else {
            eprintln!(
                "real node of {}: overlay mounts fail here; containerd unpacks with `native`",
                self.cluster
            );
            "native"
        };
        self.info.snapshotter = snapshotter.into();
        let paths = RuntimePaths {
            runc: runtime.runc(),
            cni_bin: runtime.cni_dir(),
        };
        write(
            &layout.containerd_config(),
            &config::containerd_toml(layout, &paths, snapshotter),
        )?;
        write(
            &layout.cni_conf_dir().join("10-jobrelay.conflist"),
            &config::cni_conflist(layout),
        )?;

        let mut command = Command::new(runtime.binary("containerd"));
        command.arg(format!("--config={}", layout.containerd_config().display()));
        // containerd finds its shim on PATH.
        let path = std::env::var("PATH").unwrap_or_default();
        command.env("PATH", format!("{}:{path}", runtime.bin_dir().display()));
        namespace::start_new(&mut command, layout)
            .map_err(|e| Error::Io("preparing the node's mount namespace".into(), e))?;
        self.containerd = Some(self.spawn("containerd", command)?);

        let ctr = runtime.binary("ctr");
        let socket = layout.containerd_socket();
        let pid = self.pid("containerd");
        let log = self.log_path("containerd");
        wait::try_until(
            format!("{} containerd on {}", self.cluster, socket.display()),
            CONTAINERD_TIMEOUT,
            || {
                let answered = Command::new(&ctr)
                    .arg(format!("--address={}", socket.display()))
                    .arg("version")
                    .output();
                let seen = match answered {
                    Ok(out) if out.status.success() => Seen::Ready(()),
                    _ if !alive(pid) => Seen::Ready(()),
                    Ok(out) => Seen::Waiting(String::from_utf8_lossy(&out.stderr).trim().into()),
                    Err(e) => Seen::Waiting(e.to_string()),
                };
                async move { seen }
            },
        )
        .await?;
        if !alive(pid) {
            return Err(self.exited_error("containerd", &log));
        }
        Ok(())
    }
}

/// Whether an overlay mount works in `dir` (it does not on every
/// filesystem, e.g. overlay on overlay); tried in the host's namespace and
/// undone at once.
#[allow(unsafe_code)]
fn overlay_works(dir: &Path) -> bool {
    let check = dir.join("overlay-check");
    let [lower, upper, work, merged] = ["lower", "upper", "work", "merged"].map(|d| check.join(d));
    let made = [&lower, &upper, &work, &merged]
        .iter()
        .all(|d| std::fs::create_dir_all(d).is_ok());
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    let (Ok(target), Ok(options), Ok(kind)) = (
        std::ffi::CString::new(merged.as_os_str().as_encoded_bytes()),
        std::ffi::CString::new(options),
        std::ffi::CString::new("overlay"),
    ) else {
        return false;
    };
    // SAFETY: mount(2)/umount2(2) with NUL-terminated strings that outlive
    // the calls.
    let mounted = made
        && unsafe {
            libc::mount(
                kind.as_ptr(),
                target.as_ptr(),
                kind.as_ptr(),
                0,
                options.as_ptr().cast(),
            ) == 0
        };
    if mounted {
        unsafe {
            libc::umount2(target.as_ptr(), libc::MNT_DETACH);
        }
    }
    let _ = std::fs::remove_dir_all(&check);
    mounted
}
