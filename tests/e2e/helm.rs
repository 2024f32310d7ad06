//! The Helm chart (`deploy/helm/jobrelay`) as an operator meets it: it lints
//! clean; every object it renders for the manager (with the WorkerCluster CRD)
//! and for the agent is accepted by a real kube-apiserver in a server-side
//! dry run with strict field validation; and the rendered objects hold what
//! matters — gRPC probes on the health port, the TLS Secret mounted where the
//! flags point, the configuration file from values, RBAC the agent cannot
//! exceed. Rendering uses the pinned helm built by `cargo xtask k8s`.

use std::collections::BTreeSet;

use jobrelay_e2e::controlplane;
use jobrelay_e2e::helm::{chart, helm, run};
use jobrelay_e2e::kit::{self, clusters};
use jobrelay_proto::wire::LEADER_LABEL;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde_json::Value;

#[path = "helm/client_ca.rs"]
mod client_ca;
#[path = "helm/webhook.rs"]
mod webhook;

const RELEASE: &str = "jobrelay";
const ORIGIN: &str = "helm-e2e";
const HEALTH_PORT: i32 = 8081;
const READY_SERVICE: &str = "jobrelay.v1.Relay";
const TLS_DIR: &str = "/etc/jobrelay/tls";
const CRD_NAME: &str = "workerclusters.jobrelay.dev";
/// The CRD of the sets of clusters a Kueue AdmissionCheck may name.
const SET_CRD_NAME: &str = "workerclustersets.jobrelay.dev";
/// Values that switch on the manager, with a configuration file.
const MANAGER_VALUES: &[&str] = &[
    "--set",
    "manager.enabled=true",
    "--set",
    "manager.tls.secretName=manager-tls",
    "--set-json",
    r#"manager.config={"retention":{"remoteAfterFinished":"10m","managerAfterFinished":"24h"},"deletionsPerSecond":5}"#,
];

/// Values that switch on the agent, with a configuration file.
const AGENT_VALUES: &[&str] = &[
    "--set",
    "agent.enabled=true",
    "--set",
    "agent.managerUrl=https://jobrelay-manager.jobrelay-system:8443",
    "--set",
    "agent.cluster=worker-1",
    "--set",
    "agent.tls.secretName=agent-tls",
    "--set-json",
    r#"agent.config={"terminatedPods":{"succeededAfter":"1h","dryRun":true}}"#,
];

/// What `helm template` printed, and the objects in it.
struct Rendered {
    yaml: String,
    objects: Vec<Value>,
}

/// `helm template` of the chart into `namespace`; panics with helm's message
/// if it fails.
async fn render(namespace: &str, values: &[&str], include_crds: bool) -> Rendered {
    let chart = chart();
    let origin = format!("origin={ORIGIN}");
    let mut args = vec![
        "template",
        RELEASE,
        chart.to_str().expect("chart path is UTF-8"),
        "--namespace",
        namespace,
        "--set",
        &origin,
    ];
    if include_crds {
        args.push("--include-crds");
    }
    args.extend_from_slice(values);
    let out = helm(None, &args).await;
    assert!(out.success, "helm {args:?} failed:\n{}", out.stderr);
    Rendered {
        objects: documents(&out.stdout),
        yaml: out.stdout,
    }
}

/// The objects of a multi-document YAML stream, empty documents left out.
fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|document| Value::deserialize(document).expect("rendered YAML parses"))
        .filter(|object| !object.is_null())
        .collect()
}

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// The one object of `kind` named `name`, as a typed value.
fn object<T: serde::de::DeserializeOwned>(objects: &[Value], kind_: &str, name_: &str) -> T {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| kind(o) == kind_ && name(o) == name_)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "exactly one {kind_} {name_} among {:?}",
        summary(objects)
    );
    serde_json::from_value(found[0].clone())
        .unwrap_or_else(|e| panic!("{kind_} {name_} is not a valid {kind_}: {e}"))
}

fn summary(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| format!("{}/{}", kind(o), name(o)))
        .collect()
}

