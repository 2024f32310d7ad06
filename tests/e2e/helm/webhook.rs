//! The manager's admission webhook in the chart: on by default, a Service
//! selecting every replica, a MutatingWebhookConfiguration that sends only
//! queued Job creations and never blocks one (`failurePolicy: Ignore`), a
//! serving certificate the manager keeps itself (nothing of it rendered, so
//! `helm template` gives the same output twice), cert-manager's, or a
//! Secret the user names; none of it when switched off.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::{MANAGER_VALUES, container, env, grants, kind, object, pod_spec, render, summary};

const NAME: &str = "jobrelay-manager-webhook";
const SECRET: &str = "jobrelay-manager-webhook-tls";
/// The Secret the manager keeps the webhook's certificate in.
const KEPT: &str = "jobrelay-manager-webhook-certs";
const TLS_DIR: &str = "/etc/jobrelay/webhook-tls";

async fn manager_with(more: &[&str]) -> Vec<Value> {
    let values = [MANAGER_VALUES, more].concat();
    render("jobrelay-system", &values).await.objects
}

/// The Secret the Deployment mounts at the webhook's folder.
fn mounted_secret(deployment: &Deployment) -> String {
    let mount = container(deployment, "manager")
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == TLS_DIR)
        .expect("the webhook's certificate is mounted");
    assert_eq!(mount.read_only, Some(true));
    let volume = pod_spec(deployment)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .expect("its volume");
    let secret = volume.secret.as_ref().expect("a Secret volume");
    secret.secret_name.clone().unwrap_or_default()
}

#[tokio::test]
async fn the_webhook_is_served_by_every_replica_and_registered_to_never_block_a_job() {
    let objects = manager_with(&[]).await;
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-manager");
    let manager = container(&deployment, "manager");
    assert_eq!(env(manager, "JOBRELAY_WEBHOOK_ADDR"), "$(POD_IP):9443");
    assert_eq!(env(manager, "JOBRELAY_WEBHOOK_CERTIFICATE_SECRET"), KEPT);
    assert_eq!(env(manager, "JOBRELAY_WEBHOOK_CONFIGURATION"), NAME);
    assert_eq!(
        env(manager, "JOBRELAY_WEBHOOK_NAMES"),
        format!("{NAME}.jobrelay-system.svc,{NAME}.jobrelay-system.svc.cluster.local")
    );
    assert!(
        !manager
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "JOBRELAY_WEBHOOK_TLS_CERT"),
        "no files: the manager keeps the certificate"
    );
    assert!(
        !container(&deployment, "manager")
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path == TLS_DIR),
        "nothing mounted for the webhook"
    );
    let port = manager
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("webhook"));
    assert_eq!(port.map(|p| p.container_port), Some(9443));

    let service: Service = object(&objects, "Service", NAME);
    let spec = service.spec.expect("Service spec");
    let selector = spec.selector.unwrap_or_default();
    assert!(
        !selector.contains_key(jobrelay_proto::wire::LEADER_LABEL),
        "every replica answers: {selector:?}"
    );
    let ports = spec.ports.unwrap_or_default();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].port, 443);
    assert_eq!(
        ports[0].target_port,
        Some(IntOrString::String("webhook".into()))
    );

    assert!(
        !objects.iter().any(|o| kind(o) == "Secret"),
        "the chart renders no certificate: {:?}",
        summary(&objects)
    );
    let configuration: MutatingWebhookConfiguration =
        object(&objects, "MutatingWebhookConfiguration", NAME);
    let webhooks = configuration.webhooks.unwrap_or_default();
    assert_eq!(webhooks.len(), 1);
    let hook = &webhooks[0];
    let service = hook.client_config.service.as_ref().expect("by Service");
    assert_eq!(
        (service.name.as_str(), service.namespace.as_str()),
        (NAME, "jobrelay-system")
    );
    assert_eq!(service.path.as_deref(), Some("/mutate-batch-v1-job"));
    assert_eq!(service.port, Some(443));
    assert_eq!(
        hook.client_config.ca_bundle, None,
        "the manager writes the caBundle"
    );
    assert_eq!(hook.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(hook.match_policy.as_deref(), Some("Equivalent"));
    assert_eq!(hook.side_effects, "None");
    assert_eq!(hook.admission_review_versions, ["v1"]);
    assert_eq!(hook.timeout_seconds, Some(5));
    let rules = hook.rules.clone().unwrap_or_default();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].api_groups.as_deref(),
        Some(&["batch".to_string()][..])
    );
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["jobs".to_string()][..])
    );
    assert_eq!(
        rules[0].operations.as_deref(),
        Some(&["CREATE".to_string()][..])
    );
    let selector = hook.object_selector.clone().expect("an objectSelector");
    let expressions = selector.match_expressions.unwrap_or_default();
    assert_eq!(
        (
            expressions[0].key.as_str(),
            expressions[0].operator.as_str()
        ),
        ("kueue.x-k8s.io/queue-name", "Exists")
    );

    let role: ClusterRole = object(&objects, "ClusterRole", "jobrelay-manager");
    let granted = grants(&role);
    for resource in ["localqueues", "clusterqueues"] {
        assert!(
            granted.contains(&("kueue.x-k8s.io".to_string(), resource.to_string())),
            "the manager reads {resource}: {granted:?}"
        );
    }
    let patches = role
        .rules
        .iter()
        .flatten()
        .find(|r| {
            r.resources
                .iter()
                .flatten()
                .any(|x| x == "mutatingwebhookconfigurations")
        })
        .expect("the manager may patch its webhook configuration");
    assert_eq!(
        patches.resource_names.as_deref(),
        Some(&[NAME.to_string()][..])
    );
    assert_eq!(patches.verbs, ["get", "patch"]);
    let election: Role = object(&objects, "Role", "jobrelay-manager-leader-election");
    assert!(
        election.rules.iter().flatten().any(|r| {
            r.resource_names.as_deref() == Some(&[KEPT.to_string()][..])
                && r.verbs == ["get", "update"]
        }),
        "the manager may read and renew its Secret, and no other: {:?}",
        election.rules
    );
}

