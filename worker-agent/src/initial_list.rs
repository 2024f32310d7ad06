//! How the agent's watches get what is already there: as one streamed watch
//! where the API server offers it (`sendInitialEvents`, its `WatchList`
//! feature, on by default from Kubernetes 1.34), else as paged lists.
//!
//! A streamed list is one request that the API server answers from its
//! watch cache, object by object; a paged one is a request per 500 objects.
//! An agent restarted beside 5,000 mirrors has its caches filled, and its
//! session open, about a second sooner that way on a busy worker. A server
//! that refuses it (the feature off) is asked with paged lists from then on.

use futures::{Stream, StreamExt, stream};
use kube::Api;
use kube::runtime::watcher::{self, Event, watcher};
use serde::de::DeserializeOwned;
use tracing::warn;

/// The watch of `api` with `config`: initial lists streamed, or paged once
/// the API server refused a streamed one.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    falling_back(
        watcher(api.clone(), config.clone().streaming_lists()),
        watcher(api, config),
        refuses_streaming,
    )
}

/// Whether the API server refused a streamed initial list: it answers one
/// with 400 or 422 when its `WatchList` feature is off.
pub fn refuses_streaming(error: &watcher::Error) -> bool {
    let status = match error {
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status,
        watcher::Error::WatchError(status) => status,
        _ => return false,
    };
    matches!(status.code, 400 | 422)
}

/// The items of `first` until it yields an error `refused` says is for
/// good; from then on, at once, the items of `then`. The refusal is not
/// passed on: it is expected of a server without the feature, and the
/// caller would back off after it as after any error — with a watch per
/// namespace, once per namespace and kind, which kept an agent whose policy
/// names seven namespaces out of its session for minutes.
fn falling_back<T, E, F, P>(
    first: F,
    then: P,
    refused: fn(&E) -> bool,
) -> impl Stream<Item = Result<T, E>> + Send
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
    F: Stream<Item = Result<T, E>> + Send + 'static,
    P: Stream<Item = Result<T, E>> + Send + 'static,
{
    let state = (first.boxed(), Some(then.boxed()));
    stream::unfold(state, move |(mut current, mut then)| async move {
        let item = current.next().await?;
        let refusal = match &item {
            Err(error) if refused(error) && then.is_some() => Some(error.to_string()),
            _ => None,
        };
        if let (Some(error), Some(mut then)) = (refusal, then.take()) {
            warn!(%error, "the API server refused a streamed list; listing by pages from now on");
            let item = then.next().await?;
            return Some((item, (then, None)));
        }
        Some((item, (current, then)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn status(code: u16) -> Box<Status> {
        Box::new(Status::failure("refused", "Invalid").with_code(code))
    }

    #[test]
    fn only_a_bad_request_or_invalid_answer_is_a_refusal() {
        let start = |code| watcher::Error::WatchStartFailed(kube::Error::Api(status(code)));
        assert!(refuses_streaming(&start(422)));
        assert!(refuses_streaming(&start(400)));
        assert!(refuses_streaming(&watcher::Error::WatchError(status(422))));
        assert!(
            !refuses_streaming(&watcher::Error::WatchError(status(410))),
            "an expired resourceVersion is a relist, not a refusal"
        );
        assert!(
            !refuses_streaming(&start(403)),
            "RBAC is no refusal of the feature"
        );
        assert!(!refuses_streaming(&start(500)));
        assert!(!refuses_streaming(&watcher::Error::NoResourceVersion));
    }

    fn collect(s: impl Stream<Item = Result<u32, String>> + Send) -> Vec<Result<u32, String>> {
        futures::executor::block_on(s.collect())
    }

    fn refused(e: &String) -> bool {
        e == "refused"
    }

    #[test]
    fn a_refusal_switches_to_the_other_stream_for_good() {
        let first = stream::iter(vec![Err("refused".to_string()), Ok(9)]);
        let then = stream::iter(vec![Ok(1), Err("refused".to_string()), Ok(2)]);
        assert_eq!(
            collect(falling_back(first, then, refused)),
            [Ok(1), Err("refused".into()), Ok(2)],
            "the refusal is not passed on, the first stream is never read again, \
             and the second is never left"
        );
    }

    #[test]
    fn other_errors_and_items_stay_on_the_first_stream() {
        let first = stream::iter(vec![Ok(1), Err("gone".to_string()), Ok(2)]);
        let then = stream::iter(vec![Ok(99)]);
        assert_eq!(
            collect(falling_back(first, then, refused)),
            [Ok(1), Err("gone".into()), Ok(2)]
        );
    }
}
