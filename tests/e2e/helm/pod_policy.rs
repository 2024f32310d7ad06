//! The pod-template policy as the chart renders it, enforced by a real
//! kube-apiserver: every field of a pod template that grants power is
//! refused with a sentence naming it — on a Job and on a JobSet, at
//! `baseline` and at `restricted` — and what it allows is admitted.

use serde_json::{Value, json};

use super::policy_kit::{container, install, job, jobset, merge};

/// A container's security context.
fn context(context: Value) -> Value {
    container(json!({"securityContext": context}))
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
    let unconfined = json!({"type": "Unconfined"});
    let none = json!({});
    let refusals = [
        // The deprecated field: the JobSet controller's child Job would run
        // as it, and nothing checks that child.
        (
            jobset("set-as-builder", json!({"serviceAccount": "builder"})),
            "run Pods as ServiceAccount builder",
        ),
        (
            jobset("set-privileged", context(json!({"privileged": true}))),
            "privileged containers",
        ),
        (
            jobset(
                "set-host-process",
                json!({"securityContext": {"windowsOptions": {"hostProcess": true}}}),
            ),
            "Windows HostProcess",
        ),
        (
            job("host-pid", json!({"hostPID": true}), none.clone()),
            "host's namespaces",
        ),
        (
            job("host-network", json!({"hostNetwork": true}), none.clone()),
            "host's namespaces",
        ),
        (
            job(
                "host-port",
                container(json!({"ports": [{"containerPort": 80, "hostPort": 80}]})),
                none.clone(),
            ),
            "host ports",
        ),
        (
            job(
                "host-path",
                json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
                none.clone(),
            ),
            "hostPath",
        ),
        (
            job(
                "apparmor-pod",
                json!({"securityContext": {"appArmorProfile": unconfined}}),
                none.clone(),
            ),
            "AppArmor",
        ),
        (
            job(
                "apparmor-container",
                context(json!({"appArmorProfile": unconfined})),
                none.clone(),
            ),
            "AppArmor",
        ),
        (
            job(
                "apparmor-annotation",
                json!({}),
                json!({"container.apparmor.security.beta.kubernetes.io/main": "unconfined"}),
            ),
            "AppArmor",
        ),
        (
            job(
                "selinux-type",
                context(json!({"seLinuxOptions": {"type": "spc_t"}})),
                none.clone(),
            ),
            "SELinux",
        ),
        (
            job(
                "selinux-user",
                json!({"securityContext": {"seLinuxOptions": {"user": "system_u"}}}),
                none.clone(),
            ),
            "SELinux",
        ),
        (
            job(
                "seccomp",
                context(json!({"seccompProfile": unconfined})),
                none.clone(),
            ),
            "seccomp",
        ),
        (
            job(
                "capabilities",
                context(json!({"capabilities": {"add": ["SYS_ADMIN"]}})),
                none.clone(),
            ),
            "capabilities",
        ),
        (
            job(
                "proc-mount",
                context(json!({"procMount": "Unmasked"})),
                none.clone(),
            ),
            "procMount",
        ),
        (
            job(
                "sysctl",
                json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
                none,
            ),
            "sysctls",
        ),
    ];
    for (object, says) in refusals {
        worker.refused(object, says).await;
    }
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
    let with = |name: &str, extra: Value| {
        let mut pod = restricted.clone();
        merge(&mut pod, extra);
        job(name, pod, json!({}))
    };
    assert_eq!(worker.create(with("restricted", json!({}))).await, None);
    let nfs =
        json!({"volumes": [{"name": "share", "nfs": {"server": "nfs.invalid", "path": "/"}}]});
    let escalation = json!({"containers": [{"name": "main", "image": "registry.invalid/busybox",
        "securityContext": {"capabilities": {"drop": ["ALL"]}}}]});
    let refusals = [
        (with("nfs", nfs), "restricted volume types"),
        (
            with("root", json!({"securityContext": {"runAsUser": 0}})),
            "as user 0",
        ),
        (
            with("token", json!({"automountServiceAccountToken": true})),
            "automountServiceAccountToken: false",
        ),
        (
            with("escalation", escalation),
            "allowPrivilegeEscalation: false",
        ),
    ];
    for (object, says) in refusals {
        worker.refused(object, says).await;
    }
}
