//! The applies the manager sent and the worker has not taken yet: each is
//! sent on its own (the request itself is `write`), and its answer is run
//! through the mirror's transition (`mirror::transition`), which decides
//! whether it is done with, waits, or backs off.

use std::sync::Arc;
use std::time::Instant;

use jobrelay_proto::v1::{AgentMessage, ApplyMirror};

use super::Mirrors;
use super::mirror::Event;
use super::write::try_apply;
use crate::report::ApplyFailure;

/// An apply the API server answered: what was sent, and what came of it.
pub struct Applied {
    apply: ApplyMirror,
    result: Result<(), ApplyFailure>,
}

impl Mirrors {
    /// Takes the manager's applies (each replaces a waiting one of its
    /// mirror, backoff included) and sends every one that is due.
    pub fn apply_all(&mut self, applies: Vec<ApplyMirror>) {
        for apply in applies {
            let uid = apply.origin_uid.clone();
            self.desired
                .applied(&uid, namespace_of(&apply.object).as_deref());
            self.on(&uid, Event::Apply(apply), &mut Vec::new());
        }
        self.apply_due();
    }

    /// Sends every waiting apply that is due, whose previous mirror is gone
    /// and that is not out already; each runs on its own, up to
    /// [`super::REQUEST_CONCURRENCY`] at once, and its answer comes back
    /// through [`Mirrors::applied`]. The agent's passes go on meanwhile, so
    /// a mirror that finished is reported while a burst of others is applied.
    pub(super) fn apply_due(&mut self) {
        let now = Instant::now();
        let due = self.records.applies_due(now);
        for uid in due {
            self.on(&uid, Event::ApplyDue(now), &mut Vec::new());
        }
    }

    /// Sends one apply on its own; its answer comes back through
    /// [`Mirrors::applied`].
    pub(super) fn send_apply(&self, apply: ApplyMirror) {
        let (client, origin) = (self.client.clone(), self.origin.clone());
        let instance = self.instance.clone();
        let policy = Arc::clone(&self.policy);
        let served = self.objects.served();
        let cached: Vec<_> = self
            .objects
            .of([&apply.origin_uid])
            .into_values()
            .flatten()
            .collect();
        let (slots, answers) = (Arc::clone(&self.apply_slots), self.answers.clone());
        tokio::spawn(async move {
            // `self.apply_slots` is never closed.
            let _slot = slots.acquire().await;
            let result = try_apply(
                &client,
                (&origin, &instance),
                &policy,
                &served,
                (&apply, &cached),
            )
            .await;
            let _ = answers.send(Applied { apply, result });
        });
    }

    /// The next answer to an apply sent by [`Mirrors::apply_due`].
    pub async fn applied(&mut self) -> Applied {
        match self.answered.recv().await {
            Some(applied) => applied,
            // `self.answers` keeps the channel open.
            None => futures::future::pending().await,
        }
    }

    /// Records what came of an apply; tells the manager of a refusal.
    pub fn take_answer(&mut self, Applied { apply, result }: Applied, out: &mut Vec<AgentMessage>) {
        let uid = apply.origin_uid;
        let answered = Event::Answered {
            revision: apply.revision,
            result,
            now: Instant::now(),
        };
        self.on(&uid, answered, out);
    }
}

/// The namespace an apply's object names, read from its metadata alone.
fn namespace_of(object: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        namespace: Option<String>,
    }
    serde_json::from_slice::<Head>(object)
        .ok()?
        .metadata
        .namespace
}
