//! What a relayed object of any kind is to both binaries: a namespaced
//! Kubernetes object they read, write and cache; and the one judgement about
//! a Job both make the same way.

use jobrelay_proto::wire::ends_job;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::batch::v1::Job;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A namespaced object of a kind jobrelay relays.
pub trait Object:
    kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
}

impl<T> Object for T where
    T: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static
{
}

/// `Complete` or `Failed`. A Job only on the way to one
/// (`SuccessCriteriaMet`, `FailureTarget`) is not finished.
pub fn job_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| ends_job(&c.type_, &c.status))
}
