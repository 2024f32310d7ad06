//! A real node as the rest of the test bed sees it: how to reach a running
//! one (as written to `clusters.json`) and how starting one fails. What
//! runs it lives in `node`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{certs, wait};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error(transparent)]
    Runtime(#[from] crate::go::controlplane::Error),
    #[error(transparent)]
    Certs(#[from] certs::Error),
    #[error(transparent)]
    Wait(#[from] wait::Timeout),
    #[error("cluster {cluster}: {source}")]
    Api {
        cluster: String,
        #[source]
        source: kube::Error,
    },
    #[error("connecting to cluster {cluster}: {message}")]
    Client { cluster: String, message: String },
    #[error("{component} exited ({status}); the end of {log}:\n{tail}")]
    Exited {
        component: String,
        status: String,
        log: String,
        tail: String,
    },
    #[error("`{command}` failed ({status}): {output}")]
    Command {
        command: String,
        status: String,
        output: String,
    },
}

/// How to reach a running real node, as written to `clusters.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RealNodeInfo {
    /// The Node's name.
    pub name: String,
    /// Its host-wide slot (bridge `jrnode<slot>`, subnet `10.244.<slot>.0/24`).
    pub slot: usize,
    /// Everything of the node but its logs.
    pub root: PathBuf,
    /// containerd's socket, for `ctr`.
    pub containerd_address: PathBuf,
    /// The snapshotter images are unpacked with (`overlayfs`, else `native`).
    pub snapshotter: String,
    /// Where the kubelet writes Pod logs.
    pub pod_logs: PathBuf,
}
