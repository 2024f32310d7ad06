//! What the worker-policy proofs share: the chart's agent policies,
//! rendered by helm and applied to the test cluster's real kube-apiserver;
//! a client acting as that release's agent (its ServiceAccount,
//! impersonated, in the group that RBAC lets do anything: the policies are
//! what is under test; `deploy/policy.rs` shows the relay path with the
//! agent's own identity on real nodes); mirror Jobs and JobSets to send it,
//! as server dry runs, so nothing is created.

use std::time::Duration;

use jobrelay_proto::wire::ORIGIN_LABEL;
use jobrelay_testbed::controllers::jobset::{install_crds, jobset_resource};
use jobrelay_testbed::go::jobset_build;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::*;

const TIMEOUT: Duration = Duration::from_secs(60);
const DRY_RUN: PostParams = PostParams {
    dry_run: true,
    field_manager: None,
};

/// The chart's agent policies, rendered for a release in `namespace` with
/// `values` and applied to the test cluster; a client acting as that
/// release's agent, and the namespace its mirrors go to.
pub(super) struct Worker {
    pub(super) agent: kube::Client,
    pub(super) mirrors: String,
    pub(super) release_namespace: String,
    /// The release's origin, its own: each release's label policy refuses
    /// objects of its origin to anyone but its agent, and the test cluster
    /// holds several releases.
    pub(super) origin: String,
}

pub(super) async fn install(prefix: &str, values: &[&str]) -> Worker {
    let cluster = clusters(0).manager();
    let admin = kit::client(cluster).await;
    jobset_crds(&admin).await;
    let release_namespace = kit::namespace(&admin, prefix).await;
    let origin = prefix.to_string();
    let origin_value = format!("origin={origin}");
    let mut all = AGENT_VALUES.to_vec();
    all.extend_from_slice(&["--set", &origin_value]);
    all.extend_from_slice(values);
    let objects = render(&release_namespace, &all).await.objects;
    let names = apply_policies(&admin, &objects).await;
    assert_eq!(
        names.len(),
        3,
        "the pod policy, the write policy and the label policy: {names:?}"
    );
    let agent = acting_as(&format!(
        "system:serviceaccount:{release_namespace}:jobrelay-agent"
    ))
    .await;
    Worker {
        agent,
        mirrors: kit::namespace(&admin, &format!("{prefix}-mirrors")).await,
        release_namespace,
        origin,
    }
}

/// A client of the test cluster acting as `user` (impersonated), in the
/// group that RBAC lets do anything: the policies are what is under test.
pub(super) async fn acting_as(user: &str) -> kube::Client {
    clusters(0)
        .manager()
        .client_as(user, &["system:masters"])
        .await
        .unwrap_or_else(|e| panic!("acting as {user}: {e}"))
}

/// JobSet's CRDs, installed once: the policies match JobSets too.
pub(super) async fn jobset_crds(admin: &kube::Client) {
    static CRDS: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    CRDS.get_or_init(|| async {
        let release = jobset_build::jobset()
            .unwrap_or_else(|e| panic!("{e}"))
            .expect("JobSet built by cargo xtask test");
        install_crds(admin, &release)
            .await
            .unwrap_or_else(|e| panic!("installing JobSet's CRDs: {e}"));
    })
    .await;
}

