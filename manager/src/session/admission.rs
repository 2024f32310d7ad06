//! Whether an agent that said Hello may open a session: who its
//! certificate (verified in the handshake) says it is, which version it
//! runs, whether this manager is ready for it and knows its cluster, and
//! whether the cluster's pin takes its certificate (`certificate`).
//! Each refusal comes with a metric label and the status the agent gets.

use jobrelay_process::Peer;
use jobrelay_proto::instance;
use jobrelay_proto::v1::Hello;
use kube::Resource;
use tonic::Status;

use super::Sessions;
use crate::telemetry::events::Reason;

/// Why a session is refused or cut: its metric label and the status the
/// agent gets.
#[derive(Debug)]
pub struct Dismissal {
    pub reason: &'static str,
    pub status: Status,
}

impl Dismissal {
    pub fn new(reason: &'static str, status: Status) -> Self {
        Dismissal { reason, status }
    }
}

/// Refuses an agent whose version this manager does not take
/// ([`jobrelay_proto::skew`]).
pub(super) fn versions_match(agent_version: &str) -> Result<(), Dismissal> {
    jobrelay_proto::skew::check(env!("CARGO_PKG_VERSION"), agent_version).map_err(|skew| {
        Dismissal::new(
            "version_skew",
            Status::failed_precondition(skew.to_string()),
        )
    })
}

/// Refuses an agent while this replica does not lead (`open`: its fence):
/// a replica that lost its Lease opens no session.
pub(super) fn leads(open: bool) -> Result<(), Dismissal> {
    match open {
        true => Ok(()),
        false => Err(Dismissal::new(
            "not_leader",
            Status::unavailable("this manager replica does not lead; dial the leader"),
        )),
    }
}

/// The peer whose certificate the handshake verified; `None` without
/// `tls`, where only the Hello can say who it is.
fn verified(tls: bool, peer: Option<&Peer>) -> Result<Option<&Peer>, Dismissal> {
    match (tls, peer) {
        (false, _) => Ok(None),
        (true, Some(peer)) => Ok(Some(peer)),
        (true, None) => Err(Dismissal::new(
            "no_certificate",
            Status::unauthenticated("no verified client certificate"),
        )),
    }
}

/// Before a byte of its Hello is read: with `tls`, the peer's certificate
/// must name a cluster `registered` — a peer the CA vouches for as a
/// cluster this manager does not know is refused unread.
pub(super) fn names_a_registered_cluster(
    tls: bool,
    peer: Option<&Peer>,
    registered: impl Fn(&str) -> bool,
) -> Result<(), Dismissal> {
    let Some(peer) = verified(tls, peer)? else {
        return Ok(());
    };
    if peer.dns_names.iter().any(|name| registered(name)) {
        return Ok(());
    }
    Err(Dismissal::new(
        "unknown_cluster",
        Status::permission_denied(format!(
            "the client certificate names {}, and no WorkerCluster of that name is registered with this manager",
            peer.dns_names.join(", ")
        )),
    ))
}

/// Whether the Hello's `cluster` is one the peer's certificate names
/// (with `tls`; without, the Hello is taken at its word).
pub(super) fn claimed_identity(
    tls: bool,
    peer: Option<&Peer>,
    cluster: &str,
) -> Result<(), Dismissal> {
    if cluster.is_empty() {
        return Err(Dismissal::new(
            "invalid_hello",
            Status::invalid_argument("Hello.cluster is empty"),
        ));
    }
    let Some(peer) = verified(tls, peer)? else {
        return Ok(());
    };
    if !peer.dns_names.iter().any(|n| n == cluster) {
        return Err(Dismissal::new(
            "cluster_mismatch",
            Status::permission_denied(format!(
                "the Hello claims cluster {cluster}, but the client certificate names {}",
                peer.dns_names.join(", ")
            )),
        ));
    }
    Ok(())
}