/// How kubectl names an object in its output: `deployment.apps/jobrelay-manager`.
fn kubectl_name(object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = kind(object).to_lowercase();
    match api_version.split_once('/') {
        Some((group, _)) => format!("{kind}.{group}/{}", name(object)),
        None => format!("{kind}/{}", name(object)),
    }
}

/// Applies what helm printed to the manager test cluster with a server-side
/// dry run and strict field validation, and asserts that each object was
/// accepted.
async fn assert_accepted_by_api_server(rendered: &Rendered) {
    let objects = &rendered.objects;
    let cluster = clusters(0).manager();
    let kubectl = controlplane::cached()
        .unwrap_or_else(|e| panic!("{e}"))
        .path("kubectl");
    let mut command = tokio::process::Command::new(kubectl);
    command.arg("--kubeconfig").arg(&cluster.kubeconfig).args([
        "apply",
        "--server-side",
        "--dry-run=server",
        "--validate=strict",
        "--field-manager=jobrelay-helm-e2e",
        "-f",
        "-",
    ]);
    let out = run(command, Some(&rendered.yaml)).await;
    assert!(
        out.success,
        "the API server refused the chart's objects:\n{}\n{}",
        out.stderr, out.stdout
    );
    let accepted: BTreeSet<&str> = out.stdout.lines().map(str::trim).collect();
    for object in objects {
        let line = format!(
            "{} serverside-applied (server dry run)",
            kubectl_name(object)
        );
        assert!(
            accepted.contains(line.as_str()),
            "kubectl did not report {line:?}; it said:\n{}",
            out.stdout
        );
    }
    assert_eq!(
        accepted.len(),
        objects.len(),
        "one line per object:\n{}",
        out.stdout
    );
}

fn pod_spec(deployment: &Deployment) -> &PodSpec {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod spec")
}

fn container<'a>(deployment: &'a Deployment, name_: &str) -> &'a Container {
    pod_spec(deployment)
        .containers
        .iter()
        .find(|c| c.name == name_)
        .unwrap_or_else(|| panic!("container {name_}"))
}

fn env<'a>(container: &'a Container, name_: &str) -> &'a str {
    container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == name_)
        .and_then(|e| e.value.as_deref())
        .unwrap_or_else(|| panic!("env {name_} on container {}", container.name))
}

/// Liveness asks the health port's overall service, readiness asks
/// `jobrelay.v1.Relay`, both over gRPC.
fn assert_grpc_probes(container: &Container) {
    let liveness = container
        .liveness_probe
        .as_ref()
        .and_then(|p| p.grpc.as_ref())
        .unwrap_or_else(|| panic!("{}: a grpc liveness probe", container.name));
    assert_eq!(
        liveness.port, HEALTH_PORT,
        "{}: liveness port",
        container.name
    );
    assert_eq!(
        liveness.service.as_deref().unwrap_or(""),
        "",
        "{}: liveness asks the process, not the Relay",
        container.name
    );
    let readiness = container
        .readiness_probe
        .as_ref()
        .and_then(|p| p.grpc.as_ref())
        .unwrap_or_else(|| panic!("{}: a grpc readiness probe", container.name));
    assert_eq!(
        readiness.port, HEALTH_PORT,
        "{}: readiness port",
        container.name
    );
    assert_eq!(
        readiness.service.as_deref(),
        Some(READY_SERVICE),
        "{}: readiness service",
        container.name
    );
    let health = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.container_port == HEALTH_PORT)
        .unwrap_or_else(|| panic!("{}: the health port is declared", container.name));
    assert_eq!(health.name.as_deref(), Some("health"));
    assert_eq!(
        env(container, "JOBRELAY_HEALTH_LISTEN"),
        format!("0.0.0.0:{HEALTH_PORT}")
    );
}

