//! The agent's Deployment as the chart renders it: gRPC probes, certificates,
//! RBAC that lets it touch only Jobs, Pods and Events, and read Nodes and
//! Pods for its room reports only while they are on.

use super::*;

#[tokio::test]
async fn agent_deployment_is_probed_over_grpc_and_mounts_its_certificates() {
    let objects = render("jobrelay-system", AGENT_VALUES).await.objects;
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-agent");
    let agent = container(&deployment, "agent");

    assert_eq!(deployment.spec.as_ref().and_then(|s| s.replicas), Some(1));
    assert_grpc_probes(agent);
    assert_tls_mounted(&deployment, agent, "agent-tls", Some("JOBRELAY_MANAGER_CA"));
    assert_config_file(
        &objects,
        &deployment,
        agent,
        serde_json::json!({"namespaces": {"all": true}, "terminatedPods": {"succeededAfter": "1h", "dryRun": true}}),
    );
    assert_restricted(&deployment, agent);
    assert_eq!(env(agent, "JOBRELAY_ORIGIN"), ORIGIN);
    assert_eq!(env(agent, "JOBRELAY_CLUSTER"), "worker-1");
    assert_eq!(
        env(agent, "JOBRELAY_MANAGER_URL"),
        "https://jobrelay-manager.jobrelay-system:8443"
    );
}

#[tokio::test]
async fn agent_may_touch_only_jobs_jobsets_pods_and_events() {
    let objects = render("jobrelay-system", AGENT_VALUES).await.objects;
    let role: ClusterRole = object(&objects, "ClusterRole", "jobrelay-agent");
    let granted = grants(&role);
    let resources: BTreeSet<&str> = granted.iter().map(|(_, r)| r.as_str()).collect();
    // jobs/status: a mirror suspended after it started has its startTime
    // cleared, or the worker's Job controller would not resume it. JobSets:
    // mirrored where the worker serves them. pods/log: the manager's logs
    // API reads its mirrors' Pods' logs through it.
    assert_eq!(
        resources,
        BTreeSet::from([
            "jobs",
            "jobs/status",
            "jobsets",
            "pods",
            "pods/log",
            "events"
        ]),
        "agent grants: {granted:?}"
    );
    for (group, resource) in &granted {
        let expected: &[&str] = match resource.as_str() {
            "jobs" | "jobs/status" => &["batch"],
            "jobsets" => &["jobset.x-k8s.io"],
            "pods" | "pods/log" => &[""],
            // It records Events, and reads the worker's Warning Events.
            _ => &["events.k8s.io", ""],
        };
        assert!(
            expected.contains(&group.as_str()),
            "{resource} from the {expected:?} API groups, not {group:?}"
        );
    }
    // The worker's Events it reads, never writes.
    let core_event_verbs: BTreeSet<&str> = role
        .rules
        .iter()
        .flatten()
        .filter(|r| r.api_groups.iter().flatten().any(|g| g.is_empty()))
        .filter(|r| r.resources.iter().flatten().any(|x| x == "events"))
        .flat_map(|r| r.verbs.iter().map(String::as_str))
        .collect();
    assert_eq!(core_event_verbs, BTreeSet::from(["list", "watch"]));
    // The Job controller of the worker creates the Pods, never the agent.
    let pod_verbs: BTreeSet<&str> = role
        .rules
        .iter()
        .flatten()
        .filter(|r| r.resources.iter().flatten().any(|x| x == "pods"))
        .flat_map(|r| r.verbs.iter().map(String::as_str))
        .collect();
    assert!(
        !pod_verbs.contains("create") && !pod_verbs.contains("update"),
        "pods: {pod_verbs:?}"
    );
    // Of the logs, only get: nothing else pods/log offers.
    let log_verbs: BTreeSet<&str> = role
        .rules
        .iter()
        .flatten()
        .filter(|r| r.resources.iter().flatten().any(|x| x == "pods/log"))
        .flat_map(|r| r.verbs.iter().map(String::as_str))
        .collect();
    assert_eq!(log_verbs, BTreeSet::from(["get"]));

    // The binding gives the role to the agent's ServiceAccount only.
    let account = pod_spec(&object::<Deployment>(
        &objects,
        "Deployment",
        "jobrelay-agent",
    ))
    .service_account_name
    .clone()
    .expect("serviceAccountName");
    let binding: ClusterRoleBinding = object(&objects, "ClusterRoleBinding", "jobrelay-agent");
    assert_eq!(binding.role_ref.name, "jobrelay-agent");
    let subjects: Vec<(String, String)> = binding
        .subjects
        .iter()
        .flatten()
        .map(|s| (s.kind.clone(), s.name.clone()))
        .collect();
    assert_eq!(subjects, [("ServiceAccount".to_string(), account)]);

    // And the manager's role names no wildcard either.
    let manager = render("jobrelay-system", MANAGER_VALUES).await.objects;
    grants(&object::<ClusterRole>(
        &manager,
        "ClusterRole",
        "jobrelay-manager",
    ));
}

