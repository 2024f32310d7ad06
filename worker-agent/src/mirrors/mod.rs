//! The mirrors of one worker cluster: applying them (`apply`), reporting
//! their status, deleting them with Background propagation and confirming
//! every Pod gone (`deletion`), noticing mirrors lost behind jobrelay's back
//! (`losses`), and sweeping what the manager no longer wants (`orphans`).
//! Each mirror is one record (`mirror`), whose work a pure transition
//! changes; `carry_out` does what it decides.
//!
//! The agent sees only objects carrying its manager's `jobrelay.dev/origin`
//! label (its watches select on it), and never touches anything else: a
//! same-named Job without that label is a conflict, reported and left alone.

mod apply;
mod brake;
mod carry_out;
mod confirm;
mod deletion;
mod desired;
mod direct;
mod fencing;
mod foreign;
mod held;
mod inventory;
mod losses;
mod mirror;
mod orphans;
mod reads;
mod status;
mod visit;
mod write;

pub use brake::BrakeSettings;
use mirror::{ApplyRetry, Records};
use orphans::Sweep;
pub use orphans::{HeldMirror, orphans};

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::ExponentialBuilder;
use futures::StreamExt;
use jobrelay_proto::v1::{AgentMessage, ObjectKind, agent_message::Kind};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::deletion_pace::DeletionPace;
use crate::kinds::objects::Objects;
use crate::kinds::{self, Mirror};
use crate::namespaces::NamespacePolicy;
use crate::stuck_pods::HeldPods;
pub use crate::watched::origin_uid;
use crate::watched::{Changes, Watched};
pub use apply::Applied;
pub use visit::Pass;
use visit::Visit;

/// Field manager of everything the agent writes.
pub const FIELD_MANAGER: &str = "jobrelay-agent";

/// Requests (applies, deletes, confirmations) sent to the API server at once.
const REQUEST_CONCURRENCY: usize = 16;

/// How the agent paces what it does on its own.
#[derive(Debug, Clone)]
pub struct Pacing {
    /// How long a Pod may outlive its mirror (or be owned by none of the
    /// live one) before the agent deletes it.
    pub orphan_pod_grace: Duration,
    /// Every deletion draws on it (`--deletions-per-second`).
    pub deletions: DeletionPace,
    /// The longest wait between two tries of an apply the worker refused for
    /// a reason that can clear.
    pub apply_retry_max: Duration,
    /// When a DesiredSet's unknown orphans are held back.
    pub brake: BrakeSettings,
}

/// The mirrors one pass looks at, and their objects (mirrors and their
/// children, of every kind) and Pods by origin UID as the caches show them
/// at its start.
pub(crate) struct Snapshot {
    visit: Visit,
    objects: HashMap<String, Vec<Arc<dyn Mirror>>>,
    pods: HashMap<String, Vec<Arc<Pod>>>,
}

impl Snapshot {
    /// Every object of the origin UID: its mirrors and their children.
    fn objects(&self, uid: &str) -> &[Arc<dyn Mirror>] {
        self.objects.get(uid).map(Vec::as_slice).unwrap_or_default()
    }

    /// The mirrors of the origin UID, without their children.
    fn mirrors(&self, uid: &str) -> Vec<&Arc<dyn Mirror>> {
        self.objects(uid)
            .iter()
            .filter(|o| kinds::parent(o.object_meta()).is_none())
            .collect()
    }

    fn pods(&self, uid: &str) -> &[Arc<Pod>] {
        self.pods.get(uid).map(Vec::as_slice).unwrap_or_default()
    }

    /// Of the keys of a map (`all`, tested by `has`), those this pass looks at.
    fn visited<'a>(
        &self,
        all: impl Iterator<Item = &'a String>,
        has: impl Fn(&String) -> bool,
    ) -> Vec<String> {
        match &self.visit {
            Visit::Everything => all.cloned().collect(),
            Visit::These(uids) => uids.iter().filter(|uid| has(uid)).cloned().collect(),
        }
    }
}

/// What a pass's look at one mirror takes beside its record: what the
/// caches showed at the pass's start, the clock, the orphan grace and the
/// deletion pace.
struct Looking<'a> {
    snapshot: &'a Snapshot,
    now: Instant,
    /// How long a Pod may outlive its mirror, or be owned by none of the
    /// live one.
    grace: Duration,
    deletions: &'a DeletionPace,
}

