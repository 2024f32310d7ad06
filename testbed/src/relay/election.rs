//! The manager replicas' leader election as tests see it: replicas that
//! elect quickly, and which one holds the Lease.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

use crate::relay::Options;

impl Options {
    /// Two manager replicas electing a leader with short durations (a 4 s
    /// lease), so a takeover in a test takes seconds.
    pub fn two_quick_replicas() -> Options {
        Options {
            manager_replicas: 2,
            manager_args: [
                "--lease-duration",
                "4s",
                "--renew-deadline",
                "3s",
                "--retry-period",
                "1s",
            ]
            .map(String::from)
            .to_vec(),
            ..Options::default()
        }
    }
}

/// The Lease the manager replicas elect their leader on, and its namespace.
pub const LEASE: &str = "jobrelay-manager";
pub const LEASE_NAMESPACE: &str = "default";

/// The index of the manager replica (`manager-<index>`) that holds the
/// Lease, if one does; `manager` is a client of the manager cluster.
pub async fn lease_holder(manager: &kube::Client) -> Option<usize> {
    let leases: Api<Lease> = Api::namespaced(manager.clone(), LEASE_NAMESPACE);
    holder_of(&leases.get_opt(LEASE).await.ok()??)
}

/// The index of the manager replica (`manager-<index>`) that holds `lease`,
/// if one does (none once the last holder released it).
pub fn holder_of(lease: &Lease) -> Option<usize> {
    let holder = lease.spec.as_ref()?.holder_identity.as_deref()?;
    holder.strip_prefix("manager-")?.parse().ok()
}