impl Sessions {
    /// Decides whether an agent may open a session as `cluster`: its
    /// certificate must name `cluster`, `cluster` must be a registered
    /// WorkerCluster, and the certificate must match its pin.
    pub(super) fn admit(&self, peer: Option<&Peer>, cluster: &str) -> Result<(), Dismissal> {
        claimed_identity(self.tls, peer, cluster)?;
        leads(self.fence.is_open(tokio::time::Instant::now()))?;
        // An empty DesiredSet from a cold cache would read as "delete all".
        if !*self.synced.borrow() {
            return Err(Dismissal::new(
                "not_ready",
                Status::unavailable("the manager is starting; its caches are not synced yet"),
            ));
        }
        let Some(registered) = self.registry.get(cluster) else {
            return Err(Dismissal::new(
                "unknown_cluster",
                Status::permission_denied(format!(
                    "no WorkerCluster named {cluster} is registered with this manager"
                )),
            ));
        };
        self.pinned(&registered, peer)?;
        let cut_at = self.fleet.over_budget_at(cluster);
        match super::budget::holding_off(cut_at, std::time::Instant::now()) {
            None => Ok(()),
            Some(left) => Err(Dismissal::new(
                "held_off",
                Status::resource_exhausted(format!(
                    "cluster {cluster}'s last session was cut for sending more than its budget; dial again in {}s",
                    left.as_secs() + 1
                )),
            )),
        }
    }

    /// Refuses an agent whose worker holds mirrors another manager instance
    /// of this origin made (unless its operator adopted this one), showing
    /// why on the WorkerCluster: this manager must not command them.
    pub(super) fn instance_taken(&self, hello: &Hello) -> Result<(), Dismissal> {
        let held = &hello.manager_instances;
        instance::judge(&self.instance, held, &hello.adopted_manager_instance).map_err(|why| {
            if let Some(cluster) = self.registry.get(&hello.cluster) {
                let regarding = cluster.object_ref(&());
                self.events
                    .publish(&regarding, Reason::ManagerInstanceRefused, why.clone());
            }
            Dismissal::new("manager_instance_refused", Status::failed_precondition(why))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn peer(names: &[&str]) -> Peer {
        Peer {
            addr: "127.0.0.1:1".parse().unwrap(),
            dns_names: names.iter().map(|n| n.to_string()).collect(),
            certificate: None,
        }
    }

    fn refused(result: Result<(), Dismissal>) -> (&'static str, Code) {
        let Dismissal { reason, status } = result.unwrap_err();
        (reason, status.code())
    }

    #[test]
    fn only_a_replica_that_leads_opens_sessions() {
        assert!(leads(true).is_ok());
        assert_eq!(refused(leads(false)), ("not_leader", Code::Unavailable));
    }

    #[test]
    fn a_certificate_naming_the_claimed_cluster_passes() {
        let agent = peer(&["worker-a", "worker-b"]);
        assert!(claimed_identity(true, Some(&agent), "worker-b").is_ok());
    }

    #[test]
    fn a_hello_claiming_another_cluster_is_refused() {
        let agent = peer(&["worker-a"]);
        assert_eq!(
            refused(claimed_identity(true, Some(&agent), "worker-b")),
            ("cluster_mismatch", Code::PermissionDenied)
        );
    }

    #[test]
    fn a_hello_without_a_cluster_is_refused() {
        assert_eq!(
            refused(claimed_identity(false, None, "")),
            ("invalid_hello", Code::InvalidArgument)
        );
    }

    #[test]
    fn with_tls_a_connection_without_a_peer_is_refused() {
        assert_eq!(
            refused(claimed_identity(true, None, "worker-a")),
            ("no_certificate", Code::Unauthenticated)
        );
    }

    #[test]
    fn a_certificate_naming_no_registered_cluster_is_refused_before_its_hello() {
        let registered = |name: &str| name == "worker-b";
        assert!(
            names_a_registered_cluster(true, Some(&peer(&["worker-a", "worker-b"])), registered)
                .is_ok()
        );
        assert_eq!(
            refused(names_a_registered_cluster(
                true,
                Some(&peer(&["ghost"])),
                registered
            )),
            ("unknown_cluster", Code::PermissionDenied)
        );
        assert_eq!(
            refused(names_a_registered_cluster(true, None, registered)),
            ("no_certificate", Code::Unauthenticated)
        );
        assert!(
            names_a_registered_cluster(false, None, registered).is_ok(),
            "without TLS only the Hello can say"
        );
    }

    #[test]
    fn without_tls_the_hello_is_taken_at_its_word() {
        assert!(claimed_identity(false, None, "worker-a").is_ok());
    }
}
