use super::*;

fn cluster(status: Option<WorkerClusterStatus>) -> WorkerCluster {
    let mut cluster = WorkerCluster::new("worker-a", Default::default());
    cluster.status = status;
    cluster
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

const LOST_AFTER: Duration = Duration::from_secs(60);

fn statuses(status: &WorkerClusterStatus) -> Vec<(String, String)> {
    status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone()))
        .collect()
}

#[test]
fn a_connected_cluster_is_connected_and_not_lost() {
    let link = Link {
        connected: true,
        since: Some(at(0)),
        agent_version: "0.1.0".into(),
        last_heard: Some(at(5)),
        active_mirrors: 3,
        room: Some(jobrelay_kinds::room::Room {
            pools: vec![jobrelay_kinds::room::Pool {
                labels: [("pool".to_string(), "small".to_string())].into(),
                taints: Vec::new(),
                nodes: 2,
                free: [("cpu", 3500), ("pods", 219)].into(),
                largest: [("cpu", 2000), ("pods", 110)].into(),
            }],
            queues: vec![jobrelay_kinds::room::Queue {
                name: "team".into(),
                local_queues: vec!["ns/lq".into()],
                free: [("cpu", 1500)].into(),
            }],
        }),
        cut: None,
    };
    let status = desired_status(&cluster(None), &link, LOST_AFTER, at(500), at(0));
    let room = status.room.as_deref().expect("the reported room");
    assert_eq!(room[0].free["cpu"], "3500m");
    assert_eq!(room[0].largest["cpu"], "2");
    assert_eq!(room[0].free["pods"], "219");
    assert_eq!(status.queues[0].name, "team");
    assert_eq!(status.queues[0].local_queues, ["ns/lq"]);
    assert_eq!(status.queues[0].free["cpu"], "1500m");
    assert_eq!(
        statuses(&status),
        [
            ("Connected".into(), "True".into()),
            ("Lost".into(), "False".into())
        ]
    );
    assert_eq!(status.active_mirrors, 3);
    assert_eq!(status.agent_version.as_deref(), Some("0.1.0"));
    assert_eq!(status.last_heartbeat_time, Some(Time(at(5))));
}

#[test]
fn a_session_the_manager_cut_says_why_on_the_connected_condition() {
    let link = Link {
        connected: false,
        since: Some(at(6)),
        cut: Some("it sent more than 10 bytes a second".into()),
        ..Default::default()
    };
    let status = desired_status(&cluster(None), &link, LOST_AFTER, at(7), at(0));
    let connected = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONNECTED)
        .expect("Connected");
    assert_eq!(
        (connected.status.as_str(), connected.reason.as_str()),
        ("False", "SessionCut")
    );
    assert!(
        connected
            .message
            .contains("the manager cut the agent's session at")
            && connected
                .message
                .ends_with("it sent more than 10 bytes a second"),
        "{}",
        connected.message
    );
}

#[test]
fn a_disconnected_cluster_once_written_needs_no_refresh() {
    use crate::clusters::write_budget::{Due, due};
    let heard = at(5).checked_add(SignedDuration::from_millis(250)).unwrap();
    let link = Link {
        connected: false,
        since: Some(at(6)),
        last_heard: Some(heard),
        ..Default::default()
    };
    let written = desired_status(&cluster(None), &link, LOST_AFTER, at(7), at(0));
    assert_eq!(
        written.last_heartbeat_time,
        Some(Time(at(5))),
        "whole seconds"
    );
    let again = desired_status(
        &cluster(Some(written.clone())),
        &link,
        LOST_AFTER,
        at(50),
        at(0),
    );
    let long = Some(Duration::from_secs(600));
    assert_eq!(
        due(Some(&written), &again, long, Duration::from_secs(30)),
        Due::No
    );
}

#[test]
fn a_cluster_is_lost_once_disconnected_for_lost_after() {
    let link = Link {
        connected: false,
        since: Some(at(100)),
        ..Default::default()
    };
    let early = desired_status(&cluster(None), &link, LOST_AFTER, at(159), at(0));
    assert!(!condition_is(&early, LOST, "True"));
    let late = desired_status(&cluster(None), &link, LOST_AFTER, at(160), at(0));
    assert!(condition_is(&late, LOST, "True"));
    assert!(condition_is(&late, CONNECTED, "False"));
}

#[test]
fn after_a_manager_restart_the_recorded_disconnection_counts() {
    let before = desired_status(
        &cluster(None),
        &Link {
            since: Some(at(0)),
            ..Default::default()
        },
        LOST_AFTER,
        at(10),
        at(-100),
    );
    // The manager restarts at 30; the agent never came back.
    let restarted = desired_status(
        &cluster(Some(before)),
        &Link::default(),
        LOST_AFTER,
        at(61),
        at(30),
    );
    assert!(
        condition_is(&restarted, LOST, "True"),
        "lost 60s after the recorded disconnection, not after the restart"
    );
    // A cluster never seen counts from the manager's start.
    let never = desired_status(&cluster(None), &Link::default(), LOST_AFTER, at(61), at(30));
    assert!(!condition_is(&never, LOST, "True"));
}
