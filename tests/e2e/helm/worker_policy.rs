//! The worker's policies as the chart renders them, enforced by a real
//! kube-apiserver: every field of a pod template that grants power is
//! refused with a sentence naming it — on a Job and on a JobSet, at
//! `baseline` and at `restricted` — and the agent's own identity may write
//! only objects labelled with its origin, outside the system namespaces and
//! its own, so a stolen agent token is held to what the agent touches.
//!
//! Requests are made as the agent's ServiceAccount (impersonated, in the
//! group that RBAC lets do anything: the policies are what is under test;
//! `deploy/policy.rs` shows the relay path with the agent's own identity on
//! real nodes) and as server dry runs, so nothing is created.

use std::time::Duration;

use jobrelay_proto::wire::ORIGIN_LABEL;
use jobrelay_testbed::controllers::jobset::{install_crds, jobset_resource};
use jobrelay_testbed::go::jobset_build;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
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
struct Worker {
    agent: kube::Client,
    mirrors: String,
    release_namespace: String,
}

async fn install(prefix: &str, values: &[&str]) -> Worker {
    let cluster = clusters(0).manager();
    let admin = kit::client(cluster).await;
    static CRDS: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    CRDS.get_or_init(|| async {
        let release = jobset_build::jobset()
            .unwrap_or_else(|e| panic!("{e}"))
            .expect("JobSet built by cargo xtask test");
        install_crds(&admin, &release)
            .await
            .unwrap_or_else(|e| panic!("installing JobSet's CRDs: {e}"));
    })
    .await;
    let release_namespace = kit::namespace(&admin, prefix).await;
    let mut all = AGENT_VALUES.to_vec();
    all.extend_from_slice(values);
    let objects = render(&release_namespace, &all, false).await.objects;
    let apply = PatchParams::apply("jobrelay-helm-e2e");
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(admin.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(admin.clone());
    let mut names = Vec::new();
    for object in &objects {
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
    assert_eq!(names.len(), 2, "the pod policy and the write policy");
    for policy in &names {
        assert_type_checked(&policies, policy).await;
    }
    let agent = cluster
        .client_as(
            &format!("system:serviceaccount:{release_namespace}:jobrelay-agent"),
            &["system:masters"],
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Worker {
        agent,
        mirrors: kit::namespace(&admin, &format!("{prefix}-mirrors")).await,
        release_namespace,
    }
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
fn job(name: &str, pod: Value, annotations: Value) -> Value {
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
fn jobset(name: &str, pod: Value) -> Value {
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

fn merge(into: &mut Value, from: Value) {
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
    /// Creates `object` as the agent (a dry run); the refusal's message, or
    /// `None` when the API server took it.
    async fn create(&self, object: Value) -> Option<String> {
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
    async fn refused(&self, object: Value, says: &str) -> String {
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
    async fn wait_enforced(&self) {
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

fn refusal(result: Result<(), kube::Error>) -> Option<String> {
    match result {
        Ok(()) => None,
        Err(kube::Error::Api(status)) => Some(status.message),
        Err(error) => panic!("the request failed otherwise: {error}"),
    }
}

fn container(extra: Value) -> Value {
    let mut container = json!({"name": "main", "image": "registry.invalid/busybox"});
    merge(&mut container, extra);
    json!({"containers": [container]})
}

#[tokio::test]
async fn baseline_refuses_each_field_that_grants_power_on_jobs_and_jobsets() {
    let worker = install("pp-baseline", &[]).await;
    worker.wait_enforced().await;

    assert_eq!(
        worker.create(job("plain", json!({}), json!({}))).await,
        None
    );
    assert_eq!(worker.create(jobset("plain-set", json!({}))).await, None);

    let message = worker
        .refused(
            job(
                "as-builder",
                json!({"serviceAccountName": "builder"}),
                json!({}),
            ),
            "run Pods as ServiceAccount builder",
        )
        .await;
    assert!(
        !message.contains("default"),
        "a refusal names the ServiceAccount refused, not those allowed: {message}"
    );
    // The deprecated field: the JobSet controller's child Job would run as
    // it, and nothing checks that child.
    worker
        .refused(
            jobset("set-as-builder", json!({"serviceAccount": "builder"})),
            "run Pods as ServiceAccount builder",
        )
        .await;
    worker
        .refused(
            jobset(
                "set-privileged",
                container(json!({"securityContext": {"privileged": true}})),
            ),
            "privileged containers",
        )
        .await;
    worker
        .refused(
            jobset(
                "set-host-process",
                json!({"securityContext": {"windowsOptions": {"hostProcess": true}}}),
            ),
            "Windows HostProcess",
        )
        .await;
    for (name, pod) in [
        ("host-pid", json!({"hostPID": true})),
        ("host-network", json!({"hostNetwork": true})),
    ] {
        worker
            .refused(job(name, pod, json!({})), "host's namespaces")
            .await;
    }
    worker
        .refused(
            job(
                "host-port",
                container(json!({"ports": [{"containerPort": 80, "hostPort": 80}]})),
                json!({}),
            ),
            "host ports",
        )
        .await;
    worker
        .refused(
            job(
                "host-path",
                json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
                json!({}),
            ),
            "hostPath",
        )
        .await;
    let unconfined = json!({"type": "Unconfined"});
    worker
        .refused(
            job(
                "apparmor-pod",
                json!({"securityContext": {"appArmorProfile": unconfined}}),
                json!({}),
            ),
            "AppArmor",
        )
        .await;
    worker
        .refused(
            job(
                "apparmor-container",
                container(json!({"securityContext": {"appArmorProfile": unconfined}})),
                json!({}),
            ),
            "AppArmor",
        )
        .await;
    worker
        .refused(
            job(
                "apparmor-annotation",
                json!({}),
                json!({"container.apparmor.security.beta.kubernetes.io/main": "unconfined"}),
            ),
            "AppArmor",
        )
        .await;
    worker
        .refused(
            job(
                "selinux-type",
                container(json!({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}})),
                json!({}),
            ),
            "SELinux",
        )
        .await;
    worker
        .refused(
            job(
                "selinux-user",
                json!({"securityContext": {"seLinuxOptions": {"user": "system_u"}}}),
                json!({}),
            ),
            "SELinux",
        )
        .await;
    worker
        .refused(
            job(
                "seccomp",
                container(json!({"securityContext": {"seccompProfile": unconfined}})),
                json!({}),
            ),
            "seccomp",
        )
        .await;
    worker
        .refused(
            job(
                "capabilities",
                container(json!({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}})),
                json!({}),
            ),
            "capabilities",
        )
        .await;
    worker
        .refused(
            job(
                "proc-mount",
                container(json!({"securityContext": {"procMount": "Unmasked"}})),
                json!({}),
            ),
            "procMount",
        )
        .await;
    worker
        .refused(
            job(
                "sysctl",
                json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
                json!({}),
            ),
            "sysctls",
        )
        .await;
}

#[tokio::test]
async fn restricted_refuses_root_other_volumes_and_a_mounted_token() {
    let worker = install(
        "pp-restricted",
        &[
            "--set",
            "agent.podPolicy.level=restricted",
            "--set",
            "agent.podPolicy.automountServiceAccountToken=false",
        ],
    )
    .await;
    worker.wait_enforced().await;
    let restricted = json!({
        "automountServiceAccountToken": false,
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "main", "image": "registry.invalid/busybox", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
    });
    let with = |extra: Value| {
        let mut pod = restricted.clone();
        merge(&mut pod, extra);
        pod
    };
    assert_eq!(
        worker
            .create(job("restricted", restricted.clone(), json!({})))
            .await,
        None
    );
    worker
        .refused(
            job("nfs", with(json!({"volumes": [{"name": "share", "nfs": {"server": "nfs.invalid", "path": "/"}}]})), json!({})),
            "restricted volume types",
        )
        .await;
    worker
        .refused(
            job(
                "root",
                with(json!({"securityContext": {"runAsUser": 0}})),
                json!({}),
            ),
            "as user 0",
        )
        .await;
    worker
        .refused(
            job(
                "token",
                with(json!({"automountServiceAccountToken": true})),
                json!({}),
            ),
            "automountServiceAccountToken: false",
        )
        .await;
    worker
        .refused(
            job(
                "escalation",
                with(
                    json!({"containers": [{"name": "main", "image": "registry.invalid/busybox",
                "securityContext": {"capabilities": {"drop": ["ALL"]}}}]}),
                ),
                json!({}),
            ),
            "allowPrivilegeEscalation: false",
        )
        .await;
}

#[tokio::test]
async fn the_agents_identity_writes_only_its_origins_objects_outside_system_namespaces() {
    let worker = install("pp-writes", &[]).await;
    worker.wait_enforced().await;
    let admin = kit::client(clusters(0).manager()).await;

    // A Job without the origin's label: not created.
    let mut unlabelled = job("unlabelled", json!({}), json!({}));
    unlabelled["metadata"]["labels"] = json!({});
    worker
        .refused(
            unlabelled.clone(),
            "writes only objects labelled jobrelay.dev/origin=helm-e2e",
        )
        .await;

    // A user's Job: the agent may neither take it over by labelling it nor
    // delete it.
    let users: Api<Job> = Api::namespaced(admin.clone(), &worker.mirrors);
    users
        .create(
            &PostParams::default(),
            &serde_json::from_value(unlabelled).expect("a Job"),
        )
        .await
        .expect("the user's Job");
    let as_agent: Api<Job> = Api::namespaced(worker.agent.clone(), &worker.mirrors);
    let take_over = json!({"metadata": {"labels": {ORIGIN_LABEL: ORIGIN}}});
    let message = refusal(
        as_agent
            .patch(
                "unlabelled",
                &PatchParams {
                    dry_run: true,
                    ..PatchParams::default()
                },
                &Patch::Merge(&take_over),
            )
            .await
            .map(drop),
    )
    .expect("taking over a user's Job is refused");
    assert!(message.contains("does not take over"), "{message}");
    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    let message = refusal(as_agent.delete("unlabelled", &dry_delete).await.map(drop))
        .expect("deleting a user's Job is refused");
    assert!(
        message.contains("writes only objects labelled"),
        "{message}"
    );

    // Pods: one of this origin in the mirrors' namespace may be deleted; a
    // system Pod, or one in the agent's own namespace even with the label,
    // may not.
    let pod = |ns: &str, name: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "labels": {ORIGIN_LABEL: ORIGIN}},
            "spec": {"containers": [{"name": "main", "image": "registry.invalid/busybox"}]},
        }))
        .expect("a Pod")
    };
    let system_pod = format!("not-jobrelays-{}", std::process::id());
    let mut system = pod("kube-system", &system_pod);
    system.metadata.labels = None;
    for (ns, pod) in [
        (worker.mirrors.as_str(), pod(&worker.mirrors, "mirror-pod")),
        (
            worker.release_namespace.as_str(),
            pod(&worker.release_namespace, "agent-pod"),
        ),
        ("kube-system", system),
    ] {
        Api::<Pod>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("creating a Pod in {ns}: {e}"));
    }
    let agents = |ns: &str| Api::<Pod>::namespaced(worker.agent.clone(), ns);
    assert_eq!(
        refusal(
            agents(&worker.mirrors)
                .delete("mirror-pod", &dry_delete)
                .await
                .map(drop)
        ),
        None,
        "the agent deletes its origin's Pods"
    );
    let message = refusal(
        agents("kube-system")
            .delete(&system_pod, &dry_delete)
            .await
            .map(drop),
    )
    .expect("deleting a system Pod is refused");
    assert!(
        message.contains("never writes in namespace kube-system"),
        "{message}"
    );
    let message = refusal(
        agents(&worker.release_namespace)
            .delete("agent-pod", &dry_delete)
            .await
            .map(drop),
    )
    .expect("deleting a Pod in the agent's own namespace is refused");
    assert!(message.contains("its own"), "{message}");
    Api::<Pod>::namespaced(admin, "kube-system")
        .delete(&system_pod, &DeleteParams::default())
        .await
        .expect("removing the system Pod");
}
