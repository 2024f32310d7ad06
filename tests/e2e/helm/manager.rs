//! The manager's Deployment and Services as the chart renders them: gRPC
//! probes, certificates, replicas electing a leader and spread over nodes.

use super::*;

#[tokio::test]
async fn manager_deployment_is_probed_over_grpc_and_mounts_its_certificates() {
    let objects = render("jobrelay-system", MANAGER_VALUES).await.objects;
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-manager");
    let manager = container(&deployment, "manager");

    assert_grpc_probes(manager);
    // The agents' CA is a bundle of its own (helm/client_ca.rs).
    assert_tls_mounted(&deployment, manager, "manager-tls", None);
    assert_config_file(
        &objects,
        &deployment,
        manager,
        serde_json::json!({
            "retention": {"remoteAfterFinished": "10m", "managerAfterFinished": "24h"},
            "deletionsPerSecond": 5,
        }),
    );
    assert_restricted(&deployment, manager);
    assert_eq!(env(manager, "JOBRELAY_ORIGIN"), ORIGIN);
    assert_eq!(
        manager
            .image
            .as_deref()
            .map(|i| i.starts_with("jobrelay/manager:")),
        Some(true),
        "image {:?}",
        manager.image
    );

    // Agents dial the Service's grpc port, which leads to the Relay listener
    // of the leader alone: the Pod it labels. Metrics are on a Service of
    // their own, never published with the agents' one.
    let pod_labels = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let service: Service = object(&objects, "Service", "jobrelay-manager");
    let spec = service.spec.expect("Service spec");
    assert_eq!(service_ports(&spec), [("grpc".to_string(), 8443)]);
    let mut selector = spec.selector.clone().unwrap_or_default();
    assert_eq!(
        selector.remove(LEADER_LABEL).as_deref(),
        Some("true"),
        "the agents' Service selects the leader"
    );
    assert_selects(&selector, &pod_labels);
    let metrics: Service = object(&objects, "Service", "jobrelay-manager-metrics");
    let spec = metrics.spec.expect("Service spec");
    assert_eq!(service_ports(&spec), [("metrics".to_string(), 9090)]);
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_selects(&spec.selector.unwrap_or_default(), &pod_labels);
    assert_eq!(env(manager, "JOBRELAY_LISTEN"), "$(POD_IP):8443");
    assert_eq!(env(manager, "JOBRELAY_METRICS_LISTEN"), "$(POD_IP):9090");
}

/// A Service's ports by name.
fn service_ports(spec: &k8s_openapi::api::core::v1::ServiceSpec) -> Vec<(String, i32)> {
    spec.ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap_or_default(), p.port))
        .collect()
}

/// Fails unless every label of `selector` is on the Pod.
fn assert_selects(
    selector: &std::collections::BTreeMap<String, String>,
    pod_labels: &std::collections::BTreeMap<String, String>,
) {
    assert!(!selector.is_empty(), "a selector");
    for (key, value) in selector {
        assert_eq!(
            pod_labels.get(key),
            Some(value),
            "the Service selects the manager Pods by {key}"
        );
    }
}