/// The Secret named `secret` is mounted read-only at the TLS folder, and the
/// certificate flags (`ca_env` for the CA) point into it.
fn assert_tls_mounted(deployment: &Deployment, container: &Container, secret: &str, ca_env: &str) {
    let volume = pod_spec(deployment)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some(secret))
        .unwrap_or_else(|| panic!("a volume of Secret {secret}"));
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == volume.name)
        .unwrap_or_else(|| panic!("{}: Secret {secret} mounted", container.name));
    assert_eq!(mount.mount_path, TLS_DIR);
    assert_eq!(mount.read_only, Some(true), "TLS mounted read-only");
    assert!(
        mount.sub_path.is_none(),
        "a subPath mount would never see a rotated Secret"
    );
    for (variable, key) in [
        ("JOBRELAY_TLS_CERT", "tls.crt"),
        ("JOBRELAY_TLS_KEY", "tls.key"),
        (ca_env, "ca.crt"),
    ] {
        assert_eq!(env(container, variable), format!("{TLS_DIR}/{key}"));
    }
}

/// The configuration file is the ConfigMap rendered from values, mounted
/// where `JOBRELAY_CONFIG` points.
fn assert_config_file(
    objects: &[Value],
    deployment: &Deployment,
    container: &Container,
    expected: Value,
) {
    let path = env(container, "JOBRELAY_CONFIG");
    let (dir, file) = path.rsplit_once('/').expect("a file path");
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == dir)
        .unwrap_or_else(|| panic!("{}: a volume mounted at {dir}", container.name));
    let config_map = pod_spec(deployment)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .and_then(|v| v.config_map.as_ref())
        .map(|c| c.name.clone())
        .unwrap_or_else(|| panic!("{}: {dir} is a ConfigMap", container.name));
    let config_map: ConfigMap = object(objects, "ConfigMap", &config_map);
    let text = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(file))
        .unwrap_or_else(|| panic!("ConfigMap key {file}"));
    let parsed: Value = serde_yaml_ng::from_str(text).expect("the config file is YAML");
    assert_eq!(parsed, expected, "config file:\n{text}");
}

/// Runs as non-root on a read-only root file system with no capabilities
/// and the runtime's seccomp profile.
fn assert_restricted(deployment: &Deployment, container: &Container) {
    let pod = pod_spec(deployment)
        .security_context
        .as_ref()
        .expect("pod securityContext");
    assert_eq!(pod.run_as_non_root, Some(true));
    let context = container
        .security_context
        .as_ref()
        .expect("container securityContext");
    assert_eq!(context.run_as_non_root, Some(true));
    assert_eq!(context.read_only_root_filesystem, Some(true));
    assert_eq!(context.allow_privilege_escalation, Some(false));
    assert_eq!(
        context
            .capabilities
            .as_ref()
            .and_then(|c| c.drop.as_deref()),
        Some(&["ALL".to_string()][..])
    );
    assert_eq!(
        context.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
        Some("RuntimeDefault")
    );
}

/// (group, resource) pairs a ClusterRole grants, with a check that no rule
/// uses a wildcard.
fn grants(role: &ClusterRole) -> BTreeSet<(String, String)> {
    let mut grants = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        assert!(
            !rule.verbs.iter().any(|v| v == "*"),
            "no wildcard verbs: {rule:?}"
        );
        for group in rule.api_groups.iter().flatten() {
            assert_ne!(group, "*", "no wildcard API groups: {rule:?}");
            for resource in rule.resources.iter().flatten() {
                assert_ne!(resource, "*", "no wildcard resources: {rule:?}");
                grants.insert((group.clone(), resource.clone()));
            }
        }
    }
    grants
}

#[tokio::test]
async fn chart_lints_clean() {
    let chart = chart();
    let chart = chart.to_str().expect("chart path is UTF-8");
    // Default values (nothing switched on), then everything switched on.
    let origin = format!("origin={ORIGIN}");
    let mut everything = vec!["lint", "--strict", chart, "--set", &origin];
    everything.extend_from_slice(MANAGER_VALUES);
    everything.extend_from_slice(AGENT_VALUES);
    for args in [vec!["lint", "--strict", chart], everything] {
        let out = helm(None, &args).await;
        assert!(
            out.success && out.stdout.contains("0 chart(s) failed"),
            "helm {args:?}:\n{}{}",
            out.stdout,
            out.stderr
        );
    }
}

