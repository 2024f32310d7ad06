//! Hostile peers of the Relay, for the security scenarios: many
//! connections at once, each presenting a certificate no CA vouches for and
//! then saying Hello as slowly as it can; refused, each dials again. What
//! they achieved is counted, and the memory of the process they flood is
//! read from `/proc`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use jobrelay_process::Pem;
use jobrelay_proto::v1::relay_client::RelayClient;
use jobrelay_proto::v1::{AgentMessage, Hello, agent_message};
use tokio::task::JoinHandle;
use tonic::transport::Endpoint;

use jobrelay_testbed::certs::Issued;

/// How long a flooding peer takes to say Hello: far past any deadline.
const SLOW_HELLO: Duration = Duration::from_secs(120);
/// How long a refused peer waits before it dials again.
const REDIAL: Duration = Duration::from_secs(1);
/// The most dials one peer makes.
const MAX_DIALS: u32 = 100_000;

/// What the flooding peers achieved so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FloodCounts {
    /// Connections opened (TCP and TLS attempted).
    pub dials: u64,
    /// Dials that ended without a session: refused at the handshake, closed
    /// by a limit, cut at the Hello deadline.
    pub refused: u64,
    /// Sessions the manager answered — a flood peer should get none.
    pub answered: u64,
}

#[derive(Default)]
struct Counters {
    dials: AtomicU64,
    refused: AtomicU64,
    answered: AtomicU64,
}

/// Peers flooding a Relay until dropped.
pub struct Flood {
    peers: Vec<JoinHandle<()>>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
}

impl Flood {
    /// Starts `connections` peers at once against `manager_url`, each with
    /// `identity`, trusting the server certificate's CA `ca_pem`; each
    /// claims to be `cluster`.
    pub fn start(
        manager_url: &str,
        ca_pem: &[u8],
        identity: &Issued,
        cluster: &str,
        connections: usize,
    ) -> anyhow::Result<Flood> {
        let tls = jobrelay_process::client::client_config(&Pem {
            cert: identity.cert.clone().into_bytes(),
            key: identity.key.clone().into_bytes(),
            ca: ca_pem.to_vec(),
        });
        let endpoint = Endpoint::from_shared(manager_url.to_string())?
            .connect_timeout(Duration::from_secs(10))
            .tls_config(tls)?;
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let peers = (0..connections)
            .map(|_| {
                tokio::spawn(peer(
                    endpoint.clone(),
                    cluster.to_string(),
                    Arc::clone(&counters),
                    Arc::clone(&stop),
                ))
            })
            .collect();
        Ok(Flood {
            peers,
            counters,
            stop,
        })
    }

    pub fn counts(&self) -> FloodCounts {
        FloodCounts {
            dials: self.counters.dials.load(Ordering::Relaxed),
            refused: self.counters.refused.load(Ordering::Relaxed),
            answered: self.counters.answered.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for peer in &self.peers {
            peer.abort();
        }
    }
}

/// One flooding peer: dial, handshake, open a session and say Hello only
/// after [`SLOW_HELLO`]; dial again when refused.
async fn peer(endpoint: Endpoint, cluster: String, counters: Arc<Counters>, stop: Arc<AtomicBool>) {
    for _ in 0..MAX_DIALS {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        counters.dials.fetch_add(1, Ordering::Relaxed);
        let answered = match endpoint.connect().await {
            Ok(channel) => {
                let hello = AgentMessage {
                    kind: Some(agent_message::Kind::Hello(Hello {
                        cluster: cluster.clone(),
                        agent_version: env!("CARGO_PKG_VERSION").into(),
                        inventory: Vec::new(),
                        ..Hello::default()
                    })),
                };
                let slow = futures::stream::once(async move {
                    tokio::time::sleep(SLOW_HELLO).await;
                    hello
                });
                RelayClient::new(channel).connect(slow).await.is_ok()
            }
            Err(_) => false,
        };
        let counter = match answered {
            true => &counters.answered,
            false => &counters.refused,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(REDIAL).await;
    }
}

/// The resident memory of process `pid`, in bytes (`VmRSS`).
pub fn rss_bytes(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    vm_rss(&status).ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/{pid}/status"))
}

/// `VmRSS` of a `/proc/<pid>/status` text, in bytes.
fn vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_is_read_from_the_status_text() {
        let status = "Name:\tjobrelay-manager\nVmHWM:\t  50000 kB\nVmRSS:\t   41236 kB\n";
        assert_eq!(vm_rss(status), Some(41236 * 1024));
        assert_eq!(vm_rss("Name:\tx\n"), None);
    }
}
