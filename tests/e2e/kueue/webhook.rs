//! The manager's admission webhook, called by the real API server beside
//! Kueue's own Job webhook: a Job created with only the queue label, in a
//! ClusterQueue that lists jobrelay's check, is given jobrelay's
//! `spec.managedBy`, relayed and completes. Its certificate is the one the
//! manager keeps itself (as the chart runs it by default): the
//! configuration is registered without a `caBundle`, and the API server
//! trusts the webhook once the manager wrote its CA there.
//!
//! The manager of this target always serves the webhook (flags from
//! [`manager_args`]); it is registered with a namespaceSelector matching
//! only [`NAMESPACE_LABEL`], which this scenario puts on its own namespace,
//! so `not_ours.rs` still sees a Job without `managedBy` Rejected.

use std::path::Path;
use std::sync::OnceLock;

use jobrelay_e2e::scenario::{WAIT, wait_given_managed_by};
use jobrelay_manager::kueue::CONTROLLER_NAME;
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::kueue_objects::LOCAL_QUEUE;
use jobrelay_testbed::relay::election::LEASE_NAMESPACE;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{QUEUE_NAME, queued};

/// The label on a namespace whose Jobs the registered webhook sees.
const NAMESPACE_LABEL: &str = "e2e.jobrelay.dev/webhook";
/// The MutatingWebhookConfiguration this scenario registers.
const CONFIGURATION: &str = "jobrelay-e2e-webhook";

/// The Secret in which the manager keeps the webhook's certificate, in the
/// namespace of its Lease.
const KEPT: &str = "jobrelay-e2e-webhook-certs";

/// Where the manager serves the webhook.
static SERVED: OnceLock<String> = OnceLock::new();

/// The manager's flags for the webhook: a loopback port of its own and a
/// certificate it keeps in [`KEPT`], for the configuration
/// [`CONFIGURATION`].
pub fn manager_args(_state_dir: &Path) -> Vec<String> {
    let port = jobrelay_testbed::host::ports::free_port().unwrap_or_else(|e| panic!("a port: {e}"));
    let addr = format!("127.0.0.1:{port}");
    let url = SERVED.get_or_init(|| format!("https://{addr}/mutate-batch-v1-job"));
    assert!(url.contains(&addr), "the webhook flags made twice");
    [
        "--webhook-addr",
        &addr,
        "--webhook-certificate-secret",
        KEPT,
        "--webhook-configuration",
        CONFIGURATION,
        "--webhook-names",
        "127.0.0.1",
    ]
    .map(String::from)
    .to_vec()
}

/// Registers the manager's webhook as the chart does, by URL and without a
/// CA, for the namespaces labelled [`NAMESPACE_LABEL`].
async fn register(client: &kube::Client) {
    let url = SERVED
        .get()
        .expect("the manager was started with the webhook");
    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION},
        "webhooks": [{
            "name": "managed-by.jobrelay.dev",
            "clientConfig": {"url": url},
            "rules": [{
                "apiGroups": ["batch"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["jobs"],
            }],
            "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "true"}},
            "objectSelector": {"matchExpressions": [{"key": QUEUE_NAME, "operator": "Exists"}]},
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "matchPolicy": "Equivalent",
            "timeoutSeconds": 5,
        }],
    });
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(
            CONFIGURATION,
            &PatchParams::apply("jobrelay-e2e").force(),
            &Patch::Apply(&configuration),
        )
        .await
        .unwrap_or_else(|e| panic!("registering the webhook: {e}"));
}

#[tokio::test]
async fn a_job_with_only_the_queue_label_is_given_jobrelays_managed_by_and_relayed() {
    let s = queued("webhook", 1).await;
    let client = kit::client(s.clusters.manager()).await;
    let label = json!({"metadata": {"labels": {NAMESPACE_LABEL: "true"}}});
    Api::<Namespace>::all(client.clone())
        .patch(&s.ns, &PatchParams::default(), &Patch::Merge(label))
        .await
        .expect("label the namespace");
    register(&client).await;
    let job = || {
        jobrelay_testbed::objects::fixtures::TestJob::new(&s.ns, "plain")
            .label(QUEUE_NAME, LOCAL_QUEUE)
            .cpu("1")
            .build()
    };
    // Shows when the API server calls the new registration and the
    // manager's caches hold the scenario's queues.
    wait_given_managed_by(&s.jobs, job, WAIT).await;
    let kept: Secret = Api::namespaced(client.clone(), LEASE_NAMESPACE)
        .get(KEPT)
        .await
        .expect("the manager keeps the webhook's certificate");
    let ca = kept
        .data
        .unwrap_or_default()
        .remove("ca.crt")
        .expect("its CA");
    let registered = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(CONFIGURATION)
        .await
        .expect("the configuration");
    let bundles: Vec<Option<ByteString>> = registered
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|hook| hook.client_config.ca_bundle)
        .collect();
    assert_eq!(
        bundles,
        [Some(ca)],
        "the manager gave the configuration its CA"
    );
    let created = s
        .jobs
        .create(&PostParams::default(), &job())
        .await
        .expect("create the Job");
    let managed_by = created.spec.as_ref().and_then(|s| s.managed_by.as_deref());
    assert_eq!(managed_by, Some(CONTROLLER_NAME), "as created");
    // Kueue's Job webhook ran on the same create, whichever came first.
    let suspend = created.spec.as_ref().and_then(|s| s.suspend);
    assert_eq!(suspend, Some(true), "created suspended by Kueue");
    let done = s.wait_condition("plain", "Complete").await;
    let annotations = done.metadata.annotations.unwrap_or_default();
    assert!(
        annotations.contains_key("jobrelay.dev/cluster"),
        "relayed to a worker: {annotations:?}"
    );
    s.finish(WAIT).await;
}