#[tokio::test]
async fn agent_reads_nodes_and_pods_for_its_room_only_while_room_reports_are_on() {
    let objects = render("jobrelay-system", AGENT_VALUES).await.objects;
    let role: ClusterRole = object(&objects, "ClusterRole", "jobrelay-agent-room");
    assert_eq!(
        rules_of(&role),
        BTreeSet::from([
            read("", "nodes", &["get", "list", "watch"]),
            read("", "pods", &["list", "watch"]),
        ]),
        "the room's role reads, and reads only Nodes and Pods"
    );
    let binding: ClusterRoleBinding = object(&objects, "ClusterRoleBinding", "jobrelay-agent-room");
    assert_eq!(binding.role_ref.name, "jobrelay-agent-room");
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-agent");
    let agent = container(&deployment, "agent");
    assert_eq!(env(agent, "JOBRELAY_ROOM"), "true");
    assert_eq!(env(agent, "JOBRELAY_ROOM_INTERVAL"), "2s");
    assert_eq!(env(agent, "JOBRELAY_ROOM_KUEUE"), "false");

    let mut values = AGENT_VALUES.to_vec();
    values.extend(["--set", "agent.room.kueue=true"]);
    let objects = render("jobrelay-system", &values).await.objects;
    let role: ClusterRole = object(&objects, "ClusterRole", "jobrelay-agent-room");
    assert_eq!(
        rules_of(&role),
        BTreeSet::from([
            read("", "nodes", &["get", "list", "watch"]),
            read("", "pods", &["list", "watch"]),
            read("kueue.x-k8s.io", "clusterqueues", &["get", "list", "watch"]),
            read("kueue.x-k8s.io", "localqueues", &["list", "watch"]),
        ]),
        "with the worker's Kueue, its queues are read too, and only read"
    );
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-agent");
    assert_eq!(
        env(container(&deployment, "agent"), "JOBRELAY_ROOM_KUEUE"),
        "true"
    );

    let mut values = AGENT_VALUES.to_vec();
    values.extend(["--set", "agent.room.enabled=false"]);
    let objects = render("jobrelay-system", &values).await.objects;
    assert!(
        !objects.iter().any(|o| name(o) == "jobrelay-agent-room"),
        "no room, no grant: {:?}",
        summary(&objects)
    );
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-agent");
    assert_eq!(
        env(container(&deployment, "agent"), "JOBRELAY_ROOM"),
        "false"
    );
}

#[tokio::test]
async fn agent_reads_the_workers_warning_events_only_while_it_tells_them() {
    let objects = render("jobrelay-system", AGENT_VALUES).await.objects;
    let role: ClusterRole = object(&objects, "ClusterRole", "jobrelay-agent");
    assert!(
        rules_of(&role).contains(&read("", "events", &["list", "watch"])),
        "{:?}",
        rules_of(&role)
    );
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-agent");
    assert_eq!(
        env(container(&deployment, "agent"), "JOBRELAY_WORKER_EVENTS"),
        "true"
    );

    let mut values = AGENT_VALUES.to_vec();
    values.extend(["--set", "agent.workerEvents=false"]);
    let objects = render("jobrelay-system", &values).await.objects;
    let role: ClusterRole = object(&objects, "ClusterRole", "jobrelay-agent");
    assert!(
        !rules_of(&role)
            .iter()
            .any(|(group, resource, _)| group.is_empty() && resource == "events"),
        "no telling, no reading: {:?}",
        rules_of(&role)
    );
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-agent");
    assert_eq!(
        env(container(&deployment, "agent"), "JOBRELAY_WORKER_EVENTS"),
        "false"
    );
}

