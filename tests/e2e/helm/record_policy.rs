//! jobrelay's record on a manager Job, held by the chart's record policy and
//! enforced by a real kube-apiserver: a tenant (any user but the manager's
//! ServiceAccount, impersonated) who changes, adds or removes one of
//! jobrelay's annotations on a Job or JobSet is refused with a message
//! naming it; the tenant's own annotations and the Job's other fields stay
//! theirs to change; the manager's ServiceAccount changes the record. The
//! policy is applied as `helm template` renders it; requests that are meant
//! to pass are server dry runs.

use jobrelay_proto::wire::{
    AVOID_UNTIL_ANNOTATION, CLUSTER_KEY, FLAVORS_ANNOTATION, MIRRORS_LOST_ANNOTATION,
    PLACEMENT_SEAL_ANNOTATION,
};
use jobrelay_testbed::controllers::jobset::jobset_resource;
use jobrelay_testbed::wait::{self, Seen};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::policy_kit::{acting_as, apply_policies, job, jobset, jobset_crds, refusal};
use super::*;

const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A merge patch of `annotations` onto the object `name` as `client`, in
/// namespace `ns`, as a server dry run; the refusal's message, if refused.
async fn annotate(
    client: &kube::Client,
    ns: &str,
    resource: &kube::api::ApiResource,
    name: &str,
    annotations: Value,
) -> Option<String> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    let params = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let patch = json!({"metadata": {"annotations": annotations}});
    refusal(
        api.patch(name, &params, &Patch::Merge(&patch))
            .await
            .map(drop),
    )
}

#[tokio::test]
async fn only_the_manager_changes_jobrelays_record_on_a_job() {
    let cluster = clusters(0).manager();
    let admin = kit::client(cluster).await;
    jobset_crds(&admin).await;
    let release_namespace = kit::namespace(&admin, "rp-release").await;
    let objects = render(&release_namespace, MANAGER_VALUES).await.objects;
    let names = apply_policies(&admin, &objects).await;
    assert_eq!(names.len(), 1, "the record policy: {names:?}");
    let tenants = kit::namespace(&admin, "rp-tenant").await;
    let tenant = acting_as("tenant").await;
    let manager = acting_as(&format!(
        "system:serviceaccount:{release_namespace}:jobrelay-manager"
    ))
    .await;

    // A placed Job and JobSet, as the manager leaves them.
    let record = json!({
        CLUSTER_KEY: "worker-1",
        PLACEMENT_SEAL_ANNOTATION: "v1:mac:worker-1",
        MIRRORS_LOST_ANNOTATION: "1",
        FLAVORS_ANNOTATION: r#"{"podSets":{}}"#,
    });
    let jobs = kube::api::ApiResource::erase::<k8s_openapi::api::batch::v1::Job>(&());
    let jobsets = jobset_resource();
    for (mut object, resource) in [
        (job("placed", json!({}), json!({})), &jobs),
        (jobset("placed-set", json!({})), &jobsets),
    ] {
        object["metadata"]["annotations"] = record.clone();
        // A manager Job carries no origin label (a mirror does).
        object["metadata"]["labels"] = json!({});
        let object: DynamicObject = serde_json::from_value(object).expect("an object");
        Api::<DynamicObject>::namespaced_with(admin.clone(), &tenants, resource)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("creating {:?}: {e}", object.metadata.name));
    }

    // The tenant moves the Job to another cluster: refused, once the policy
    // is in force (a moment after it is written).
    let moved = wait::until("the record policy enforced", TIMEOUT, || async {
        match annotate(
            &tenant,
            &tenants,
            &jobs,
            "placed",
            json!({CLUSTER_KEY: "worker-2"}),
        )
        .await
        {
            Some(message) => Seen::Ready(message),
            None => Seen::Waiting("the tenant's change was admitted".into()),
        }
    })
    .await;
    assert!(
        moved.contains("the annotations jobrelay.dev/cluster of jobs placed")
            && moved.contains("only the jobrelay manager writes them"),
        "{moved}"
    );

    // Every other kind of change to the record, on either kind: refused,
    // naming what was touched.
    for (resource, name, annotations, names) in [
        (
            &jobs,
            "placed",
            json!({MIRRORS_LOST_ANNOTATION: "0"}),
            MIRRORS_LOST_ANNOTATION,
        ),
        (
            &jobs,
            "placed",
            json!({CLUSTER_KEY: null, PLACEMENT_SEAL_ANNOTATION: null}),
            "jobrelay.dev/cluster, jobrelay.dev/placement-seal",
        ),
        (
            &jobs,
            "placed",
            json!({AVOID_UNTIL_ANNOTATION: "2099-01-01T00:00:00Z"}),
            AVOID_UNTIL_ANNOTATION,
        ),
        (
            &jobsets,
            "placed-set",
            json!({FLAVORS_ANNOTATION: r#"{"podSets":{"main":{"nodeSelector":{"gpu":"a100"}}}}"#}),
            FLAVORS_ANNOTATION,
        ),
    ] {
        let message = annotate(&tenant, &tenants, resource, name, annotations.clone())
            .await
            .unwrap_or_else(|| panic!("the tenant's {annotations} was admitted on {name}"));
        assert!(
            message.contains(&format!("the annotations {names} of")),
            "{message}"
        );
    }

    // The tenant's own annotations stay theirs; the manager writes its
    // record.
    assert_eq!(
        annotate(
            &tenant,
            &tenants,
            &jobs,
            "placed",
            json!({"team.example/owner": "ml"})
        )
        .await,
        None,
        "a tenant's own annotation"
    );
    assert_eq!(
        annotate(
            &manager,
            &tenants,
            &jobs,
            "placed",
            json!({CLUSTER_KEY: null, MIRRORS_LOST_ANNOTATION: "2"})
        )
        .await,
        None,
        "the manager's own record"
    );
}
