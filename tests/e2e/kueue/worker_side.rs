//! Worker-side Kueue: worker-3 runs its own Kueue and is opted in
//! (`WorkerCluster spec.kueue`), so a queued Job's mirror is queued there
//! too, under the mapped LocalQueue, against the worker's own quota; the
//! manager's check is Ready only once that Kueue admitted it.

use std::collections::BTreeSet;

use super::*;
use jobrelay_proto::wire::{CLUSTER_KEY, NOT_ADMITTED_BY_ANNOTATION};

/// A scenario whose manager ClusterQueue (`manager_cpu` CPUs, behind
/// `check`) and worker-3 ClusterQueue (`worker_cpu` CPUs, no checks, reached
/// through the mapped LocalQueue) are its own.
async fn queued_on_worker(
    prefix: &str,
    manager_cpu: u32,
    worker_cpu: u32,
    check: &str,
) -> Scenario {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, prefix).await;
    let manager = kit::client(clusters.manager()).await;
    let worker = kit::client(s.worker(KUEUE_WORKER)).await;
    let queues = async {
        kueue_objects::queue_named(&manager, &s.ns, &s.ns, LOCAL_QUEUE, manager_cpu, &[check])
            .await?;
        kueue_objects::queue_named(&worker, &s.ns, &s.ns, WORKER_LOCAL_QUEUE, worker_cpu, &[]).await
    };
    queues.await.unwrap_or_else(|e| panic!("{e:#}"));
    s
}

/// What worker-3 shows of one mirror.
struct OnWorker {
    queue: Option<String>,
    /// Unsuspended (admitted by the worker's Kueue) and not finished.
    running: bool,
}

async fn mirrors_on_worker(s: &Scenario) -> BTreeMap<String, OnWorker> {
    let mirrors: Api<Job> = s.worker_api(KUEUE_WORKER).await;
    let list = mirrors.list(&ListParams::default()).await;
    list.map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            let finished = has_condition(&m, "Complete") || has_condition(&m, "Failed");
            let suspended = m.spec.as_ref().and_then(|sp| sp.suspend) == Some(true);
            let on_worker = OnWorker {
                queue: m.labels().get(QUEUE_NAME).cloned(),
                running: !suspended && !finished,
            };
            (m.name_any(), on_worker)
        })
        .collect()
}

