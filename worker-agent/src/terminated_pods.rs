//! Lifetime of terminated Pods: Succeeded and Failed Pods older than the
//! configured durations are deleted (or, in dry-run mode, only logged). By
//! default only Pods carrying this manager's origin label are in scope; Pods
//! jobrelay did not create are touched only when the operator switched that
//! on. Running and Pending Pods are never touched.

use crate::deletion_pace::DeletionPace;
use std::time::Duration;

use jobrelay_proto::wire::ORIGIN_LABEL;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use tracing::{info, warn};

use crate::config::TerminatedPods;

/// When a Pod finished: the latest time one of its containers terminated,
/// else when it stopped being Ready, else when it was created.
pub fn finished_at(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref();
    let containers = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten();
    let terminated = containers
        .filter_map(|c| {
            c.state
                .as_ref()?
                .terminated
                .as_ref()?
                .finished_at
                .as_ref()
                .map(|t| t.0)
        })
        .max();
    let ready = || {
        status?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "Ready")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0)
    };
    terminated
        .or_else(ready)
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Whether the Pod is due for deletion now under `policy`.
pub fn is_due(pod: &Pod, policy: &TerminatedPods, now: Timestamp) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let after = match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") => policy.succeeded_after,
        Some("Failed") => policy.failed_after,
        _ => None,
    };
    let (Some(after), Some(finished)) = (after, finished_at(pod)) else {
        return false;
    };
    Duration::try_from(now.duration_since(finished)).is_ok_and(|age| age >= after)
}

/// The label selector the Pods are listed with.
pub fn selector(policy: &TerminatedPods, origin: &str) -> String {
    let mut parts = Vec::new();
    if !policy.include_unmirrored {
        parts.push(format!("{ORIGIN_LABEL}={origin}"));
    }
    parts.extend(policy.label_selector.clone());
    parts.join(",")
}

/// Checks the configuration against the API server once, so a selector it
/// refuses stops the agent at start instead of failing every pass.
pub async fn check(
    client: &kube::Client,
    policy: &TerminatedPods,
    origin: &str,
) -> Result<(), crate::Error> {
    let params = ListParams::default()
        .labels(&selector(policy, origin))
        .limit(1);
    // In the first namespace in scope, where only some are readable.
    let api = match policy.namespaces.first() {
        Some(namespace) => Api::<Pod>::namespaced(client.clone(), namespace),
        None => Api::<Pod>::all(client.clone()),
    };
    api.list_metadata(&params)
        .await
        .map_err(|source| crate::Error::TerminatedPodsSelector {
            selector: policy.label_selector.clone(),
            source,
        })?;
    Ok(())
}

/// Looks at the Pods in scope every `policy.interval`, forever; deletions
/// draw on the agent's deletion pace.
pub async fn run(
    client: kube::Client,
    policy: TerminatedPods,
    origin: String,
    deletions: DeletionPace,
) {
    let mut ticks = tokio::time::interval(policy.interval);
    loop {
        ticks.tick().await;
        if let Err(error) = pass(&client, &policy, &origin, &deletions).await {
            warn!(%error, "terminated-Pod pass failed; trying again next interval");
        }
    }
}

async fn pass(
    client: &kube::Client,
    policy: &TerminatedPods,
    origin: &str,
    deletions: &DeletionPace,
) -> Result<(), kube::Error> {
    let params = ListParams::default().labels(&selector(policy, origin));
    let apis: Vec<Api<Pod>> = if policy.namespaces.is_empty() {
        vec![Api::all(client.clone())]
    } else {
        policy
            .namespaces
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect()
    };
    let now = Timestamp::now();
    for api in apis {
        for pod in api
            .list(&params)
            .await?
            .into_iter()
            .filter(|p| is_due(p, policy, now))
        {
            let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
            let phase = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            if policy.dry_run {
                info!(%namespace, pod = %name, %phase, "dry run: would delete terminated Pod");
                continue;
            }
            deletions.take().await;
            let delete = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: pod.uid(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match Api::<Pod>::namespaced(client.clone(), &namespace)
                .delete(&name, &delete)
                .await
            {
                Ok(_) => info!(%namespace, pod = %name, %phase, "deleted terminated Pod"),
                Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => {}
                Err(error) => {
                    warn!(%namespace, pod = %name, %error, "could not delete terminated Pod")
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> TerminatedPods {
        TerminatedPods {
            succeeded_after: Some(Duration::from_secs(60)),
            failed_after: None,
            namespaces: vec![],
            label_selector: None,
            include_unmirrored: false,
            dry_run: false,
            interval: Duration::from_secs(1),
        }
    }

    fn pod(phase: &str, finished: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "creationTimestamp": "2026-11-22T09:00:00Z"},
            "status": {"phase": phase, "containerStatuses": [{
                "name": "c", "image": "i", "ready": false, "restartCount": 0, "imageID": "", "containerID": "",
                "state": {"terminated": {"exitCode": 0, "finishedAt": finished}},
            }]},
        }))
        .unwrap()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_pod_is_due_once_it_finished_longer_ago_than_its_phases_lifetime() {
        let done = pod("Succeeded", "2026-11-22T10:00:00Z");
        assert_eq!(finished_at(&done), Some(at("2026-11-22T10:00:00Z")));
        assert!(!is_due(&done, &policy(), at("2026-11-22T10:00:59Z")));
        assert!(is_due(&done, &policy(), at("2026-11-22T10:01:00Z")));
        let failed = pod("Failed", "2026-11-22T10:00:00Z");
        assert!(
            !is_due(&failed, &policy(), at("2026-11-23T10:00:00Z")),
            "no failedAfter: Failed Pods stay"
        );
    }

    #[test]
    fn running_and_terminating_pods_are_never_due() {
        let running = pod("Running", "2026-11-22T10:00:00Z");
        assert!(!is_due(&running, &policy(), at("2026-12-22T10:00:00Z")));
        let mut terminating = pod("Succeeded", "2026-11-22T10:00:00Z");
        terminating.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at("2026-11-22T10:00:01Z")),
        );
        assert!(!is_due(&terminating, &policy(), at("2026-12-22T10:00:00Z")));
    }

    #[test]
    fn only_this_origins_pods_unless_the_operator_asks() {
        let mut scoped = policy();
        scoped.label_selector = Some("team=vision".into());
        assert_eq!(
            selector(&scoped, "hub"),
            "jobrelay.dev/origin=hub,team=vision"
        );
        scoped.include_unmirrored = true;
        assert_eq!(selector(&scoped, "hub"), "team=vision");
    }
}
