//! The manager's watch caches: each fed by a task of its own from one
//! watch, saying when its first list is in, and all of them together.

use futures::StreamExt;
use jobrelay_process::Tasks;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tokio::sync::watch;
use tracing::{info, warn};

/// Feeds the store behind `writer` with every `K`, as `keep` leaves it, in a
/// task of its own, handing each event, once in the store, to `seen`. The
/// receiver turns true once the first list is in.
pub(crate) fn cache<K>(
    api: Api<K>,
    keep: impl FnMut(&mut K) + Send + 'static,
    writer: reflector::store::Writer<K>,
    mut seen: impl FnMut(&watcher::Event<K>) + Send + 'static,
    tasks: &Tasks,
) -> watch::Receiver<bool>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let kind = K::kind(&()).to_string();
    let (synced_tx, synced) = watch::channel(false);
    let events = watcher(
        api,
        watcher::Config::default().timeout(jobrelay_process::WATCH_TIMEOUT_SECS),
    )
    .default_backoff()
    .modify(keep)
    .reflect(writer);
    tasks.spawn(events.for_each(move |event| {
        if let Ok(event) = &event {
            seen(event);
        }
        match event {
            Ok(watcher::Event::InitDone) => {
                if !*synced_tx.borrow() {
                    info!("{kind} cache synced");
                }
                let _ = synced_tx.send(true);
            }
            Ok(_) => {}
            Err(error) => warn!(%error, "{kind} watch error; retrying"),
        }
        futures::future::ready(())
    }));
    synced
}

/// True once every one of `each` is.
pub(crate) fn all_synced(
    each: impl IntoIterator<Item = watch::Receiver<bool>>,
) -> watch::Receiver<bool> {
    let each: Vec<watch::Receiver<bool>> = each.into_iter().collect();
    let (all_tx, all) = watch::channel(false);
    tokio::spawn(async move {
        for mut synced in each {
            if synced.wait_for(|s| *s).await.is_err() {
                return;
            }
        }
        let _ = all_tx.send(true);
    });
    all
}