#[tokio::test]
async fn helm_template_renders_the_same_twice() {
    for values in [
        &[][..],
        &["--set", "manager.webhook.certManager.enabled=true"][..],
    ] {
        let once = render_yaml(values).await;
        let again = render_yaml(values).await;
        assert!(
            once == again,
            "{values:?}: helm template differs between runs"
        );
    }
}

async fn render_yaml(more: &[&str]) -> String {
    let values = [MANAGER_VALUES, more].concat();
    render("jobrelay-system", &values).await.yaml
}

#[tokio::test]
async fn cert_manager_issues_the_certificate_and_injects_its_ca() {
    let objects = manager_with(&["--set", "manager.webhook.certManager.enabled=true"]).await;
    let certificate = objects
        .iter()
        .find(|o| kind(o) == "Certificate")
        .expect("a cert-manager Certificate");
    assert_eq!(certificate["spec"]["secretName"], SECRET);
    assert_eq!(
        certificate["spec"]["dnsNames"][0],
        format!("{NAME}.jobrelay-system.svc")
    );
    assert_eq!(
        certificate["spec"]["issuerRef"]["name"],
        format!("{NAME}-selfsigned")
    );
    assert!(
        objects.iter().any(|o| kind(o) == "Issuer"),
        "a self-signed Issuer"
    );
    let configuration: MutatingWebhookConfiguration =
        object(&objects, "MutatingWebhookConfiguration", NAME);
    assert_eq!(
        configuration
            .metadata
            .annotations
            .unwrap_or_default()
            .get("cert-manager.io/inject-ca-from")
            .map(String::as_str),
        Some(format!("jobrelay-system/{NAME}").as_str())
    );
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-manager");
    assert_eq!(mounted_secret(&deployment), SECRET);
    let manager = container(&deployment, "manager");
    assert_eq!(
        env(manager, "JOBRELAY_WEBHOOK_TLS_CERT"),
        format!("{TLS_DIR}/tls.crt")
    );
    let role: ClusterRole = object(&objects, "ClusterRole", "jobrelay-manager");
    assert!(
        !grants(&role)
            .iter()
            .any(|(_, r)| r == "mutatingwebhookconfigurations"),
        "cert-manager injects the CA: the manager patches nothing"
    );
    let named = manager_with(&[
        "--set",
        "manager.webhook.certManager.enabled=true",
        "--set",
        "manager.webhook.certManager.issuerRef.name=corp-ca",
        "--set",
        "manager.webhook.certManager.issuerRef.kind=ClusterIssuer",
    ])
    .await;
    assert!(
        !named.iter().any(|o| kind(o) == "Issuer"),
        "the named issuer only"
    );
    let certificate = named
        .iter()
        .find(|o| kind(o) == "Certificate")
        .expect("Certificate");
    assert_eq!(certificate["spec"]["issuerRef"]["kind"], "ClusterIssuer");
}

#[tokio::test]
async fn a_certificate_of_the_users_own_is_mounted_and_its_ca_registered() {
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let ca = format!("manager.webhook.caBundle={pem}");
    let objects = manager_with(&[
        "--set",
        "manager.webhook.secretName=my-webhook-tls",
        "--set",
        &ca,
    ])
    .await;
    assert!(
        !objects.iter().any(|o| kind(o) == "Secret"),
        "the chart makes no certificate: {:?}",
        summary(&objects)
    );
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-manager");
    assert_eq!(mounted_secret(&deployment), "my-webhook-tls");
    let configuration: MutatingWebhookConfiguration =
        object(&objects, "MutatingWebhookConfiguration", NAME);
    let hook = &configuration.webhooks.unwrap_or_default()[0];
    assert_eq!(
        hook.client_config.ca_bundle,
        Some(ByteString(pem.as_bytes().to_vec()))
    );
}

#[tokio::test]
async fn switched_off_nothing_of_the_webhook_renders() {
    let objects = manager_with(&["--set", "manager.webhook.enabled=false"]).await;
    assert!(
        !objects.iter().any(
            |o| kind(o) == "MutatingWebhookConfiguration" || super::name(o).contains("webhook")
        ),
        "no webhook object: {:?}",
        summary(&objects)
    );
    let deployment: Deployment = object(&objects, "Deployment", "jobrelay-manager");
    let manager = container(&deployment, "manager");
    assert!(
        !manager
            .env
            .iter()
            .flatten()
            .any(|e| e.name.starts_with("JOBRELAY_WEBHOOK")),
        "no webhook flags"
    );
    assert!(
        !manager
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path == TLS_DIR),
        "no webhook certificate mounted"
    );
}
