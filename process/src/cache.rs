//! What a watch cache keeps of an object: everything jobrelay reads, not the
//! API server's field ownership records or kubectl's last applied copy, which
//! are often larger than the rest of the object and never read.

use kube::Resource;

/// The annotation `kubectl apply` keeps its last applied copy in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what no part of jobrelay reads from a cached object:
/// `metadata.managedFields` and the last-applied annotation. For
/// `WatchStreamExt::modify` before a reflector.
pub fn trim<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    #[test]
    fn a_cached_object_keeps_all_but_field_ownership_and_the_last_applied_copy() {
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "train", "uid": "u1", "finalizers": ["jobrelay.dev/remote-cleanup"],
                "annotations": {LAST_APPLIED: "{...}", "jobrelay.dev/cluster": "w1"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
            },
            "spec": {"template": {}},
        }))
        .unwrap();
        trim(&mut job);
        assert!(job.metadata.managed_fields.is_none());
        let annotations = job.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations.len(), 1);
        assert_eq!(annotations["jobrelay.dev/cluster"], "w1");
        assert_eq!(job.metadata.finalizers.as_ref().unwrap().len(), 1);
        assert!(job.spec.is_some());
    }
}
