//! Ordinary users read jobrelay's clusters through Kubernetes' own roles:
//! the chart's ClusterRole, aggregated by the real controller manager into
//! `view` (and `edit`, `admin`), lets a user bound to `view` list
//! WorkerClusters and WorkerClusterSets, and nothing more of jobrelay's.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use jobrelay_testbed::wait::{self, Seen, WAIT};

use super::*;

/// Whether `user` may `verb` `resource` of jobrelay's group.
async fn may(client: &kube::Client, user: &str, verb: &str, resource: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            resource_attributes: Some(ResourceAttributes {
                group: Some("jobrelay.dev".into()),
                resource: Some(resource.into()),
                verb: Some(verb.into()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap_or_else(|e| panic!("a SubjectAccessReview: {e}"))
        .status
        .is_some_and(|status| status.allowed)
}

#[tokio::test]
async fn users_bound_to_view_read_worker_clusters() {
    let admin = kit::client(clusters(0).manager()).await;
    let namespace = kit::namespace(&admin, "helm-roles").await;
    let objects = render(&namespace, MANAGER_VALUES).await.objects;
    let role = objects
        .iter()
        .find(|o| kind(o) == "ClusterRole" && name(o).ends_with("-workercluster-viewer"))
        .unwrap_or_else(|| panic!("the viewer role among {:?}", summary(&objects)));
    // Named after the namespace, as two releases in one test cluster would
    // otherwise share it.
    let mut role = role.clone();
    let role_name = format!("{namespace}-workercluster-viewer");
    role["metadata"]["name"] = json!(role_name);
    let apply = PatchParams::apply("jobrelay-helm-e2e");
    Api::<ClusterRole>::all(admin.clone())
        .patch(&role_name, &apply, &Patch::Apply(&role))
        .await
        .unwrap_or_else(|e| panic!("applying {role_name}: {e}"));
    let viewer = format!("{namespace}-viewer");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": viewer},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": viewer}],
    }))
    .expect("a ClusterRoleBinding");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap_or_else(|e| panic!("binding view: {e}"));

    // The controller manager aggregates the role into `view` a moment after.
    wait::until("view aggregates the chart's role", WAIT, || async {
        match may(&admin, &viewer, "list", "workerclusters").await {
            true => Seen::Ready(()),
            false => Seen::Waiting("not yet allowed".into()),
        }
    })
    .await;
    for (verb, resource, allowed) in [
        ("get", "workerclusters", true),
        ("watch", "workerclustersets", true),
        ("update", "workerclusters", false),
        ("delete", "workerclustersets", false),
        ("patch", "workerclusters/status", false),
    ] {
        assert_eq!(
            may(&admin, &viewer, verb, resource).await,
            allowed,
            "view: {verb} {resource}"
        );
    }
}
