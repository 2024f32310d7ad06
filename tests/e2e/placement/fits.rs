//! Jobs go only where their Pods fit: never to a full or cordoned worker
//! while another has room, a GPU Job only where GPUs are, and one that
//! tolerates no taint never by way of a tainted pool.

use std::collections::BTreeMap;

use jobrelay_e2e::scenario::Scenario;
use jobrelay_testbed::cluster::pools::{GPU, cordon_pool};
use jobrelay_testbed::objects::fixtures::TestJob;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, PostParams};

use super::{Fleet, TIMEOUT, free_cpu, gpus, placed_on, pool_names, small};

/// Runs three one-CPU Jobs named `<prefix>-<i>` to completion, and checks
/// each was placed on `worker`.
async fn run_three_on(s: &Scenario, prefix: &str, worker: &str) {
    let mut expected = BTreeMap::new();
    for i in 0..3 {
        let name = format!("{prefix}-{i}");
        s.create(s.job(&name).cpu("1").run_for("2s")).await;
        expected.insert(name, "Complete");
    }
    s.wait_outcomes(&expected, TIMEOUT).await;
    for name in expected.keys() {
        assert_eq!(placed_on(s, name).await.as_deref(), Some(worker), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_or_cordoned_worker_gets_no_job_while_another_has_room() {
    let fleet = Fleet::start("full", [vec![small("full-1")], vec![small("full-2")]]).await;
    let s = &fleet.scenario;

    // Another tenant of worker-2 takes every CPU it has.
    let tenant: Api<Job> = s.worker_api("worker-2").await;
    let filler = TestJob::new(&s.ns, "tenant")
        .cpu("4")
        .parallelism(2, 2)
        .run_for("1h");
    tenant
        .create(&PostParams::default(), &filler.build())
        .await
        .expect("the tenant's Job");
    fleet
        .wait_room("worker-2", |room| free_cpu(room, "full-2") == Some("0"))
        .await;
    run_three_on(s, "while-full", "worker-1").await;

    // Worker-1 is cordoned whole; worker-2's tenant is gone.
    cordon_pool(fleet.rooms[0].client(), &small("full-1"))
        .await
        .expect("cordon worker-1's pool");
    tenant
        .delete("tenant", &DeleteParams::background())
        .await
        .expect("delete the tenant's Job");
    fleet
        .wait_room("worker-1", |room| pool_names(room).is_empty())
        .await;
    fleet
        .wait_room("worker-2", |room| free_cpu(room, "full-2") == Some("8"))
        .await;
    run_three_on(s, "while-cordoned", "worker-2").await;
    fleet.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gpu_job_goes_only_where_gpus_are_and_one_without_toleration_waits() {
    let fleet = Fleet::start(
        "gpu",
        [
            vec![small("gpu-1")],
            vec![small("gpu-2"), gpus("gpu-2-gpus")],
        ],
    )
    .await;
    let s = &fleet.scenario;
    let gpu_job = |name: &str| {
        s.job(name)
            .cpu("1")
            .gpus(1)
            .tolerate(GPU, "present", "NoSchedule")
            .run_for("2s")
    };
    let mut expected = BTreeMap::new();
    for i in 0..3 {
        let name = format!("gpu-{i}");
        s.create(gpu_job(&name)).await;
        expected.insert(name, "Complete");
    }
    // Six CPUs fit only the GPU node, which it may use by its toleration.
    s.create(
        s.job("wide-tolerating")
            .cpu("6")
            .tolerate(GPU, "present", "NoSchedule")
            .run_for("2s"),
    )
    .await;
    expected.insert("wide-tolerating".into(), "Complete");
    s.wait_outcomes(&expected, TIMEOUT).await;
    for name in expected.keys() {
        assert_eq!(
            placed_on(s, name).await.as_deref(),
            Some("worker-2"),
            "{name}"
        );
    }

    // Without the toleration, neither fits anywhere: they wait here.
    s.create(s.job("gpu-untolerating").cpu("1").gpus(1).run_for("2s"))
        .await;
    s.create(s.job("wide-untolerating").cpu("6").run_for("2s"))
        .await;
    let note = s.wait_event("gpu-untolerating", "NoRoom").await;
    assert!(
        note.contains(&format!("worker-1: room for 0 of 1 Pods; short of {GPU}"))
            && note.contains("worker-2: room for 0 of 1 Pods"),
        "{note}"
    );
    let note = s.wait_event("wide-untolerating", "NoRoom").await;
    assert!(
        note.contains("worker-1: room for 0 of 1 Pods; short of cpu")
            && note.contains("worker-2: room for 0 of 1 Pods; short of cpu"),
        "the GPU node's room is not for it: {note}"
    );
    for name in ["gpu-untolerating", "wide-untolerating"] {
        assert_eq!(
            placed_on(s, name).await,
            None,
            "{name} waits on the manager"
        );
    }
    fleet.finish().await;
}
