//! The manager's caches of relayed objects, one per kind it relays.

use jobrelay_kinds::jobset::JobSet;
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::Store;

/// Jobs always; JobSets where the manager cluster serves them.
#[derive(Clone)]
pub struct Stores {
    pub jobs: Store<Job>,
    pub jobsets: Option<Store<JobSet>>,
}

impl Stores {
    /// Every JobSet cached; none where the manager cluster serves none.
    pub fn jobset_state(&self) -> Vec<std::sync::Arc<JobSet>> {
        self.jobsets.as_ref().map(Store::state).unwrap_or_default()
    }
}