/// What the first half of a pass found, for the second.
pub struct Findings {
    snapshot: Snapshot,
    /// Stray Pods due for deletion.
    strays: Vec<(String, Arc<Pod>)>,
}

pub struct Mirrors {
    client: kube::Client,
    origin: String,
    /// The manager instance of the session, put on every mirror created.
    instance: String,
    orphan_pod_grace: Duration,
    objects: Objects,
    pods: Watched<Pod>,
    /// The Pods held Terminating on a node not Ready, by origin UID, and
    /// what this session was told of them.
    held: watch::Receiver<Arc<HeldPods>>,
    held_told: HeldPods,
    /// What the watches saw change since the last pass.
    changes: Arc<Changes>,
    /// Origin UIDs the agent itself started something for (a deletion), for
    /// the next pass to look at.
    due: HashSet<String>,
    /// The next pass looks at every mirror (a new session, a new DesiredSet).
    everything_due: bool,
    /// Origin UIDs the manager wants here (DesiredSet, then applies and
    /// deletes), and how many messages changed them.
    desired: desired::Desired,
    sweep: Sweep,
    /// Every mirror the agent holds something of, by origin UID.
    records: Records,
    /// At most [`REQUEST_CONCURRENCY`] applies at once.
    apply_slots: Arc<Semaphore>,
    /// Where the applies' answers come back.
    answers: mpsc::UnboundedSender<Applied>,
    answered: mpsc::UnboundedReceiver<Applied>,
    deletions: DeletionPace,
    apply_retry: ApplyRetry,
    /// Mirrors confirmed gone since start, and when progress was last logged.
    confirmed_gone: u64,
    progress_logged: Option<Instant>,
    /// When each namespace that could not be read to confirm mirrors gone
    /// was last logged.
    unconfirmed_logged: HashMap<String, Instant>,
    /// Set to the mirrors being deleted after each pass.
    deleting_gauge: Gauge,
    /// Where mirrors may go.
    policy: Arc<NamespacePolicy>,
    /// Objects seen carrying a mirror's origin UID outside its namespace.
    foreign: foreign::Foreign,
}

impl Mirrors {
    pub fn new(
        client: kube::Client,
        origin: String,
        pacing: Pacing,
        objects: Objects,
        pods: Watched<Pod>,
        changes: Arc<Changes>,
    ) -> Self {
        let (answers, answered) = mpsc::unbounded_channel();
        Mirrors {
            client,
            origin,
            instance: String::new(),
            orphan_pod_grace: pacing.orphan_pod_grace,
            objects,
            pods,
            held: watch::channel(Arc::default()).1,
            held_told: HeldPods::new(),
            changes,
            due: HashSet::new(),
            everything_due: true,
            desired: desired::Desired::default(),
            sweep: Sweep::new(brake::Brake::new(pacing.brake)),
            records: Records::default(),
            apply_slots: Arc::new(Semaphore::new(REQUEST_CONCURRENCY)),
            answers,
            answered,
            deletions: pacing.deletions,
            apply_retry: ApplyRetry {
                delays: ExponentialBuilder::default()
                    .with_min_delay(Duration::from_secs(1))
                    .with_max_delay(pacing.apply_retry_max)
                    .with_jitter()
                    .without_max_times(),
                max: pacing.apply_retry_max,
            },
            confirmed_gone: 0,
            progress_logged: None,
            unconfirmed_logged: HashMap::new(),
            deleting_gauge: Gauge::default(),
            policy: Arc::new(NamespacePolicy::everywhere(None)),
            foreign: foreign::Foreign::default(),
        }
    }

    /// Writes and reads mirrors only where `policy` allows.
    pub fn within(mut self, policy: Arc<NamespacePolicy>) -> Self {
        self.policy = policy;
        self
    }

    /// Shows the mirrors being deleted (or waiting for their Pods to go) on
    /// `deleting` after each pass, those the brake holds on `held`, and
    /// the objects found outside their mirror's namespace on `foreign`.
    pub fn report_on(mut self, deleting: Gauge, held: Gauge, foreign: Gauge) -> Self {
        self.deleting_gauge = deleting;
        self.sweep.held_gauge = held;
        self.foreign.gauge = foreign;
        self
    }

    /// The manager instance that welcomed this session: the mirrors it
    /// creates carry it.
    pub fn set_instance(&mut self, instance: &str) {
        self.instance = instance.to_string();
    }

