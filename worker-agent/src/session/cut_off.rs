//! What the agent does while no manager speaks to it: it waits between
//! dials, and once no welcomed manager was heard for `fenceAfter` it fences
//! its mirrors ([`crate::fence`]), keeps them fenced, and follows their Pods
//! until every one is gone. A manager heard again lifts the fence; its
//! DesiredSet decides what resumes.

use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::{info, warn};

use super::Agent;
use crate::fence::Clock;
use crate::metrics::FenceMetrics;

/// How often a fence that is up is looked at: its Pods counted.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);
/// How often a fence that is up is put up again, for a mirror it could not
/// stop, or that was resumed behind it.
const KEEP_UP_EVERY: Duration = Duration::from_secs(10);

/// What the fence stopped while it is up, and the metrics that show it.
#[derive(Default)]
pub struct Fenced {
    /// Origin UIDs of the mirrors stopped since the fence went up.
    uids: Vec<String>,
    since: Option<Instant>,
    kept_up: Option<Instant>,
    /// Every Pod of them was seen gone.
    pods_gone: bool,
    pub metrics: FenceMetrics,
}

impl Fenced {
    /// Nothing fenced yet, shown on `metrics`.
    pub fn shown_on(metrics: FenceMetrics) -> Self {
        Fenced {
            metrics,
            ..Default::default()
        }
    }
}

impl Agent {
    /// Puts the fence up (again): every mirror that may run Pods stopped.
    pub(crate) async fn fence_now(&mut self) {
        let after = self.fence.borrow().after;
        let now = Instant::now();
        if self.fenced.since.is_none() {
            warn!(
                ?after,
                "no manager heard for fenceAfter: fencing every mirror that may run Pods"
            );
            self.fenced.since = Some(now);
            self.fenced.pods_gone = false;
            self.fenced.metrics.fences.inc();
            self.fenced.metrics.up.set(1);
        }
        let stopped = self.mirrors.fence(after).await;
        for uid in stopped {
            if !self.fenced.uids.contains(&uid) {
                self.fenced.uids.push(uid);
            }
        }
        self.fenced.kept_up = Some(now);
        self.fenced
            .metrics
            .mirrors
            .set(self.fenced.uids.len() as i64);
        self.fence.send_modify(|clock| clock.fenced = true);
        self.follow_fence();
    }

    /// Waits `delay` before the next dial; fences meanwhile if due, and
    /// follows a fence that is up.
    pub(crate) async fn rest(&mut self, delay: Duration) {
        let until = tokio::time::Instant::now() + delay;
        loop {
            let fenced = self.fenced.since.is_some();
            let wake = match fenced {
                true => until.min(tokio::time::Instant::now() + FOLLOW_EVERY),
                false => until,
            };
            let clock = self.fence.subscribe();
            let due = tokio::select! {
                () = tokio::time::sleep_until(wake) => false,
                () = fence_due(clock) => true,
            };
            let keep_up = self
                .fenced
                .kept_up
                .is_some_and(|at| at.elapsed() >= KEEP_UP_EVERY);
            if due || keep_up {
                self.fence_now().await;
            }
            self.follow_fence();
            if tokio::time::Instant::now() >= until {
                return;
            }
        }
    }

    /// A manager welcomed the agent: the fence, if up, comes down, and
    /// `fence_after` (when it says one) is the cluster's from now on.
    pub(crate) fn heard_again(&mut self, fence_after: Option<Duration>) {
        let now = Instant::now();
        self.fence.send_modify(|clock| {
            if let Some(after) = fence_after {
                clock.after = after;
            }
            clock.heard(now);
        });
        if let Some(since) = self.fenced.since.take() {
            info!(fenced_for = ?since.elapsed(), mirrors = self.fenced.uids.len(), "a manager is heard again: the fence is lifted; its DesiredSet decides what resumes");
        }
        self.fenced.uids.clear();
        self.fenced.kept_up = None;
        self.fenced.metrics.up.set(0);
        self.fenced.metrics.mirrors.set(0);
        self.fenced.metrics.pods.set(0);
    }

    /// Counts the Pods of the fenced mirrors; says once when all are gone.
    fn follow_fence(&mut self) {
        let Some(since) = self.fenced.since else {
            return;
        };
        let pods = self.mirrors.pods_of(&self.fenced.uids);
        self.fenced.metrics.pods.set(pods as i64);
        if pods == 0 && !self.fenced.pods_gone {
            self.fenced.pods_gone = true;
            info!(mirrors = self.fenced.uids.len(), after = ?since.elapsed(), "fenced: every Pod of the stopped mirrors is gone");
        }
    }
}

/// Resolves once the fence is due by `clock`: `fenceAfter` after a manager
/// was last heard, unless the fence is up.
pub(crate) async fn fence_due(mut clock: watch::Receiver<Clock>) {
    loop {
        let due = clock.borrow_and_update().due_at();
        let changed = match due {
            None => clock.changed().await,
            Some(at) => tokio::select! {
                () = tokio::time::sleep_until(at.into()) => return,
                changed = clock.changed() => changed,
            },
        };
        if changed.is_err() {
            // Nobody moves the clock any more.
            std::future::pending::<()>().await;
        }
    }
}