#[tokio::test]
async fn manager_replicas_elect_a_leader_on_a_lease_and_spread_over_nodes() {
    let objects = render("jobrelay-system", MANAGER_VALUES).await.objects;
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-manager");
    let spec = deployment.spec.as_ref().expect("Deployment spec");
    assert_eq!(spec.replicas, Some(2), "two replicas by default");
    let manager = container(&deployment, "manager");
    let from_field = |name: &str| {
        manager
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value_from.as_ref()?.field_ref.as_ref())
            .map(|f| f.field_path.clone())
    };
    assert_eq!(
        from_field("JOBRELAY_IDENTITY").as_deref(),
        Some("metadata.name"),
        "each replica is named in the Lease after its Pod"
    );
    assert_eq!(
        from_field("JOBRELAY_LEASE_NAMESPACE").as_deref(),
        Some("metadata.namespace")
    );
    assert_eq!(
        from_field("JOBRELAY_POD_NAME").as_deref(),
        Some("metadata.name"),
        "the leader labels its own Pod"
    );
    assert_eq!(env(manager, "JOBRELAY_LEASE_NAME"), "jobrelay-manager");
    assert_eq!(env(manager, "JOBRELAY_LEASE_DURATION"), "15s");
    assert_eq!(env(manager, "JOBRELAY_RENEW_DEADLINE"), "10s");
    assert_eq!(env(manager, "JOBRELAY_RETRY_PERIOD"), "2s");
    let spread = pod_spec(&deployment)
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .expect("the replicas prefer different nodes");
    assert_eq!(
        spread[0].pod_affinity_term.topology_key,
        "kubernetes.io/hostname"
    );

    let budget: PodDisruptionBudget = object(&objects, "PodDisruptionBudget", "jobrelay-manager");
    let budget = budget.spec.expect("PodDisruptionBudget spec");
    assert_eq!(budget.min_available, Some(IntOrString::Int(1)));
    let pod_labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    for (key, value) in budget
        .selector
        .and_then(|s| s.match_labels)
        .unwrap_or_default()
    {
        assert_eq!(
            pod_labels.get(&key),
            Some(&value),
            "the budget selects the manager Pods"
        );
    }

    // The Lease, the label on its own Pod, the placement key and the
    // webhook's and logs API's own certificates, in its namespace only; of
    // Secrets, it reads those three alone.
    let role: Role = object(&objects, "Role", "jobrelay-manager-leader-election");
    let rules: Vec<(Vec<String>, Vec<String>, Vec<String>)> = role
        .rules
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            let names = r.resource_names.unwrap_or_default();
            (r.resources.unwrap_or_default(), names, r.verbs)
        })
        .collect();
    let strings = |items: &[&str]| items.iter().map(|i| i.to_string()).collect::<Vec<_>>();
    assert_eq!(
        rules,
        [
            (
                strings(&["leases"]),
                vec![],
                strings(&["get", "create", "update"])
            ),
            (strings(&["pods"]), vec![], strings(&["get", "patch"])),
            (
                strings(&["secrets"]),
                strings(&["jobrelay-placement-key"]),
                strings(&["get", "patch"])
            ),
            (
                strings(&["secrets"]),
                strings(&["jobrelay-manager-webhook-certs"]),
                strings(&["get", "update"])
            ),
            (
                strings(&["secrets"]),
                strings(&["jobrelay-manager-visibility-certs"]),
                strings(&["get", "update"])
            ),
            (strings(&["secrets"]), vec![], strings(&["create"])),
        ]
    );
    let env = &spec.template.spec.as_ref().expect("a pod spec").containers[0].env;
    let key = env
        .iter()
        .flatten()
        .find(|e| e.name == "JOBRELAY_PLACEMENT_KEY_SECRET");
    assert_eq!(
        key.and_then(|e| e.value.as_deref()),
        Some("jobrelay-placement-key"),
        "the manager reads the key the role names"
    );

    let single = [MANAGER_VALUES, &["--set", "manager.replicas=1"]].concat();
    let objects = render("jobrelay-system", &single).await.objects;
    assert!(
        !objects.iter().any(|o| kind(o) == "PodDisruptionBudget"),
        "one replica has no budget to keep: {:?}",
        summary(&objects)
    );
}

#[tokio::test]
async fn an_image_digest_pins_each_image_and_a_malformed_one_is_refused() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    let manager_digest = format!("manager.image.digest={digest}");
    let agent_digest = format!("agent.image.digest={digest}");
    let values = [
        MANAGER_VALUES,
        AGENT_VALUES,
        &["--set", &manager_digest, "--set", &agent_digest],
    ]
    .concat();
    let objects = render("jobrelay-system", &values).await.objects;
    for (name, container_, repository) in [
        ("jobrelay-manager", "manager", "jobrelay/manager"),
        ("jobrelay-agent", "agent", "jobrelay/agent"),
    ] {
        let deployment: Deployment = object(&objects, "Deployment", name);
        assert_eq!(
            container(&deployment, container_).image.as_deref(),
            Some(format!("{repository}:{}@{digest}", env!("CARGO_PKG_VERSION")).as_str())
        );
    }
    let malformed = [MANAGER_VALUES, &["--set", "manager.image.digest=latest"]].concat();
    let chart = chart();
    let mut args = vec![
        "template",
        RELEASE,
        chart.to_str().expect("chart path is UTF-8"),
        "--set",
        "origin=o",
    ];
    args.extend_from_slice(&malformed);
    let out = helm(None, &args).await;
    assert!(
        !out.success && out.stderr.contains("digest"),
        "a digest that is not sha256:<hex> is refused, naming the value: {}",
        out.stderr
    );
}