    /// The kinds this agent mirrors on its worker, as its Hello names them.
    pub fn kinds(&self) -> Vec<ObjectKind> {
        kinds::mirrored(&self.objects.served())
    }

    /// Waits until every watch has listed everything once.
    pub async fn wait_ready(&self) {
        self.objects.wait_until_ready().await;
        self.pods.wait_until_ready().await;
    }

    /// A new session: what was sent before must be sent again (lost mirrors
    /// included), and the manager's DesiredSet is awaited before anything is
    /// swept.
    pub fn new_session(&mut self) {
        self.desired.new_session();
        self.everything_due = true;
        self.held_told.clear();
        let retry = self.apply_retry;
        self.records.update_all(|record| {
            record.last_report = None;
            record.on(mirror::Event::NewSession, &retry);
        });
    }

    /// What the agent holds as wanted in this session, for its Heartbeats:
    /// follows every DesiredSet, apply and delete it takes.
    pub fn holding(&self) -> tokio::sync::watch::Receiver<Option<jobrelay_proto::v1::Holding>> {
        self.desired.watch()
    }

    /// What the watches saw change; resolves `notified` once they did.
    pub fn changes(&self) -> Arc<Changes> {
        Arc::clone(&self.changes)
    }

    /// The first half of a pass, which sends no request: which mirrors
    /// `pass` looks at (see [`visit::to_visit`]), which of them were lost,
    /// and their changed status. Messages for the manager go to `out`, to be
    /// sent before [`Mirrors::act`] waits on the API server: a status this
    /// pass found changed does not wait for the pass's deletes and
    /// confirmations.
    pub fn look(&mut self, pass: Pass, out: &mut Vec<AgentMessage>) -> Findings {
        let visit = visit::to_visit(
            pass,
            self.changes.take(),
            std::mem::take(&mut self.due),
            std::mem::take(&mut self.everything_due),
            self.records.on_the_clock(),
        );
        let mut snapshot = match &visit {
            Visit::Everything => Snapshot {
                objects: by_origin_uid(self.objects.state(), |o| o.object_meta()),
                pods: by_origin_uid(self.pods.state(), |p| p.meta()),
                visit,
            },
            Visit::These(uids) => Snapshot {
                objects: self.objects.of(uids),
                pods: self.pods.of(uids),
                visit,
            },
        };
        self.set_apart_foreign(&mut snapshot);
        let strays = self.notice_losses(&snapshot);
        out.extend(self.sweep.take_notice());
        self.report_lost(out);
        self.report_status(&snapshot, out);
        self.report_held(out);
        Findings { snapshot, strays }
    }

    /// The second half: moves forward the deletions `look` found (and
    /// confirms them gone), and sends every waiting apply (without waiting
    /// for the answers). Messages for the manager go to `out`.
    pub async fn act(&mut self, findings: Findings, out: &mut Vec<AgentMessage>) {
        self.delete_strays(findings.strays).await;
        self.drive_deletions(&findings.snapshot, out).await;
        let deleting = self.deleting_count();
        self.log_progress(deleting);
        self.deleting_gauge.set(deleting as i64);
        self.apply_due();
    }

    /// Whether the mirror of `uid` is being deleted.
    fn is_deleting(&self, uid: &str) -> bool {
        self.records.is_deleting(uid)
    }

    /// The mirrors being deleted (or waiting for their Pods to go).
    fn deleting_count(&self) -> usize {
        self.records.deleting_count()
    }
}

/// Runs the requests, [`REQUEST_CONCURRENCY`] at a time; their outputs in
/// the order they finished.
async fn concurrently<F: std::future::Future>(
    requests: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    futures::stream::iter(requests)
        .buffer_unordered(REQUEST_CONCURRENCY)
        .collect()
        .await
}

pub fn agent_message(kind: Kind) -> AgentMessage {
    AgentMessage { kind: Some(kind) }
}

fn by_origin_uid<K: ?Sized>(
    objects: Vec<Arc<K>>,
    meta: impl Fn(&K) -> &ObjectMeta,
) -> HashMap<String, Vec<Arc<K>>> {
    let mut grouped: HashMap<String, Vec<Arc<K>>> = HashMap::new();
    for object in objects {
        if let Some(uid) = origin_uid(meta(&object)) {
            grouped.entry(uid).or_default().push(object);
        }
    }
    grouped
}

#[cfg(test)]
mod tests;
