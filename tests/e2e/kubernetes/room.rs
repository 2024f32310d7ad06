//! Proof that the kit's node pools give the real kube-scheduler finite room
//! to fit: with the default Node cordoned, a Job wider than its pool runs
//! what fits and keeps the rest `Unschedulable` until the pool grows; a GPU
//! Pod stays off the tainted GPU pool unless it tolerates the taint; a
//! required node affinity picks the pool. These tests take worker-1 in
//! turns (`FiniteRoom`); the others of this file use the manager.

use jobrelay_testbed::cluster::NODE;
use jobrelay_testbed::cluster::pools::{GPU, NodePool, POOL_LABEL, uneven_fleet};
use jobrelay_testbed::cluster::room::FiniteRoom;
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};

use super::{TIMEOUT, WORKERS, clusters, phases, pods_of};

/// Where the Pods of a Job are: bound to a Node and Running, or Pending
/// because the scheduler found no room (with its message).
#[derive(Debug, Default)]
struct Placement {
    running_on: Vec<String>,
    unschedulable: Vec<String>,
}

fn placement(pods: &[Pod]) -> Placement {
    let mut seen = Placement::default();
    for pod in pods {
        let status = pod.status.clone().unwrap_or_default();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let refused = status.conditions.iter().flatten().find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        });
        match (status.phase.as_deref(), node, refused) {
            (Some("Running"), Some(node), _) => seen.running_on.push(node),
            (Some("Pending"), None, Some(refused)) => seen
                .unschedulable
                .push(refused.message.clone().unwrap_or_default()),
            _ => {}
        }
    }
    seen.running_on.sort();
    seen
}