/// A role's rules as (API group, resource, verbs), one per resource.
fn rules_of(role: &ClusterRole) -> BTreeSet<(String, String, Vec<String>)> {
    role.rules
        .iter()
        .flatten()
        .flat_map(|rule| {
            let groups = rule.api_groups.clone().unwrap_or_default();
            let resources = rule.resources.clone().unwrap_or_default();
            groups.into_iter().flat_map(move |group| {
                let verbs = rule.verbs.clone();
                resources
                    .clone()
                    .into_iter()
                    .map(move |resource| (group.clone(), resource, verbs.clone()))
            })
        })
        .collect()
}

fn read(group: &str, resource: &str, verbs: &[&str]) -> (String, String, Vec<String>) {
    let verbs = verbs.iter().map(|v| v.to_string()).collect();
    (group.to_string(), resource.to_string(), verbs)
}

#[tokio::test]
async fn by_default_the_agent_opens_no_namespace_and_is_granted_nothing_on_mirrors() {
    let values: Vec<&str> = AGENT_VALUES
        .iter()
        .copied()
        .filter(|v| *v != "--set-json" && !v.starts_with("agent.config="))
        .collect();
    let objects = render("jobrelay-system", &values).await.objects;
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-agent");
    assert_config_file(
        &objects,
        &deployment,
        container(&deployment, "agent"),
        serde_json::json!({"namespaces": {"names": []}}),
    );
    let grants: Vec<String> = objects
        .iter()
        .filter(|o| matches!(kind(o), "Role" | "ClusterRole") && name(o) != "jobrelay-agent-room")
        .map(|o| format!("{}/{}", kind(o), name(o)))
        .collect();
    assert!(
        grants.is_empty(),
        "no namespace open, no grant on Jobs, JobSets or Pods: {grants:?}"
    );
}

#[tokio::test]
async fn network_policies_let_in_only_each_components_own_ports() {
    let ports = |policy: &Value| -> BTreeSet<i64> {
        policy["spec"]["ingress"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|rule| rule["ports"].as_array().cloned().unwrap_or_default())
            .filter_map(|port| port["port"].as_i64())
            .collect()
    };
    let policy = |objects: &[Value], name_: &str| -> Value {
        let found: Vec<&Value> = objects
            .iter()
            .filter(|o| kind(o) == "NetworkPolicy" && name(o) == name_)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "one NetworkPolicy {name_}: {:?}",
            summary(objects)
        );
        assert_eq!(
            found[0]["spec"]["policyTypes"],
            serde_json::json!(["Ingress"])
        );
        found[0].clone()
    };
    let agent = render("jobrelay-system", AGENT_VALUES).await.objects;
    let agent = policy(&agent, "jobrelay-agent");
    assert_eq!(
        ports(&agent),
        BTreeSet::from([8081, 9090]),
        "the agent dials out; only its probes and metrics are reached"
    );

    let mut values = MANAGER_VALUES.to_vec();
    let from = r#"manager.networkPolicy.relayFrom=[{"ipBlock":{"cidr":"192.0.2.0/24"}}]"#;
    values.extend(["--set-json", from]);
    let manager = render("jobrelay-system", &values).await.objects;
    let manager = policy(&manager, "jobrelay-manager");
    assert_eq!(
        ports(&manager),
        BTreeSet::from([8443, 9443, 8081, 9090]),
        "the Relay, the webhook, the probes, the metrics"
    );
    let relay = manager["spec"]["ingress"]
        .as_array()
        .and_then(|rules| rules.iter().find(|r| r["ports"][0]["port"] == 8443))
        .expect("a rule for the Relay");
    assert_eq!(
        relay["from"],
        serde_json::json!([{"ipBlock": {"cidr": "192.0.2.0/24"}}]),
        "only from the given sources"
    );

    let mut values = AGENT_VALUES.to_vec();
    values.extend(["--set", "agent.networkPolicy.enabled=false"]);
    let objects = render("jobrelay-system", &values).await.objects;
    assert!(
        !objects.iter().any(|o| kind(o) == "NetworkPolicy"),
        "switched off: none"
    );
}
