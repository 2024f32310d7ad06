//! Whether the agent may read what room is summed from. The chart grants
//! it (`agent.room.enabled`, `agent.room.kueue`); an operator may not have.
//! A watch the API server refuses (403, or 404 where Kueue's queues are not
//! served) is said once, with the permission it lacks. Without Nodes or
//! Pods the room stays unknown, so no Room is sent and the manager places
//! on the cluster without asking for room; without Kueue's queues the Room
//! names none. The watch keeps retrying, so a grant made later takes effect
//! without a restart.

use kube::runtime::watcher;

/// The kinds the room is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Read {
    Nodes,
    Pods,
    ClusterQueues,
    LocalQueues,
}

impl Read {
    pub const ALL: [Read; 4] = [
        Read::Nodes,
        Read::Pods,
        Read::ClusterQueues,
        Read::LocalQueues,
    ];

    /// The `kind` label of the watch event metric.
    pub fn kind(self) -> &'static str {
        match self {
            Read::Nodes => "Node",
            Read::Pods => "Pod",
            Read::ClusterQueues => "ClusterQueue",
            Read::LocalQueues => "LocalQueue",
        }
    }

    /// The permission the room needs, as an operator grants it.
    pub fn permission(self) -> &'static str {
        match self {
            Read::Nodes => "get, list and watch on nodes (cluster-wide)",
            Read::Pods => "list and watch on pods in every namespace (a ClusterRole)",
            Read::ClusterQueues => {
                "get, list and watch on clusterqueues.kueue.x-k8s.io (Kueue installed, cluster-wide)"
            }
            Read::LocalQueues => {
                "list and watch on localqueues.kueue.x-k8s.io in every namespace (Kueue installed, a ClusterRole)"
            }
        }
    }

    /// What the room lacks while the read is refused.
    pub fn without(self) -> &'static str {
        match self {
            Read::Nodes | Read::Pods => {
                "it reports no room: the manager places on this cluster without asking whether Pods fit"
            }
            Read::ClusterQueues | Read::LocalQueues => {
                "it reports no Kueue quota: the manager places on this cluster without asking whether its Kueue has quota free"
            }
        }
    }

    /// The chart value that grants the read.
    pub fn chart_value(self) -> &'static str {
        match self {
            Read::Nodes | Read::Pods => "the chart does with agent.room.enabled",
            Read::ClusterQueues | Read::LocalQueues => "the chart does with agent.room.kueue",
        }
    }

    /// How to stop reading it.
    pub fn turn_off(self) -> &'static str {
        match self {
            Read::Nodes | Read::Pods => "turn room reports off with --room=false",
            Read::ClusterQueues | Read::LocalQueues => "drop --room-kueue",
        }
    }
}

/// Whether the API server refused a watch for good: for want of permission
/// (403), or as it does not serve the kind (404: Kueue not installed).
pub fn refused(error: &watcher::Error) -> bool {
    let status = match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status,
        watcher::Error::WatchError(status) => status,
        _ => return false,
    };
    matches!(status.code, 403 | 404)
}

/// Whether one kind may be read, as the watch last found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    refused: bool,
}

/// What a watch's answer changed about its access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turned {
    /// Refused, and was not: say so, once.
    Refused,
    /// Read again after a refusal.
    Granted,
    Same,
}

impl Access {
    /// The watch was answered (`refused`: with a 403, else with an event).
    pub fn answered(&mut self, refused: bool) -> Turned {
        let turned = match (self.refused, refused) {
            (false, true) => Turned::Refused,
            (true, false) => Turned::Granted,
            _ => Turned::Same,
        };
        self.refused = refused;
        turned
    }

    pub fn refused(self) -> bool {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn status(code: u16) -> Box<Status> {
        Box::new(Status::failure("refused", "Forbidden").with_code(code))
    }

    #[test]
    fn only_a_403_or_404_from_the_api_server_is_a_refusal() {
        let list = |code| watcher::Error::InitialListFailed(kube::Error::Api(status(code)));
        let start = |code| watcher::Error::WatchStartFailed(kube::Error::Api(status(code)));
        assert!(refused(&list(403)));
        assert!(refused(&start(403)));
        assert!(refused(&list(404)), "the kind is not served");
        assert!(refused(&watcher::Error::WatchError(status(403))));
        assert!(!refused(&list(401)), "unauthenticated is another trouble");
        assert!(!refused(&start(500)));
        assert!(!refused(&watcher::Error::WatchError(status(410))));
        assert!(!refused(&watcher::Error::NoResourceVersion));
    }

    #[test]
    fn a_refusal_is_said_once_and_a_grant_after_it_once() {
        let mut access = Access::default();
        let answers = [false, true, true, false, false, true];
        let turned: Vec<Turned> = answers.iter().map(|&r| access.answered(r)).collect();
        assert_eq!(
            turned,
            [
                Turned::Same,
                Turned::Refused,
                Turned::Same,
                Turned::Granted,
                Turned::Same,
                Turned::Refused
            ]
        );
        assert!(access.refused());
    }
}