#[tokio::test]
async fn manager_objects_are_accepted_by_the_api_server() {
    let client = kit::client(clusters(0).manager()).await;
    let namespace = kit::namespace(&client, "helm-manager").await;
    let rendered = render(&namespace, MANAGER_VALUES, true).await;
    let objects = &rendered.objects;

    let kinds: BTreeSet<&str> = objects.iter().map(kind).collect();
    for expected in [
        "CustomResourceDefinition",
        "Deployment",
        "Service",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Role",
        "RoleBinding",
        "PodDisruptionBudget",
        "MutatingWebhookConfiguration",
        "Secret",
    ] {
        assert!(
            kinds.contains(expected),
            "a {expected} among {:?}",
            summary(objects)
        );
    }
    for crd in [CRD_NAME, SET_CRD_NAME] {
        assert!(
            objects
                .iter()
                .any(|o| kind(o) == "CustomResourceDefinition" && name(o) == crd),
            "the chart ships the {crd} CRD (crds/): {:?}",
            summary(objects)
        );
    }
    assert!(
        !objects.iter().any(|o| name(o).ends_with("-agent")),
        "the agent is off: {:?}",
        summary(objects)
    );
    assert_accepted_by_api_server(&rendered).await;
}

#[tokio::test]
async fn agent_objects_are_accepted_by_the_api_server() {
    let client = kit::client(clusters(0).manager()).await;
    let namespace = kit::namespace(&client, "helm-agent").await;
    let rendered = render(&namespace, AGENT_VALUES, false).await;
    let objects = &rendered.objects;

    let kinds: BTreeSet<&str> = objects.iter().map(kind).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Service",
            "ServiceAccount",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]),
        "the agent's objects (its Service is the metrics'; its pod-template policy): {:?}",
        summary(objects)
    );
    assert_accepted_by_api_server(&rendered).await;

    // The stricter pod-template policy, and Roles in the namespaces a
    // policy names instead of a ClusterRole.
    let mut values = AGENT_VALUES.to_vec();
    let scoped = format!(r#"agent.config={{"namespaces":{{"names":["{namespace}"]}}}}"#);
    values.extend([
        "--set",
        "agent.podPolicy.level=restricted",
        "--set-json",
        &scoped,
    ]);
    let rendered = render(&namespace, &values, false).await;
    let kinds: BTreeSet<&str> = rendered.objects.iter().map(kind).collect();
    assert!(
        kinds.contains("Role") && !kinds.contains("ClusterRole"),
        "{:?}",
        summary(&rendered.objects)
    );
    assert_accepted_by_api_server(&rendered).await;
}

#[tokio::test]
async fn manager_deployment_is_probed_over_grpc_and_mounts_its_certificates() {
    let objects = render("jobrelay-system", MANAGER_VALUES, false)
        .await
        .objects;
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-manager");
    let manager = container(&deployment, "manager");

    assert_grpc_probes(manager);
    assert_tls_mounted(&deployment, manager, "manager-tls", "JOBRELAY_CLIENT_CA");
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
    assert_eq!(env(manager, "JOBRELAY_LISTEN"), "0.0.0.0:8443");
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
    let objects = render("jobrelay-system", MANAGER_VALUES, false)
        .await
        .objects;
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

    // The Lease, and the label on its own Pod, in its namespace only.
    let role: Role = object(&objects, "Role", "jobrelay-manager-leader-election");
    let rules: Vec<(Vec<String>, Vec<String>)> = role
        .rules
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.resources.unwrap_or_default(), r.verbs))
        .collect();
    let strings = |items: &[&str]| items.iter().map(|i| i.to_string()).collect::<Vec<_>>();
    assert_eq!(
        rules,
        [
            (strings(&["leases"]), strings(&["get", "create", "update"])),
            (strings(&["pods"]), strings(&["get", "patch"])),
        ]
    );

    let single = [MANAGER_VALUES, &["--set", "manager.replicas=1"]].concat();
    let objects = render("jobrelay-system", &single, false).await.objects;
    assert!(
        !objects.iter().any(|o| kind(o) == "PodDisruptionBudget"),
        "one replica has no budget to keep: {:?}",
        summary(&objects)
    );
}

