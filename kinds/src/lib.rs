//! The relayed kinds' Kubernetes types and facts both binaries share:
//! what a relayed object is to them ([`Object`]), batch/v1 Job facts
//! ([`job`]), the JobSet CRD types ([`jobset`]) and the room for Pods on a
//! worker cluster ([`room`]). Nothing here talks to
//! an API server but the one discovery read of whether JobSets are served.

pub mod job;
pub mod jobset;
pub mod room;

use k8s_openapi::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A namespaced object of a kind jobrelay relays: one both binaries read,
/// write and cache.
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
