//! Leader election among manager replicas, on a `coordination.k8s.io` Lease
//! in the manager's namespace. The keeper reads the Lease every retry
//! period, claims or follows it as [`decide`] says, and moves the [`Fence`]
//! every write of the manager passes: open until the renew deadline after
//! each successful renewal, closed otherwise. Only the leader reconciles and
//! serves agents; a leader that cannot renew in time, or finds another
//! holder, steps down and the process ends (its replacement starts as a
//! follower, from the API servers and the agents' inventories). On a
//! graceful stop the leader releases the Lease, so a follower takes over
//! within one retry period.
//!
//! The Lease writes go through a client of their own, outside the fence;
//! each replace carries the resourceVersion it read, so of two replicas
//! claiming at once one fails with a conflict.

pub mod decide;
pub mod pod_label;

use std::sync::Arc;

use jobrelay_process::Fence;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use self::decide::{Record, Settings, Sighting, Step};
use crate::telemetry::events::{Events, Reason};
use crate::telemetry::metrics::Metrics;

/// Why a leader stopped leading.
#[derive(Debug, thiserror::Error)]
pub enum SteppedDown {
    #[error("the Lease {lease} is now held by {holder}")]
    TakenOver { lease: String, holder: String },
    #[error("the Lease {lease} was not renewed within --renew-deadline ({deadline:?})")]
    NotRenewed {
        lease: String,
        deadline: std::time::Duration,
    },
}

/// The epoch a leader leads in, as agents are told it: the Lease's UID and
/// its `leaseTransitions` when this replica took it. Default: no election.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Epoch {
    pub lease: String,
    pub transitions: i64,
}

/// Keeps, or waits for, one Lease on behalf of this replica.
pub struct Keeper {
    /// Outside the fence.
    pub leases: Api<Lease>,
    pub name: String,
    pub identity: String,
    pub settings: Settings,
    pub fence: Fence,
    /// True while this replica leads.
    pub leading: watch::Sender<bool>,
    /// The epoch it leads in, set as it takes the Lease.
    pub epoch: watch::Sender<Epoch>,
    pub metrics: Arc<Metrics>,
    pub events: Events,
}

impl Keeper {
    /// Claims or follows the Lease until `stop` turns true (then releases
    /// it if held and returns), or until this replica, having led, no
    /// longer does.
    pub async fn run(self, mut stop: watch::Receiver<bool>) -> Result<(), SteppedDown> {
        let mut seen: Option<Sighting> = None;
        loop {
            let started = Instant::now();
            // Every Lease request is bounded, so a leader whose API server
            // hangs still reaches the renew-deadline check below in time.
            match self.bounded(self.leases.get_opt(&self.name)).await {
                Err(error) => warn!(lease = %self.name, %error, "cannot read the Lease"),
                Ok(lease) => {
                    seen = lease
                        .as_ref()
                        .map(|l| decide::observe(seen.take(), self.record(l), started));
                    match decide::step(&self.identity, seen.as_ref(), started) {
                        Step::Claim {
                            transitions,
                            acquired,
                        } => match self.bounded(self.claim(lease, transitions, acquired)).await {
                            Ok(written) => {
                                self.fence
                                    .open_until(decide::writes_until(started, &self.settings));
                                self.metrics.lease_renewed(started);
                                seen = Some(decide::observe(
                                    seen,
                                    self.record(&written),
                                    Instant::now(),
                                ));
                                self.metrics.leadership(true, transitions);
                                if !*self.leading.borrow() {
                                    self.became_leader(transitions, &written);
                                }
                            }
                            // A conflict, or a create that another replica won.
                            Err(kube::Error::Api(status)) if status.code == 409 => {
                                debug!(lease = %self.name, "another replica wrote the Lease first");
                            }
                            Err(error) => {
                                warn!(lease = %self.name, %error, "cannot write the Lease")
                            }
                        },
                        Step::Follow { holder } => {
                            if *self.leading.borrow() {
                                return Err(self.step_down(SteppedDown::TakenOver {
                                    lease: self.name.clone(),
                                    holder,
                                }));
                            }
                            let transitions = seen.as_ref().map_or(0, |s| s.record.transitions);
                            self.metrics.leadership(false, transitions);
                        }
                    }
                }
            }
            if *self.leading.borrow() && !self.fence.is_open(Instant::now()) {
                return Err(self.step_down(SteppedDown::NotRenewed {
                    lease: self.name.clone(),
                    deadline: self.settings.renew_deadline,
                }));
            }
            let stopping = tokio::select! {
                () = tokio::time::sleep(self.settings.retry_period) => false,
                stopped = stop.wait_for(|stop| *stop) => stopped.is_ok(),
            };
            if stopping {
                self.release().await;
                return Ok(());
            }
        }
    }