#[tokio::test]
async fn agent_deployment_is_probed_over_grpc_and_mounts_its_certificates() {
    let objects = render("jobrelay-system", AGENT_VALUES, false).await.objects;
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-agent");
    let agent = container(&deployment, "agent");

    assert_eq!(deployment.spec.as_ref().and_then(|s| s.replicas), Some(1));
    assert_grpc_probes(agent);
    assert_tls_mounted(&deployment, agent, "agent-tls", "JOBRELAY_MANAGER_CA");
    assert_config_file(
        &objects,
        &deployment,
        agent,
        serde_json::json!({"terminatedPods": {"succeededAfter": "1h", "dryRun": true}}),
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
async fn agent_may_touch_only_jobs_pods_and_events() {
    let objects = render("jobrelay-system", AGENT_VALUES, false).await.objects;
    let role: ClusterRole = object(&objects, "ClusterRole", "jobrelay-agent");
    let granted = grants(&role);
    let resources: BTreeSet<&str> = granted.iter().map(|(_, r)| r.as_str()).collect();
    // jobs/status: a mirror suspended after it started has its startTime
    // cleared, or the worker's Job controller would not resume it.
    assert_eq!(
        resources,
        BTreeSet::from(["jobs", "jobs/status", "pods", "events"]),
        "agent grants: {granted:?}"
    );
    for (group, resource) in &granted {
        let expected = match resource.as_str() {
            "jobs" | "jobs/status" => "batch",
            "pods" => "",
            _ => "events.k8s.io",
        };
        assert_eq!(
            group, expected,
            "{resource} from the {expected:?} API group"
        );
    }
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
    let manager = render("jobrelay-system", MANAGER_VALUES, false)
        .await
        .objects;
    grants(&object::<ClusterRole>(
        &manager,
        "ClusterRole",
        "jobrelay-manager",
    ));
}

#[tokio::test]
async fn missing_or_malformed_values_are_refused_by_name() {
    let chart = chart();
    let chart = chart.to_str().expect("chart path is UTF-8");
    let cases: [(&[&str], &str); 5] = [
        (&["--set", "manager.enabled=true"], "origin is required"),
        (
            &[
                "--set",
                "origin=x",
                "--set",
                "agent.enabled=true",
                "--set",
                "agent.cluster=worker-1",
            ],
            "agent.managerUrl is required",
        ),
        (
            &[
                "--set",
                "origin=x",
                "--set",
                "manager.enabled=true",
                "--set",
                "manager.heartbeatInterval=5 seconds",
            ],
            "heartbeatInterval",
        ),
        (
            &[
                "--set",
                "origin=x",
                "--set",
                "manager.enabled=true",
                "--set-json",
                r#"manager.config={"retention":{"remoteAfterFinishd":"1h"}}"#,
            ],
            "remoteAfterFinishd",
        ),
        (
            &[
                "--set",
                "origin=x",
                "--set",
                "manager.enabled=true",
                "--set",
                "manager.clientCA.secretName=a",
                "--set",
                "manager.clientCA.configMapName=b",
            ],
            "manager.clientCA: name a secretName or a configMapName, not both",
        ),
    ];
    for (values, expected) in cases {
        let mut args = vec!["template", RELEASE, chart];
        args.extend_from_slice(values);
        let out = helm(None, &args).await;
        assert!(
            !out.success && out.stderr.contains(expected),
            "helm {args:?} should fail naming {expected:?}; it said:\n{}{}",
            out.stdout,
            out.stderr
        );
    }
}
