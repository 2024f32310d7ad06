//! The chart's observability pack as an operator switches it on: the
//! Grafana dashboard in a ConfigMap the sidecar loads, every alert with a
//! runbook that exists, and the log format of both binaries. That every
//! metric they query exists on a running manager and agent is proven in
//! `relay/observability.rs`.

use super::*;

/// Every alert the manager's and the agent's parts bring.
const ALERTS: [&str; 8] = [
    "JobrelayAgentCertificateExpiring",
    "JobrelayAgentVersionSkew",
    "JobrelayApplyRefusals",
    "JobrelayCertificateExpiring",
    "JobrelayClusterLost",
    "JobrelayDeletionsHeld",
    "JobrelayDispatchWaiting",
    "JobrelayNoLeader",
];

async fn rendered_with(extra: &[&str]) -> Rendered {
    let mut values = MANAGER_VALUES.to_vec();
    values.extend_from_slice(AGENT_VALUES);
    values.extend_from_slice(extra);
    render("jobrelay-system", &values).await
}

#[tokio::test]
async fn the_dashboard_is_a_configmap_the_grafana_sidecar_loads() {
    let objects = rendered_with(&[
        "--set",
        "metrics.grafanaDashboard.enabled=true",
        "--set",
        "metrics.grafanaDashboard.namespace=monitoring",
    ])
    .await
    .objects;
    let map: ConfigMap = object(&objects, "ConfigMap", "jobrelay-dashboard");
    assert_eq!(map.metadata.namespace.as_deref(), Some("monitoring"));
    assert_eq!(
        map.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("grafana_dashboard"))
            .map(String::as_str),
        Some("1"),
        "the sidecar's default label"
    );
    let json = map
        .data
        .as_ref()
        .and_then(|d| d.get("jobrelay.json"))
        .expect("the dashboard's JSON");
    let dashboard: Value = serde_json::from_str(json).expect("the dashboard is JSON");
    assert_eq!(dashboard["uid"], "jobrelay");
    let queries: Vec<&str> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|panel| panel["targets"].as_array().into_iter().flatten())
        .map(|target| target["expr"].as_str().expect("each target has a query"))
        .collect();
    assert!(queries.len() > 20, "{queries:?}");
    assert!(
        queries
            .iter()
            .all(|q| q.contains("namespace=~\"$namespace\"")),
        "each query reads the chosen release's namespace: {queries:?}"
    );
    let off = rendered_with(&[]).await.objects;
    assert!(
        !off.iter().any(|o| name(o) == "jobrelay-dashboard"),
        "no dashboard unless asked for"
    );
}

#[tokio::test]
async fn every_alert_links_to_its_runbook() {
    let objects = rendered_with(&["--set", "metrics.prometheusRule.enabled=true"])
        .await
        .objects;
    let rule = objects
        .iter()
        .find(|o| kind(o) == "PrometheusRule")
        .expect("the PrometheusRule");
    let runbooks = std::fs::read_to_string(chart().join("../../../docs/runbooks.md"))
        .expect("docs/runbooks.md");
    let headings: BTreeSet<String> = runbooks
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .map(str::to_lowercase)
        .collect();
    let mut alerts = BTreeSet::new();
    for alert in rule["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("rules")
    {
        let name = alert["alert"].as_str().expect("an alert");
        let url = alert["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} has a runbook_url"));
        let anchor = url
            .strip_prefix("https://github.com/jobrelay/jobrelay/blob/main/docs/runbooks.md#")
            .unwrap_or_else(|| panic!("{name}: {url} under the default runbookBaseURL"));
        assert!(
            headings.contains(anchor),
            "{name}: docs/runbooks.md has a section for #{anchor}: {headings:?}"
        );
        alerts.insert(name.to_string());
    }
    assert_eq!(alerts, BTreeSet::from(ALERTS.map(String::from)));
}

#[tokio::test]
async fn the_log_format_reaches_both_binaries_and_only_known_ones_render() {
    let objects = rendered_with(&["--set", "logFormat=json"]).await.objects;
    for (deployment, container_) in [("jobrelay-manager", "manager"), ("jobrelay-agent", "agent")] {
        let deployment: Deployment = object(&objects, "Deployment", deployment);
        assert_eq!(
            env(container(&deployment, container_), "JOBRELAY_LOG_FORMAT"),
            "json"
        );
    }
    let chart = chart();
    let out = helm(
        None,
        &[
            "template",
            RELEASE,
            chart.to_str().expect("chart path is UTF-8"),
            "--set",
            "origin=o",
            "--set",
            "logFormat=yaml",
        ],
    )
    .await;
    assert!(
        !out.success && out.stderr.contains("logFormat"),
        "an unknown format is refused, naming the value: {}",
        out.stderr
    );
}
