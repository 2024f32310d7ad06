//! When the AdmissionCheck is usable: not when a ClusterQueue lists it for
//! some flavors only; and a Job no cluster can take, behind a queue that
//! preempts, is sent back with growing delays, saying why, and preempts a
//! lower-priority Job at most once per try.

use super::*;
use serde_json::Value;

/// The ClusterQueue `s.ns` (2 CPUs, flavor `default`) behind `check`,
/// listed `onFlavors` the default flavor if `per_flavor`, and the LocalQueue
/// in the scenario's namespace; without waiting for the queue to be active.
async fn queue_listing(client: &kube::Client, s: &Scenario, check: &str, per_flavor: bool) {
    let mut rule = json!({"name": check});
    if per_flavor {
        rule["onFlavors"] = json!([kueue_objects::FLAVOR]);
    }
    let cluster_queue = json!({
        "metadata": {"name": s.ns},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": s.ns}},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": kueue_objects::FLAVOR, "resources": [{"name": "cpu", "nominalQuota": "2"}]},
            ]}],
            "admissionChecksStrategy": {"admissionChecks": [rule]},
        },
    });
    let local_queue = json!({
        "metadata": {"name": LOCAL_QUEUE, "namespace": s.ns},
        "spec": {"clusterQueue": s.ns},
    });
    let applied = async {
        kueue_objects::apply(client, "ClusterQueue", None, cluster_queue).await?;
        kueue_objects::apply(client, "LocalQueue", Some(&s.ns), local_queue).await
    };
    applied.await.unwrap_or_else(|e| panic!("{e:#}"));
}

