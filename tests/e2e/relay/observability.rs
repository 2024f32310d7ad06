//! What the chart's dashboard and alerts query is there to be queried: every
//! metric name in `dashboards/jobrelay.json` and `templates/prometheusrule.yaml`
//! is one a running manager or agent serves on `/metrics`, once the events
//! it counts have happened.

use std::collections::BTreeSet;

use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_proto::wire::CLUSTER_KEY;
use jobrelay_testbed::deploy::helm::chart;
use jobrelay_testbed::kit;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams};

/// The samples a family of that name is written as.
const SUFFIXES: [&str; 6] = ["", "_total", "_bucket", "_sum", "_count", "_created"];

/// The metric names `text` mentions: words of `[a-z0-9_]` that begin with
/// jobrelay's prefix or the standard process one.
fn metric_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
        .filter(|word| word.starts_with("jobrelay_") || word.starts_with("process_"))
        .map(str::to_string)
        .collect()
}

/// The families a scrape declares (`# TYPE <name> <type>`).
fn families(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Reads `/metrics` of the manager and of the agent of `worker` into
/// `served`.
async fn scrape(s: &Scenario, worker: &str, served: &mut BTreeSet<String>) {
    served.extend(families(
        &s.relay.metrics().await.expect("the manager's metrics"),
    ));
    served.extend(families(
        &s.relay
            .agent_metrics(worker)
            .await
            .expect("an agent's metrics"),
    ));
}

/// Waits until the manager shows a series of the counter `name`.
async fn wait_counted(s: &Scenario, name: &str) {
    let series = format!("{name}{{");
    wait::until(format!("{name} counted"), WAIT, || async {
        match s.relay.metrics().await {
            Ok(text) if text.contains(&series) => Seen::Ready(()),
            Ok(_) => Seen::Waiting("not yet".into()),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
}

/// Counters and histograms show from their first event, so the relay goes
/// through the events the dashboard and alerts count before it is read: a
/// refusal (the namespace missing on the worker), a Job that runs to its
/// end, a mirror lost behind jobrelay's back.
#[tokio::test]
async fn every_metric_the_dashboard_and_the_alerts_query_is_served() {
    let (clusters, relay) = kit::relay().await;
    let manager = kit::client(clusters.manager()).await;
    let ns = kit::namespace(&manager, "observe").await;
    let s = Scenario {
        clusters,
        relay,
        jobs: Api::namespaced(manager, &ns),
        ns,
    };
    let worker = s.clusters.workers()[0].name.clone();
    s.create(s.job("refused").label(CLUSTER_KEY, &worker).run_for("2s"))
        .await;
    wait_counted(&s, "jobrelay_apply_refusals_total").await;
    kit::create_namespace(&kit::client(s.worker(&worker)).await, &s.ns).await;
    s.wait_condition("refused", "Complete").await;
    s.wait_released("refused").await;

    let uid = s
        .create(s.job("lost").label(CLUSTER_KEY, &worker).run_for("10m"))
        .await;
    s.wait_worker_pods(s.worker(&worker), &uid, 1, "Running")
        .await;
    let mut served = BTreeSet::new();
    scrape(&s, &worker, &mut served).await;
    let mirrors: Api<Job> = s.worker_api(&worker).await;
    mirrors
        .delete("lost", &DeleteParams::background())
        .await
        .expect("deleting the mirror on its worker");
    wait_counted(&s, "jobrelay_mirrors_lost_total").await;
    scrape(&s, &worker, &mut served).await;
    assert!(
        served.contains("process_resident_memory_bytes"),
        "the processes' own metrics are served: {served:?}"
    );

    let chart = chart();
    for file in ["dashboards/jobrelay.json", "templates/prometheusrule.yaml"] {
        let text = std::fs::read_to_string(chart.join(file)).expect("the chart's file");
        let queried = metric_names(&text);
        assert!(queried.len() >= 5, "{file} queries metrics: {queried:?}");
        let missing: Vec<&String> = queried
            .iter()
            .filter(|name| {
                !SUFFIXES.iter().any(|suffix| {
                    name.strip_suffix(suffix)
                        .is_some_and(|family| served.contains(family))
                })
            })
            .collect();
        assert!(
            missing.is_empty(),
            "{file} queries metrics no manager or agent serves: {missing:?}\nserved: {served:?}"
        );
    }
    s.finish(WAIT).await;
}