    /// Writes the Lease with this replica as holder: creates it when there
    /// is none, else replaces what was read (conditional on its
    /// resourceVersion).
    async fn claim(
        &self,
        read: Option<Lease>,
        transitions: i32,
        acquired: bool,
    ) -> Result<Lease, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let mut lease = read.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..Default::default()
            },
            spec: None,
        });
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(seconds(self.settings.lease_duration));
        spec.renew_time = Some(now.clone());
        spec.lease_transitions = Some(transitions);
        if acquired || spec.acquire_time.is_none() {
            spec.acquire_time = Some(now);
        }
        match lease.resource_version() {
            None => {
                self.leases
                    .create(&crate::field_manager::post(), &lease)
                    .await
            }
            Some(_) => {
                self.leases
                    .replace(&self.name, &crate::field_manager::post(), &lease)
                    .await
            }
        }
    }

    fn became_leader(&self, transitions: i32, lease: &Lease) {
        info!(lease = %self.name, identity = %self.identity, transitions, "became the leader");
        self.epoch.send_replace(Epoch {
            lease: lease.uid().unwrap_or_default(),
            transitions: i64::from(transitions),
        });
        self.leading.send_replace(true);
        let regarding = ObjectReference {
            api_version: Some("coordination.k8s.io/v1".into()),
            kind: Some("Lease".into()),
            namespace: lease.namespace(),
            name: Some(self.name.clone()),
            uid: lease.uid(),
            ..Default::default()
        };
        self.events.publish(
            &regarding,
            Reason::LeaderElection,
            format!("{} became leader", self.identity),
        );
    }

    /// Stops every write at once and says why.
    fn step_down(&self, why: SteppedDown) -> SteppedDown {
        self.fence.close();
        self.leading.send_replace(false);
        self.metrics.leadership(false, 0);
        warn!(identity = %self.identity, reason = %why, "stepping down");
        why
    }

    /// Hands the Lease back (holder empty), if this replica holds it, so a
    /// follower takes it at its next read.
    async fn release(&self) {
        self.fence.close();
        if !*self.leading.borrow() {
            return;
        }
        self.leading.send_replace(false);
        self.metrics.leadership(false, 0);
        let released = async {
            let Some(mut lease) = self.leases.get_opt(&self.name).await? else {
                return Ok(());
            };
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(&self.identity) {
                return Ok(());
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            self.leases
                .replace(&self.name, &crate::field_manager::post(), &lease)
                .await
                .map(drop)
        };
        match self.bounded(released).await {
            Ok(()) => info!(lease = %self.name, "Lease released"),
            Err(error) => {
                warn!(lease = %self.name, %error, "cannot release the Lease; a follower takes it once it expires")
            }
        }
    }
}

impl Keeper {
    /// `request`, or a timeout error once a retry period has passed.
    async fn bounded<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        let limit = self.settings.retry_period;
        match tokio::time::timeout(limit, request).await {
            Ok(answered) => answered,
            Err(_) => Err(kube::Error::Service(
                format!("the API server did not answer within --retry-period ({limit:?})").into(),
            )),
        }
    }

    /// What the keeper needs of a Lease it read; one without a duration
    /// counts as having this replica's.
    fn record(&self, lease: &Lease) -> Record {
        let spec = lease.spec.clone().unwrap_or_default();
        Record {
            resource_version: lease.resource_version().unwrap_or_default(),
            holder: spec.holder_identity.unwrap_or_default(),
            lease_duration: spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.settings.lease_duration, std::time::Duration::from_secs),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }
}

fn seconds(duration: std::time::Duration) -> i32 {
    i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX)
}