/// Applies the ValidatingAdmissionPolicies (and their bindings) among the
/// chart's rendered `objects` to the test cluster and waits until the API
/// server type-checked each one without a warning; their names.
pub(super) async fn apply_policies(admin: &kube::Client, objects: &[Value]) -> Vec<String> {
    let apply = PatchParams::apply("jobrelay-helm-e2e");
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(admin.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(admin.clone());
    let mut names = Vec::new();
    for object in objects {
        match kind(object) {
            "ValidatingAdmissionPolicy" => {
                names.push(name(object).to_string());
                policies
                    .patch(name(object), &apply, &Patch::Apply(object))
                    .await
                    .unwrap_or_else(|e| panic!("applying {}: {e}", name(object)));
            }
            "ValidatingAdmissionPolicyBinding" => {
                bindings
                    .patch(name(object), &apply, &Patch::Apply(object))
                    .await
                    .unwrap_or_else(|e| panic!("applying {}: {e}", name(object)));
            }
            _ => {}
        }
    }
    for policy in &names {
        assert_type_checked(&policies, policy).await;
    }
    names
}

/// Waits until the API server type-checked `policy` against every kind it
/// matches, and asserts that none of its expressions drew a warning (a
/// field misspelt, a type mismatch: an expression that would fail at
/// admission and, with `failurePolicy: Fail`, refuse every mirror).
async fn assert_type_checked(policies: &Api<ValidatingAdmissionPolicy>, policy: &str) {
    let status = wait::until(format!("{policy} type-checked"), TIMEOUT, || async {
        match policies.get(policy).await {
            Ok(p) => match p.status {
                Some(status) if status.type_checking.is_some() => Seen::Ready(status),
                other => Seen::Waiting(format!("status {other:?}")),
            },
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    let warnings = status
        .type_checking
        .and_then(|t| t.expression_warnings)
        .unwrap_or_default();
    assert!(warnings.is_empty(), "{policy}: {warnings:#?}");
}

/// A mirror Job of this origin whose pod template is `pod` merged over a
/// plain one (and whose template's annotations are `annotations`).
pub(super) fn job(name: &str, pod: Value, annotations: Value) -> Value {
    let mut spec = json!({
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "registry.invalid/busybox"}],
    });
    merge(&mut spec, pod);
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {ORIGIN_LABEL: ORIGIN}},
        "spec": {"template": {"metadata": {"annotations": annotations}, "spec": spec}},
    })
}

/// A mirror JobSet of this origin with two replicated Jobs, the second's pod
/// template `pod` merged over a plain one.
pub(super) fn jobset(name: &str, pod: Value) -> Value {
    let plain = job("x", json!({}), json!({}))["spec"].clone();
    let changed = job("x", pod, json!({}))["spec"].clone();
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {ORIGIN_LABEL: ORIGIN}},
        "spec": {"replicatedJobs": [
            {"name": "plain", "replicas": 1, "template": {"spec": plain}},
            {"name": "changed", "replicas": 1, "template": {"spec": changed}},
        ]},
    })
}

pub(super) fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, from) => *into = from,
    }
}

impl Worker {
    /// Creates `object` as the agent (a dry run), labelled with this
    /// release's origin where it carries one; the refusal's message, or
    /// `None` when the API server took it.
    pub(super) async fn create(&self, mut object: Value) -> Option<String> {
        if let Some(origin) = object["metadata"]["labels"].get_mut(ORIGIN_LABEL) {
            *origin = json!(self.origin);
        }
        let result = match kind(&object) {
            "Job" => {
                let job: Job = serde_json::from_value(object).expect("a Job");
                let jobs: Api<Job> = Api::namespaced(self.agent.clone(), &self.mirrors);
                jobs.create(&DRY_RUN, &job).await.map(drop)
            }
            _ => {
                let jobset: DynamicObject = serde_json::from_value(object).expect("a JobSet");
                let jobsets: Api<DynamicObject> =
                    Api::namespaced_with(self.agent.clone(), &self.mirrors, &jobset_resource());
                jobsets.create(&DRY_RUN, &jobset).await.map(drop)
            }
        };
        refusal(result)
    }

    /// Asserts that creating `object` is refused with a message holding
    /// `says`; returns the message.
    pub(super) async fn refused(&self, object: Value, says: &str) -> String {
        let name = name(&object).to_string();
        let message = self
            .create(object)
            .await
            .unwrap_or_else(|| panic!("{name} was admitted; expected a refusal saying {says:?}"));
        assert!(message.contains(says), "{name}: {message}");
        message
    }

    /// Waits until the API server enforces the policies (they take effect a
    /// moment after they are written): a privileged container is refused.
    pub(super) async fn wait_enforced(&self) {
        let privileged = job(
            "privileged",
            json!({"containers": [{"name": "main", "image": "registry.invalid/busybox",
                "securityContext": {"privileged": true}}]}),
            json!({}),
        );
        wait::until("the pod policy enforced", TIMEOUT, || async {
            match self.create(privileged.clone()).await {
                Some(message) if message.contains("privileged containers") => Seen::Ready(()),
                other => Seen::Waiting(format!("{other:?}")),
            }
        })
        .await;
    }
}

pub(super) fn refusal(result: Result<(), kube::Error>) -> Option<String> {
    match result {
        Ok(()) => None,
        Err(kube::Error::Api(status)) => Some(status.message),
        Err(error) => panic!("the request failed otherwise: {error}"),
    }
}

pub(super) fn container(extra: Value) -> Value {
    let mut container = json!({"name": "main", "image": "registry.invalid/busybox"});
    merge(&mut container, extra);
    json!({"containers": [container]})
}
