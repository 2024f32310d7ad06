//! The agent's caches of this origin's mirror objects, one per kind the
//! worker serves, read as one: [`Mirror`]s by origin UID.

use std::collections::HashMap;
use std::sync::Arc;

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::kinds::KindName;
use k8s_openapi::api::batch::v1::Job;

use super::{Mirror, MirrorKind};
use crate::watched::Watched;

/// The caches of the mirror objects: Jobs always, JobSets where the worker
/// serves them. A clone reads the same caches.
#[derive(Clone)]
pub struct Objects {
    jobs: Watched<Job>,
    jobsets: Option<Watched<JobSet>>,
}

impl Objects {
    pub fn new(jobs: Watched<Job>, jobsets: Option<Watched<JobSet>>) -> Self {
        Objects { jobs, jobsets }
    }

    /// The kinds watched besides Jobs.
    pub fn served(&self) -> Vec<KindName> {
        self.jobsets.iter().map(|_| JobSet::NAME).collect()
    }

    /// Every object cached.
    pub fn state(&self) -> Vec<Arc<dyn Mirror>> {
        let mut all: Vec<Arc<dyn Mirror>> = Vec::new();
        all.extend(self.jobs.state().into_iter().map(erase));
        if let Some(jobsets) = &self.jobsets {
            all.extend(jobsets.state().into_iter().map(erase));
        }
        all
    }

    /// The cached objects of each of `uids` that has any.
    pub fn of<'a>(
        &self,
        uids: impl IntoIterator<Item = &'a String>,
    ) -> HashMap<String, Vec<Arc<dyn Mirror>>> {
        let uids: Vec<&String> = uids.into_iter().collect();
        let mut held: HashMap<String, Vec<Arc<dyn Mirror>>> = HashMap::new();
        for (uid, jobs) in self.jobs.of(uids.iter().copied()) {
            held.entry(uid)
                .or_default()
                .extend(jobs.into_iter().map(erase));
        }
        if let Some(jobsets) = &self.jobsets {
            for (uid, found) in jobsets.of(uids.iter().copied()) {
                held.entry(uid)
                    .or_default()
                    .extend(found.into_iter().map(erase));
            }
        }
        held
    }

    pub async fn wait_until_ready(&self) {
        self.jobs.wait_until_ready().await;
        if let Some(jobsets) = &self.jobsets {
            jobsets.wait_until_ready().await;
        }
    }
}

fn erase<K: MirrorKind>(object: Arc<K>) -> Arc<dyn Mirror> {
    object
}
