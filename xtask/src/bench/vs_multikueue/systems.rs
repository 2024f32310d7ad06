//! The systems `--vs-multikueue` compares: each one's name, namespace,
//! settings and Jobs.

use jobrelay_proto::wire::{MANAGED_BY, QUEUE_NAME_LABEL};
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::objects::kueue_objects;
use k8s_openapi::api::batch::v1::Job;

/// MultiKueue's controller name, and the manager value of `spec.managedBy`
/// for the Jobs it dispatches.
pub(super) const MULTIKUEUE: &str = "kueue.x-k8s.io/multikueue";
/// Kueue's own namespace (where MultiKueue reads kubeconfig Secrets).
pub(super) const KUEUE_NAMESPACE: &str = "kueue-system";
/// CPU each Job requests (each ClusterQueue's quota is far above).
const JOB_CPU: &str = "10m";

/// The systems compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum System {
    Raw,
    KueueAlone,
    KueueCheck,
    Standalone,
    JobrelayKueue,
    JobrelayBothKueues,
    MultiKueue,
}

impl System {
    pub(super) const ALL: [System; 7] = [
        System::Raw,
        System::KueueAlone,
        System::KueueCheck,
        System::Standalone,
        System::JobrelayKueue,
        System::JobrelayBothKueues,
        System::MultiKueue,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            System::Raw => "raw (straight on a worker)",
            System::KueueAlone => "Kueue alone (manager's node)",
            System::KueueCheck => "Kueue, check answered at once",
            System::Standalone => "jobrelay standalone",
            System::JobrelayKueue => "jobrelay behind Kueue",
            System::JobrelayBothKueues => "jobrelay, Kueue on both",
            System::MultiKueue => "MultiKueue v0.19.2",
        }
    }

    pub(crate) fn namespace(self, n: usize) -> String {
        let short = match self {
            System::Raw => "raw",
            System::KueueAlone => "kq",
            System::KueueCheck => "kc",
            System::Standalone => "jr",
            System::JobrelayKueue => "jrq",
            System::JobrelayBothKueues => "jrqq",
            System::MultiKueue => "mk",
        };
        format!("vs-{short}-{n}")
    }

    /// What differs from each part's defaults, said beside its figures.
    pub(crate) fn settings(self) -> &'static str {
        match self {
            System::Raw => "kube-apiserver and kube-controller-manager defaults",
            System::KueueAlone => {
                "Kueue on the manager as its release configures it (client 300 QPS, burst 500; Job and Workload controllers 5 and 10 at once); a ClusterQueue with no admission check; the Pods run on the manager cluster's node"
            }
            System::KueueCheck => {
                "as Kueue alone, behind an AdmissionCheck a stand-in controller answers Ready as soon as quota is reserved"
            }
            System::Standalone => {
                "jobrelay defaults (client 500 QPS, burst 1000), release build, log level info"
            }
            System::JobrelayKueue => {
                "as standalone; Kueue on the manager as its release configures it (client 300 QPS, burst 500; Job and Workload controllers 5 and 10 at once); workers not opted in to worker-side Kueue (the default)"
            }
            System::JobrelayBothKueues => {
                "as standalone; Kueue on the manager and workers as its release configures it (client 300 QPS, burst 500; Job and Workload controllers 5 and 10 at once); workers opted in to worker-side Kueue"
            }
            System::MultiKueue => {
                "Kueue on the manager and workers as its release configures it (client 300 QPS, burst 500; Job and Workload controllers 5 and 10 at once); MultiKueue v0.19.2 builds its worker clients from the kubeconfig alone, at client-go's default 5 QPS, burst 10 (not configurable in that release)"
            }
        }
    }

    /// A Job of this system, its Pod running `run_for`.
    pub(super) fn job(self, ns: &str, name: &str, run_for: &str) -> Job {
        self.dress(TestJob::new(ns, name).run_for(run_for).cpu(JOB_CPU))
    }

    /// `job` as this system takes it: managed by it, in its queue.
    pub(crate) fn dress(self, job: TestJob) -> Job {
        match self {
            System::Raw => job,
            System::KueueAlone | System::KueueCheck => {
                job.label(QUEUE_NAME_LABEL, kueue_objects::LOCAL_QUEUE)
            }
            System::Standalone => job.managed_by(MANAGED_BY),
            System::JobrelayKueue | System::JobrelayBothKueues => job
                .managed_by(MANAGED_BY)
                .label(QUEUE_NAME_LABEL, kueue_objects::LOCAL_QUEUE),
            System::MultiKueue => job
                .managed_by(MULTIKUEUE)
                .label(QUEUE_NAME_LABEL, kueue_objects::LOCAL_QUEUE),
        }
        .build()
    }
}