#[tokio::test]
async fn a_workers_own_kueue_admits_the_mirrors_one_by_one_within_its_quota() {
    let s = queued_on_worker("wquota", 3, 1, WORKER_CHECK).await;
    let names = ["w0", "w1", "w2"];
    for name in names {
        s.create(queued_job(&s, name).run_for("3s")).await;
    }
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    let most = std::cell::Cell::new(0);
    let queued_as = std::cell::RefCell::new(BTreeSet::new());
    wait::until(
        "all 3 Jobs Complete, admitted one at a time by worker-3's Kueue",
        Duration::from_secs(180),
        || async {
            // The checks first: a check Ready now must show its mirror
            // admitted (or already done) when the worker is read after.
            let ready: Vec<String> = workloads
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
                .into_iter()
                .filter(|w| w.check(WORKER_CHECK).is_some_and(|c| c.state == Some(CheckState::Ready)))
                .filter_map(|w| w.owner_job().map(|(name, _)| name.to_string()))
                .collect();
            let mirrors = mirrors_on_worker(&s).await;
            let running = mirrors.values().filter(|m| m.running).count();
            assert!(
                running <= 1,
                "worker-3's quota is 1 CPU, {running} mirrors run there"
            );
            let live: usize = live_worker_pods(&s).await.values().sum();
            assert!(live <= 1, "{live} Pods run on the workers");
            most.set(most.get().max(running));
            for name in &ready {
                if let Some(mirror) = mirrors.get(name) {
                    let done = s
                        .jobs
                        .get(name)
                        .await
                        .is_ok_and(|j| has_condition(&j, "Complete"));
                    assert!(
                        mirror.running || done,
                        "the check of {name} is Ready while worker-3's Kueue has not admitted its mirror"
                    );
                }
            }
            queued_as
                .borrow_mut()
                .extend(mirrors.values().filter_map(|m| m.queue.clone()));
            let complete = s.complete().await;
            match complete {
                3 => Seen::Ready(()),
                n => Seen::Waiting(format!(
                    "{n} of 3 Complete, {running} running on worker-3, Ready: {ready:?}"
                )),
            }
        },
    )
    .await;
    assert_eq!(most.get(), 1, "the mirrors ran on worker-3");
    assert_eq!(
        queued_as.into_inner(),
        BTreeSet::from([WORKER_LOCAL_QUEUE.to_string()]),
        "each mirror was queued under the mapped LocalQueue"
    );
    for name in names {
        let job = s.jobs.get(name).await.expect("get");
        assert_eq!(
            job.annotations().get(CLUSTER_KEY).map(String::as_str),
            Some(KUEUE_WORKER)
        );
    }
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_mirror_the_workers_kueue_does_not_admit_in_time_is_withdrawn_and_another_worker_tried() {
    let (clusters, _) = setup().await;
    let manager = kit::client(clusters.manager()).await;
    let set = format!("late-{}", std::process::id());
    check_of_set(&manager, &set, &[KUEUE_WORKER], SetPlacement::MostRoom).await;
    let s = queued_on_worker("wlate", 4, 1, &set).await;
    // Its quota is free, but an administrator of worker-3 holds its
    // ClusterQueue: its Kueue admits nothing, which no quota shows.
    let worker = kit::client(s.worker(KUEUE_WORKER)).await;
    kueue_objects::api(&worker, "ClusterQueue", None)
        .patch(
            &s.ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"stopPolicy": "Hold"}})),
        )
        .await
        .expect("hold worker-3's ClusterQueue");
    let late = s.create(queued_job(&s, "late").run_for("2s")).await;
    let withdrawn = wait::until(
        "the late Job's mirror withdrawn after admitWithin",
        Duration::from_secs(90),
        || async {
            assert_eq!(
                live_worker_pods(&s).await.get(&late),
                None,
                "worker-3's Kueue admits nothing while its ClusterQueue is held"
            );
            match s.jobs.get("late").await {
                Ok(job) => match job.annotations().get(NOT_ADMITTED_BY_ANNOTATION) {
                    Some(by) => Seen::Ready(by.clone()),
                    None => Seen::Waiting(format!("{:?}", job.annotations())),
                },
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    assert_eq!(withdrawn, KUEUE_WORKER);
    let note = s.wait_event("late", "MirrorWithdrawn").await;
    assert!(note.contains(KUEUE_WORKER), "{note}");
    // Let the check use worker-1 too: the Job, sent back to its queue, is
    // placed there rather than on the worker that did not admit it.
    apply_set(
        &manager,
        &set,
        &[KUEUE_WORKER, "worker-1"],
        SetPlacement::MostRoom,
    )
    .await;
    let done = s.wait_condition("late", "Complete").await;
    assert_eq!(
        done.annotations().get(CLUSTER_KEY).map(String::as_str),
        Some("worker-1")
    );
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_job_queued_on_a_worker_goes_there_only_while_its_cluster_queue_has_quota() {
    let (clusters, _) = setup().await;
    let manager = kit::client(clusters.manager()).await;
    let set = format!("quota-{}", std::process::id());
    // worker-3 first: it has room on its nodes for every Job here.
    let clusters = [KUEUE_WORKER, "worker-1"];
    check_of_set(&manager, &set, &clusters, SetPlacement::InOrder).await;
    let s = queued_on_worker("wroom", 4, 2, &set).await;
    // The manager shows worker-3's ClusterQueue, fed by the mapped
    // LocalQueue, with its 2 CPUs free.
    let fed_by = format!("{}/{WORKER_LOCAL_QUEUE}", s.ns);
    let registered: Api<WorkerCluster> = Api::all(manager.clone());
    wait::until(
        "worker-3's ClusterQueue shown with its quota",
        WAIT,
        || async {
            let queues = match registered.get(KUEUE_WORKER).await {
                Ok(wc) => wc.status.map(|st| st.queues).unwrap_or_default(),
                Err(e) => return Seen::Waiting(e.to_string()),
            };
            match queues.iter().find(|q| q.name == s.ns) {
                Some(q)
                    if q.local_queues == [fed_by.clone()]
                        && q.free.get("cpu").map(String::as_str) == Some("2") =>
                {
                    Seen::Ready(())
                }
                other => Seen::Waiting(format!("{other:?}")),
            }
        },
    )
    .await;
    s.create(queued_job(&s, "first").cpu("2").run_for("1h"))
        .await;
    let first = &s.assigned_worker("first").await.name;
    assert_eq!(
        first, KUEUE_WORKER,
        "listed first, its ClusterQueue has quota"
    );
    s.create(queued_job(&s, "second").cpu("2").run_for("1h"))
        .await;
    let second = &s.assigned_worker("second").await.name;
    assert_eq!(
        second, "worker-1",
        "not queued on worker-3 to wait: its ClusterQueue has no quota left"
    );
    s.finish(WAIT).await;
    drop_check_of_set(&manager, &set).await;
}

#[tokio::test]
async fn an_evicted_job_queued_on_its_worker_is_withdrawn_pods_first_and_placed_again() {
    let s = queued_on_worker("wevict", 1, 2, WORKER_CHECK).await;
    let uid = s
        .create(queued_job(&s, "paused").run_for("1h").terminate_after("3s"))
        .await;
    running_on_a_worker(&s, &uid, "the Job").await;
    let workload = workload_of(&s, "paused").await.name_any();
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    set_active(&workloads, &workload, false).await;
    wait::until(
        "quota released only once the worker's Pods are gone, the Job unplaced",
        WAIT,
        || async {
            let reserved = match workloads.get(&workload).await {
                Ok(w) => w.has("QuotaReserved"),
                Err(e) => return Seen::Waiting(e.to_string()),
            };
            let pods = match worker_pods_of(&s, &uid).await {
                Ok(pods) => pods,
                Err(e) => return Seen::Waiting(e),
            };
            assert!(
                reserved || pods == 0,
                "quota released while {pods} Pod(s) remain on worker-3"
            );
            let job = s.jobs.get("paused").await.expect("get");
            let placed = job.annotations().get(CLUSTER_KEY).cloned();
            match (reserved, pods, placed) {
                (false, 0, None) => Seen::Ready(()),
                other => Seen::Waiting(format!("reserved, Pods, cluster: {other:?}")),
            }
        },
    )
    .await;
    let mirrors: Api<Job> = s.worker_api(KUEUE_WORKER).await;
    assert!(
        mirrors.get_opt("paused").await.expect("get").is_none(),
        "worker-3's Kueue would run a mirror that is only suspended: it is deleted"
    );
    s.wait_event("paused", "MirrorWithdrawn").await;
    set_active(&workloads, &workload, true).await;
    running_on_a_worker(&s, &uid, "the readmitted Job").await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_mirror_the_workers_kueue_evicts_after_admission_sends_the_workload_back_and_runs_afresh()
{
    let s = queued_on_worker("wevicted", 1, 2, WORKER_CHECK).await;
    let uid = s.create(queued_job(&s, "evicted").run_for("1h")).await;
    running_on_a_worker(&s, &uid, "the Job").await;
    // Its Pod reported ready, the manager's Kueue counts it ready: nothing
    // there evicts it (`waitForPodsReady`).
    pod_ready_on_manager(&s, "evicted").await;
    let mirrors: Api<Job> = s.worker_api(KUEUE_WORKER).await;
    let first = mirrors.get("evicted").await.expect("the mirror").uid();

    // worker-3's Kueue evicts the mirror: its Workload there is deactivated,
    // as an administrator of worker-3 would (preemption does the same).
    let on_worker: Api<Workload> = s.worker_api(KUEUE_WORKER).await;
    let workload = wait::until("the mirror's Workload on worker-3", WAIT, || async {
        let list = match on_worker.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(e) => return Seen::Waiting(e.to_string()),
        };
        match list
            .into_iter()
            .find(|w| w.owner_job().is_some_and(|(name, _)| name == "evicted"))
        {
            Some(w) => Seen::Ready(w.name_any()),
            None => Seen::Waiting("no Workload yet".into()),
        }
    })
    .await;
    set_active(&on_worker, &workload, false).await;

    // The manager notices, says why, and sends the Workload back: the
    // mirror is withdrawn, and the Job, admitted again, placed afresh.
    let note = s.wait_event("evicted", "MirrorWithdrawalStarted").await;
    assert!(
        note.contains("cluster worker-3's Kueue evicted the mirror after admitting it"),
        "{note}"
    );
    s.wait_event("evicted", "MirrorWithdrawn").await;
    wait::until(
        "a new mirror admitted by worker-3's Kueue and running",
        Duration::from_secs(120),
        || async {
            let mirror = match mirrors.get_opt("evicted").await {
                Ok(mirror) => mirror,
                Err(e) => return Seen::Waiting(e.to_string()),
            };
            let running = live_worker_pods(&s).await.contains_key(&uid);
            match mirror {
                Some(m) if m.uid() != first && running => Seen::Ready(()),
                Some(m) => Seen::Waiting(format!(
                    "mirror {:?} (first {first:?}), Pods running: {running}",
                    m.uid()
                )),
                None => Seen::Waiting("no mirror".into()),
            }
        },
    )
    .await;
    let job = s.jobs.get("evicted").await.expect("get");
    assert_eq!(
        job.annotations()
            .get(WITHDRAWN_FROM_ANNOTATION)
            .map(String::as_str),
        Some(KUEUE_WORKER),
        "the cluster that evicted it is tried last (it is the only one here)"
    );
    s.finish(WAIT).await;
    quota_back_to_zero(&s).await;
}
