//! The bench's view of the two manager replicas: the memory each holds
//! (leader and follower told apart by the Lease), and how long a takeover
//! takes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::go::controlplane::seconds;
use jobrelay_testbed::kit;
use jobrelay_testbed::relay::Relay;
use jobrelay_testbed::relay::election::lease_holder;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};

use crate::bench::shared::jobs::{delete_all, relayed};
use crate::bench::shared::machine::peak_rss_kib;
use crate::bench::shared::measure::{self, Point, Timestamps, wait_all};
use crate::log;

/// Peak resident memory so far of the manager replicas (`manager`: the
/// leader) and the agents, in MiB.
pub(crate) async fn peak_rss(
    set: &ClusterSet,
    relay: &Relay,
) -> anyhow::Result<HashMap<String, u64>> {
    let leader = lease_holder(&set.manager().client().await?).await;
    let mut rss = HashMap::new();
    for replica in 0..relay.replicas() {
        let name = match Some(replica) == leader {
            true => "manager".to_string(),
            false => format!("manager follower {replica}"),
        };
        if let Some(pid) = relay.replica_pid(replica) {
            rss.insert(name, peak_rss_kib(pid) / 1024);
        }
    }
    for worker in set.workers() {
        if let Some(pid) = relay.agent_pid(&worker.name) {
            rss.insert(format!("agent {}", worker.name), peak_rss_kib(pid) / 1024);
        }
    }
    Ok(rss)
}

/// The leading replica killed; from the kill until the other has
/// dispatched a Job created just after it. The killed replica comes back as
/// a follower.
pub(crate) async fn takeover(
    set: &ClusterSet,
    relay: &Relay,
    n: usize,
) -> anyhow::Result<Duration> {
    let ns = format!("bench-takeover-{n}");
    let (watches, mirrored) = mirrors_seen(set, &ns).await?;
    let manager = set.manager().client().await?;
    let leader = lease_holder(&manager)
        .await
        .ok_or_else(|| anyhow::anyhow!("no manager replica holds the Lease"))?;
    let jobs: Api<Job> = Api::namespaced(manager, &ns);
    let names = vec!["after-the-kill".to_string()];
    relay.kill_replica(leader);
    let killed = Instant::now();
    jobs.create(&PostParams::default(), &relayed(&ns, &names[0], "1s"))
        .await?;
    let dispatched = wait_all("a Job dispatched by the new leader", &names, &mirrored).await?;
    watches.iter().for_each(|w| w.stop());
    let took = dispatched[&names[0]].duration_since(killed);
    log(&format!(
        "manager-{leader} killed; its successor dispatched in {}",
        seconds(took)
    ));
    relay.start_replica(leader)?;
    delete_all(&jobs, &names).await?;
    Ok(took)
}

/// Namespace `ns` on every cluster, and the times its mirror Jobs are first
/// seen on the workers (by watches, listed before this returns).
pub(crate) async fn mirrors_seen(
    set: &ClusterSet,
    ns: &str,
) -> anyhow::Result<(Vec<measure::Recording>, Timestamps)> {
    for cluster in &set.clusters {
        kit::create_namespace(&cluster.client().await?, ns).await;
    }
    let mirrored: Timestamps = Default::default();
    let mut watches = Vec::new();
    for w in set.workers() {
        let jobs: Api<Job> = Api::namespaced(w.client().await?, ns);
        watches.push(
            measure::record(jobs, Point::Seen, mirrored.clone())
                .listed()
                .await?,
        );
    }
    Ok((watches, mirrored))
}
