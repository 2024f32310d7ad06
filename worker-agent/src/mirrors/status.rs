//! The mirrors' status for the manager: a MirrorStatus is sent when a
//! mirror Job's status, phase or revision differs from what was last sent,
//! or what it says of its Pods (those waiting unschedulable, their phases
//! and reasons) does.

use jobrelay_proto::v1::{AgentMessage, MirrorPhase, MirrorStatus, agent_message::Kind};
use k8s_openapi::jiff::Timestamp;
use tracing::warn;

use super::{Mirrors, Snapshot, agent_message, origin_uid};
use crate::kinds;
use crate::pod_summary::{Said, summary};
use crate::report::revision_of;
use crate::unschedulable::{Stuck, stuck};

/// The last status sent for a mirror, and the Job's resourceVersion it was
/// read from (unchanged, nothing else can have).
#[derive(Debug)]
pub(super) struct LastReport {
    resource_version: Option<String>,
    report: Report,
}

/// What a MirrorStatus says; one is sent only when it differs.
#[derive(Debug, PartialEq)]
struct Report {
    revision: u64,
    phase: MirrorPhase,
    status: Vec<u8>,
    unschedulable: Option<Stuck>,
    pods: Said,
}

impl Mirrors {
    /// Reports, into `out`, the status of each mirror in `snapshot` whose Job
    /// (or what it says of its Pods) changed since it was last sent.
    pub(super) fn report_status(&mut self, snapshot: &Snapshot, out: &mut Vec<AgentMessage>) {
        let mirrors = snapshot
            .objects
            .values()
            .flatten()
            .filter(|o| kinds::parent(o.object_meta()).is_none());
        for job in mirrors {
            let meta = job.object_meta();
            let Some(uid) = origin_uid(meta) else {
                continue;
            };
            let record = self.records.get(&uid);
            if record.is_some_and(|r| r.work.is_deleting()) {
                continue;
            }
            let previous = record.and_then(|r| r.last_report.as_ref());
            let pods = snapshot.pods(&uid);
            let (unschedulable, pods) = (stuck(pods), Said(summary(pods)));
            if previous.is_some_and(|sent| {
                sent.resource_version == meta.resource_version
                    && sent.report.unschedulable == unschedulable
                    && sent.report.pods == pods
            }) {
                continue;
            }
            let status = match job.status_bytes() {
                Ok(status) => status,
                Err(error) => {
                    warn!(%uid, %error, "cannot serialise the mirror's status; not reported");
                    continue;
                }
            };
            let report = Report {
                revision: revision_of(meta),
                phase: job.mirror_phase(),
                status,
                unschedulable,
                pods,
            };
            if previous.is_none_or(|sent| sent.report != report) {
                out.push(agent_message(Kind::MirrorStatus(MirrorStatus {
                    origin_uid: uid.clone(),
                    revision: report.revision,
                    phase: report.phase as i32,
                    status: report.status.clone(),
                    unschedulable: report
                        .unschedulable
                        .as_ref()
                        .map(|stuck| stuck.report(Timestamp::now())),
                    pods: Some(report.pods.0.clone()),
                })));
            }
            let resource_version = meta.resource_version.clone();
            let last = LastReport {
                resource_version,
                report,
            };
            self.records.update(&uid, |r| r.last_report = Some(last));
        }
    }
}
