//! Whether the agent may read what room is summed from. The chart grants
//! it (`agent.room.enabled`); an operator may not have. A watch the API
//! server refuses (403) is said once, with the permission it lacks, and the
//! room stays unknown, so no Room is sent and the manager places on the
//! cluster without asking for room; the watch keeps retrying, so a grant
//! made later takes effect without a restart.

use kube::runtime::watcher;

/// The kinds the room is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Read {
    Nodes,
    Pods,
}

impl Read {
    /// The `kind` label of the watch event metric.
    pub fn kind(self) -> &'static str {
        match self {
            Read::Nodes => "Node",
            Read::Pods => "Pod",
        }
    }

    /// The permission the room needs, as an operator grants it.
    pub fn permission(self) -> &'static str {
        match self {
            Read::Nodes => "get, list and watch on nodes (cluster-wide)",
            Read::Pods => "list and watch on pods in every namespace (a ClusterRole)",
        }
    }
}

/// Whether the API server refused a watch for want of permission.
pub fn forbidden(error: &watcher::Error) -> bool {
    let status = match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status,
        watcher::Error::WatchError(status) => status,
        _ => return false,
    };
    status.code == 403
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
    fn only_a_403_from_the_api_server_is_a_refusal() {
        let list = |code| watcher::Error::InitialListFailed(kube::Error::Api(status(code)));
        let start = |code| watcher::Error::WatchStartFailed(kube::Error::Api(status(code)));
        assert!(forbidden(&list(403)));
        assert!(forbidden(&start(403)));
        assert!(forbidden(&watcher::Error::WatchError(status(403))));
        assert!(!forbidden(&list(401)), "unauthenticated is another trouble");
        assert!(!forbidden(&start(500)));
        assert!(!forbidden(&watcher::Error::WatchError(status(410))));
        assert!(!forbidden(&watcher::Error::NoResourceVersion));
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