#[tokio::test]
async fn a_check_listed_for_some_flavors_only_is_inactive_saying_so_until_listed_for_all() {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, "perflavor").await;
    let client = kit::client(clusters.manager()).await;
    let check = format!("perflavor-{}", s.ns);
    check_of_set(
        &client,
        &check,
        &["worker-1", "worker-2"],
        SetPlacement::MostRoom,
    )
    .await;
    queue_listing(&client, &s, &check, true).await;
    let message = check_active(&client, &check, "False", "AppliedPerFlavor").await;
    assert!(
        message.contains(&format!("ClusterQueue {}", s.ns)) && message.contains("onFlavors"),
        "the check names the ClusterQueue and what to change: {message}"
    );
    let queues = kueue_objects::api(&client, "ClusterQueue", None);
    let inactive = wait::until(
        "Kueue shows the ClusterQueue inactive for the check",
        WAIT,
        || async {
            let queue = match queues.get(&s.ns).await {
                Ok(q) => q,
                Err(e) => return Seen::Waiting(e.to_string()),
            };
            let active = queue.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Active")
                .cloned();
            match active {
                Some(c) if c["status"] == "False" => Seen::Ready(c["message"].to_string()),
                other => Seen::Waiting(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(inactive.contains(&check), "{inactive}");
    let uid = s.create(queued_job(&s, "pf").run_for("1s")).await;
    let workload = workload_of(&s, "pf").await;
    assert!(
        !workload.has("QuotaReserved"),
        "no quota is reserved behind an inactive check: {:?}",
        workload.status
    );
    assert!(
        !s.mirrors().await.expect("mirrors").contains_key(&uid),
        "nothing is placed for it"
    );
    queue_listing(&client, &s, &check, false).await;
    check_active(&client, &check, "True", "Active").await;
    s.wait_condition("pf", "Complete").await;
    quota_back_to_zero(&s).await;
    s.finish(WAIT).await;
    let _ = queues.delete(&s.ns, &Default::default()).await;
    drop_check_of_set(&client, &check).await;
}

/// The Workload of Job `job`, as Kueue wrote it (with the fields jobrelay
/// does not read: retry delays, eviction counts).
async fn workload_json(s: &Scenario, job: &str) -> Value {
    let workload = workload_of(s, job).await;
    let workloads = kueue_objects::api(&s.jobs.clone().into_client(), "Workload", Some(&s.ns));
    match workloads.get(&workload.name_any()).await {
        Ok(raw) => raw.data,
        Err(e) => panic!("Workload of {job}: {e}"),
    }
}

/// The state of check `name` in a Workload's JSON.
fn check_state<'a>(workload: &'a Value, name: &str) -> &'a Value {
    workload["status"]["admissionChecks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name)
        .unwrap_or(&Value::Null)
}

/// How many times a Workload (its JSON) was evicted for `reason`.
fn evictions(workload: &Value, reason: &str) -> i64 {
    workload["status"]["schedulingStats"]["evictions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == reason)
        .filter_map(|e| e["count"].as_i64())
        .sum()
}

/// Whether the check's state or a condition of the Workload (its JSON)
/// says `text`: Kueue copies a `Retry`'s message into the eviction's.
fn says(workload: &Value, check: &str, text: &str) -> bool {
    let conditions = workload["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten();
    std::iter::once(check_state(workload, check))
        .chain(conditions)
        .any(|c| c["message"].as_str().is_some_and(|m| m.contains(text)))
}

#[tokio::test]
async fn a_job_no_cluster_can_take_is_sent_back_ever_later_saying_why_and_preempts_once_per_try() {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, "noplace").await;
    let client = kit::client(clusters.manager()).await;
    // A check that allows any cluster, so a pin outside the fleet is not
    // refused for good: the Job waits for that cluster to connect.
    let check = format!("anywhere-{}", s.ns);
    let queued = async {
        kueue_objects::admission_check(&client, &check, None).await?;
        kueue_objects::queue(&client, &s.ns, &s.ns, 1, &check).await
    };
    queued.await.unwrap_or_else(|e| panic!("{e:#}"));
    let low = s
        .create(
            queued_job(&s, "low")
                .label(PRIORITY_CLASS, "low")
                .label(CLUSTER_KEY, "worker-1")
                .run_for("20s"),
        )
        .await;
    running_on_a_worker(&s, &low, "the low-priority Job").await;
    // Pinned to a cluster that has no agent: nothing can take it.
    s.create(
        queued_job(&s, "high")
            .label(PRIORITY_CLASS, "high")
            .label(CLUSTER_KEY, "worker-9"),
    )
    .await;
    let why = "pinned to cluster worker-9";
    wait::until(
        "the high Workload sent back a second time, asked to wait twice as long, saying why",
        WAIT,
        || async {
            let high = workload_json(&s, "high").await;
            let state = check_state(&high, &check);
            let retries = state["retryCount"].as_i64().unwrap_or(0);
            let after = state["requeueAfterSeconds"].as_i64().unwrap_or(0);
            match (retries, after, says(&high, &check, why)) {
                (r, 20, true) if r >= 1 => Seen::Ready(()),
                _ => Seen::Waiting(format!("{state}")),
            }
        },
    )
    .await;
    let (low_json, high_json) = (
        workload_json(&s, "low").await,
        workload_json(&s, "high").await,
    );
    let (preempted, sent_back) = (
        evictions(&low_json, "Preempted"),
        evictions(&high_json, "AdmissionCheck"),
    );
    assert!(
        preempted >= 1 && preempted <= sent_back + 1,
        "each try of the high Job preempts the low one at most once: preempted {preempted} times, high sent back {sent_back} times"
    );
    s.jobs
        .delete("high", &Default::default())
        .await
        .expect("delete the high Job");
    s.wait_condition("low", "Complete").await;
    quota_back_to_zero(&s).await;
    s.finish(WAIT).await;
    let _ = kueue_objects::api(&client, "ClusterQueue", None)
        .delete(&s.ns, &Default::default())
        .await;
    let _ = Api::<AdmissionCheck>::all(client)
        .delete(&check, &Default::default())
        .await;
}

/// Label of the namespace worker-1 and worker-2 refuse while
/// [`a_job_whose_namespace_no_cluster_admits_is_rejected_and_the_job_it_preempted_runs_again`]
/// runs (every other scenario's namespace lacks it).
const REFUSED_LABEL: &str = "jobrelay-e2e/refused";

/// Sets the `spec.namespaceSelector` of the shared check's clusters:
/// refusing namespaces labelled [`REFUSED_LABEL`], or none (`None`).
async fn refuse_labelled_namespaces(client: &kube::Client, selector: Option<Value>) {
    let clusters: Api<WorkerCluster> = Api::all(client.clone());
    for cluster in ["worker-1", "worker-2"] {
        let patch = json!({"spec": {"namespaceSelector": selector}});
        clusters
            .patch(cluster, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("WorkerCluster {cluster}'s namespaceSelector: {e}"));
    }
}

#[tokio::test]
async fn a_job_whose_namespace_no_cluster_admits_is_rejected_and_the_job_it_preempted_runs_again() {
    let (clusters, relay) = setup().await;
    let ok = queued("nsok", 1).await;
    let refused = Scenario::new(clusters, relay, "nsrefused").await;
    let client = kit::client(clusters.manager()).await;
    // One ClusterQueue for both namespaces; the check's clusters refuse
    // the second.
    let shared = async {
        let queues = kueue_objects::api(&client, "ClusterQueue", None);
        let both = json!({"spec": {"namespaceSelector": {"matchLabels": null, "matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "In",
            "values": [ok.ns, refused.ns],
        }]}}});
        queues
            .patch(&ok.ns, &PatchParams::default(), &Patch::Merge(both))
            .await?;
        let local_queue = json!({
            "metadata": {"name": LOCAL_QUEUE, "namespace": refused.ns},
            "spec": {"clusterQueue": ok.ns},
        });
        kueue_objects::apply(&client, "LocalQueue", Some(&refused.ns), local_queue).await?;
        let label = json!({"metadata": {"labels": {REFUSED_LABEL: "true"}}});
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .patch(&refused.ns, &PatchParams::default(), &Patch::Merge(label))
            .await?;
        anyhow::Ok(())
    };
    shared.await.unwrap_or_else(|e| panic!("{e:#}"));
    refuse_labelled_namespaces(
        &client,
        Some(json!({"matchExpressions": [{"key": REFUSED_LABEL, "operator": "DoesNotExist"}]})),
    )
    .await;
    let low = ok
        .create(
            queued_job(&ok, "low")
                .label(PRIORITY_CLASS, "low")
                .run_for("15s"),
        )
        .await;
    running_on_a_worker(&ok, &low, "the low-priority Job").await;
    refused
        .create(queued_job(&refused, "high").label(PRIORITY_CLASS, "high"))
        .await;
    let note = refused.wait_event("high", "AdmissionCheckRejected").await;
    assert!(
        note.contains(&format!("admits namespace {}", refused.ns)) && note.contains("spec.active"),
        "the Job says why and how to resume: {note}"
    );
    let workloads = kueue_objects::api(&client, "Workload", Some(&refused.ns));
    let high = workload_of(&refused, "high").await.name_any();
    wait::until("Kueue deactivates the high Workload", WAIT, || async {
        match workloads.get(&high).await {
            Ok(w) if w.data["spec"]["active"] == false => Seen::Ready(()),
            Ok(w) => Seen::Waiting(format!("{}", w.data["spec"])),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    ok.wait_condition("low", "Complete").await;
    let preempted = evictions(&workload_json(&ok, "low").await, "Preempted");
    assert!(
        preempted <= 1,
        "the high Job preempted the low one {preempted} times: once at most, then it was rejected"
    );
    refuse_labelled_namespaces(&client, None).await;
    quota_back_to_zero(&ok).await;
    refused.finish(WAIT).await;
    ok.finish(WAIT).await;
    let _ = kueue_objects::api(&client, "ClusterQueue", None)
        .delete(&ok.ns, &Default::default())
        .await;
}