/// Waits until `job` has `running` Pods Running and `unschedulable` Pods
/// Pending as Unschedulable, and nothing else.
async fn wait_placement(
    pods: &Api<Pod>,
    job: &str,
    running: usize,
    unschedulable: usize,
) -> Placement {
    wait::until(
        format!("Job {job}: {running} Pod(s) Running, {unschedulable} Unschedulable"),
        TIMEOUT,
        || async move {
            match pods_of(pods, job).await {
                Ok(list) => {
                    let seen = placement(&list);
                    if list.len() == running + unschedulable
                        && seen.running_on.len() == running
                        && seen.unschedulable.len() == unschedulable
                    {
                        Seen::Ready(seen)
                    } else {
                        Seen::Waiting(format!("phases {:?}, {seen:?}", phases(&list)))
                    }
                }
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await
}

/// Deletes the Jobs with their Pods and waits until the Pods are gone —
/// while their Nodes still exist, since kwok ends a deleted Pod only on a
/// Node it plays.
async fn delete_jobs(jobs: &Api<Job>, pods: &Api<Pod>, names: &[&str]) {
    let background = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    for name in names {
        jobs.delete(name, &background).await.expect("delete Job");
        wait::until(format!("every Pod of Job {name} gone"), TIMEOUT, || async {
            match pods_of(pods, name).await {
                Ok(list) if list.is_empty() => Seen::Ready(()),
                Ok(list) => Seen::Waiting(format!("phases {:?}", phases(&list))),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await;
    }
}

async fn create(jobs: &Api<Job>, job: TestJob) {
    jobs.create(&PostParams::default(), &job.build())
        .await
        .expect("create Job");
}

#[tokio::test]
async fn a_job_wider_than_its_pool_waits_unschedulable_until_a_node_is_added() {
    let worker = &clusters(WORKERS).workers()[0];
    let mut room = FiniteRoom::take(worker).await.expect("finite room");
    let small = NodePool::new("room-small", 2).cpu("4").memory("16Gi");
    room.add_pool(&small).await.expect("add the small pool");
    let client = room.client().clone();
    // A Node created without room gets the stage's default, which nothing
    // fills; it is only cordoned.
    let default = Api::<Node>::all(client.clone())
        .get(NODE)
        .await
        .expect("the default Node");
    assert_eq!(default.spec.and_then(|s| s.unschedulable), Some(true));
    let cpus = default
        .status
        .and_then(|s| s.allocatable)
        .unwrap_or_default();
    assert_eq!(cpus.get("cpu").map(|q| q.0.as_str()), Some("1k"));
    let ns = kit::namespace(&client, "room-wide").await;
    let (jobs, pods): (Api<Job>, Api<Pod>) = (
        Api::namespaced(client.clone(), &ns),
        Api::namespaced(client, &ns),
    );

    // Three Pods of 3 CPUs, two 4-CPU Nodes: one Pod per Node fits.
    create(
        &jobs,
        TestJob::new(&ns, "wide")
            .cpu("3")
            .parallelism(3, 3)
            .run_for("1h"),
    )
    .await;
    let seen = wait_placement(&pods, "wide", 2, 1).await;
    assert_eq!(seen.running_on, ["room-small-0", "room-small-1"]);
    assert!(
        seen.unschedulable[0].contains("Insufficient cpu"),
        "the scheduler names what is short: {}",
        seen.unschedulable[0]
    );

    room.add_node(&small, 2).await.expect("grow the small pool");
    let seen = wait_placement(&pods, "wide", 3, 0).await;
    assert_eq!(
        seen.running_on,
        ["room-small-0", "room-small-1", "room-small-2"]
    );

    delete_jobs(&jobs, &pods, &["wide"]).await;
    room.give_back().await.expect("give the room back");
}

#[tokio::test]
async fn a_gpu_pod_without_toleration_stays_off_the_tainted_pool() {
    let worker = &clusters(WORKERS).workers()[0];
    let mut room = FiniteRoom::take(worker).await.expect("finite room");
    for pool in uneven_fleet() {
        room.add_pool(&pool).await.expect("add a pool of the fleet");
    }
    let client = room.client().clone();
    let ns = kit::namespace(&client, "room-gpu").await;
    let (jobs, pods): (Api<Job>, Api<Pod>) = (
        Api::namespaced(client.clone(), &ns),
        Api::namespaced(client, &ns),
    );

    create(
        &jobs,
        TestJob::new(&ns, "untolerated")
            .cpu("1")
            .gpus(1)
            .run_for("1h"),
    )
    .await;
    let seen = wait_placement(&pods, "untolerated", 0, 1).await;
    let message = &seen.unschedulable[0];
    assert!(
        message.contains("untolerated taint") && message.contains(&format!("Insufficient {GPU}")),
        "the GPU Node refuses by its taint, the others by their room: {message}"
    );

    create(
        &jobs,
        TestJob::new(&ns, "tolerated")
            .cpu("1")
            .memory("1Gi")
            .gpus(1)
            .tolerate(GPU, "present", "NoSchedule")
            .run_for("1h"),
    )
    .await;
    let seen = wait_placement(&pods, "tolerated", 1, 0).await;
    assert_eq!(seen.running_on, ["gpu-0"]);

    // Four CPUs would fit a small Node; the affinity asks for a large one.
    create(
        &jobs,
        TestJob::new(&ns, "large-only")
            .cpu("4")
            .require_node_label_in(POOL_LABEL, &["large"])
            .run_for("1h"),
    )
    .await;
    let seen = wait_placement(&pods, "large-only", 1, 0).await;
    assert!(
        seen.running_on[0].starts_with("large-"),
        "{:?}",
        seen.running_on
    );

    // The GPU Node had room all along: the first Pod stays off it.
    wait_placement(&pods, "untolerated", 0, 1).await;

    delete_jobs(&jobs, &pods, &["untolerated", "tolerated", "large-only"]).await;
    room.give_back().await.expect("give the room back");
}

/// A test that fails drops its room without giving it back; the room puts
/// things back itself, so the next test finds the cluster as it was.
#[tokio::test]
async fn a_dropped_room_is_put_back() {
    let worker = &clusters(WORKERS).workers()[0];
    let mut room = FiniteRoom::take(worker).await.expect("finite room");
    let pool = NodePool::new("room-dropped", 1).cpu("2");
    room.add_pool(&pool).await.expect("add a pool");
    let client = room.client().clone();
    drop(room);

    // Whether the default Node was uncordoned cannot be read from here: the
    // next finite-room test may have cordoned it again already. Its pool is
    // this test's alone, and put back first.
    let nodes: Api<Node> = Api::all(client);
    let left = nodes
        .list(&ListParams::default().labels(&pool.selector()))
        .await
        .expect("list Nodes");
    assert!(left.items.is_empty(), "the pool's Nodes are gone");
}
