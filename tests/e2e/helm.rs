//! The Helm chart (`deploy/helm/jobrelay`) as an operator meets it: it lints
//! clean; every object it renders for the manager (with the WorkerCluster CRD)
//! and for the agent is accepted by a real kube-apiserver in a server-side
//! dry run with strict field validation; and the rendered objects hold what
//! matters — gRPC probes on the health port, the TLS Secret mounted where the
//! flags point, the configuration file from values, RBAC the agent cannot
//! exceed; and the worker's and the manager's policies, applied to that API
//! server, refuse what they must (`helm/pod_policy.rs`,
//! `helm/write_policy.rs`, `helm/record_policy.rs`). Rendering uses the pinned helm
//! built by `cargo xtask k8s`.

use std::collections::BTreeSet;

use jobrelay_proto::wire::LEADER_LABEL;
use jobrelay_testbed::deploy::helm::{chart, helm, run};
use jobrelay_testbed::go::controlplane;
use jobrelay_testbed::kit::{self, clusters};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde_json::Value;

#[path = "helm/agent.rs"]
mod agent;
#[path = "helm/assertions.rs"]
mod assertions;
#[path = "helm/client_ca.rs"]
mod client_ca;
#[path = "helm/crds.rs"]
mod crds;
#[path = "helm/manager.rs"]
mod manager;
#[path = "helm/observability.rs"]
mod observability;
#[path = "helm/pod_policy.rs"]
mod pod_policy;
#[path = "helm/policy_kit.rs"]
mod policy_kit;
#[path = "helm/record_policy.rs"]
mod record_policy;
#[path = "helm/user_roles.rs"]
mod user_roles;
#[path = "helm/webhook.rs"]
mod webhook;
#[path = "helm/write_policy.rs"]
mod write_policy;

use assertions::*;

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
    "--set",
    "manager.clientCA.secretName=agents-ca",
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
    r#"agent.config={"namespaces":{"all":true},"terminatedPods":{"succeededAfter":"1h","dryRun":true}}"#,
];

/// What `helm template` printed, and the objects in it.
struct Rendered {
    yaml: String,
    objects: Vec<Value>,
}

/// `helm template` of the chart into `namespace`; panics with helm's message
/// if it fails.
async fn render(namespace: &str, values: &[&str]) -> Rendered {
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
    let rendered = render(&namespace, MANAGER_VALUES).await;
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
        "NetworkPolicy",
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
            "the chart ships the {crd} CRD (files/crds/): {:?}",
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
    let rendered = render(&namespace, AGENT_VALUES).await;
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
            "NetworkPolicy",
            "ServiceAccount",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]),
        "the agent's objects (its Service is the metrics'; its pod-template and write policies): {:?}",
        summary(objects)
    );
    assert_accepted_by_api_server(&rendered).await;

    // The stricter pod-template policy, and Roles in the namespaces a
    // policy names instead of a ClusterRole for mirrors (the room's
    // read-only one aside).
    let mut values = AGENT_VALUES.to_vec();
    let scoped = format!(r#"agent.config={{"namespaces":{{"names":["{namespace}"]}}}}"#);
    values.extend([
        "--set",
        "agent.podPolicy.level=restricted",
        "--set-json",
        &scoped,
    ]);
    let rendered = render(&namespace, &values).await;
    let kinds: BTreeSet<&str> = rendered.objects.iter().map(kind).collect();
    let cluster_roles: Vec<&str> = rendered
        .objects
        .iter()
        .filter(|o| kind(o) == "ClusterRole")
        .map(name)
        .collect();
    assert!(
        kinds.contains("Role") && cluster_roles == ["jobrelay-agent-room"],
        "{:?}",
        summary(&rendered.objects)
    );
    assert_accepted_by_api_server(&rendered).await;
}

#[tokio::test]
async fn missing_or_malformed_values_are_refused_by_name() {
    let chart = chart();
    let chart = chart.to_str().expect("chart path is UTF-8");
    let cases: [(&[&str], &str); 7] = [
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
        (
            &["--set", "origin=x", "--set", "manager.enabled=true"],
            "manager.clientCA is required: the CA bundle agent certificates must chain to, a CA of its own",
        ),
        (
            &[
                "--set",
                "origin=x",
                "--set",
                "manager.enabled=true",
                "--set",
                "manager.clientCA.secretName=agents-ca",
                "--set",
                "manager.service.type=LoadBalancer",
            ],
            "manager.service.loadBalancerSourceRanges is required with a LoadBalancer",
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
