//! Whether the caller may read a Job's logs: asked of the API server with a
//! SubjectAccessReview for the verb `get` on the subresource `jobs/log` of
//! jobrelay's visibility group — the permission the chart's aggregated
//! ClusterRole gives `view`, `edit` and `admin`.

use jobrelay_proto::wire::{VISIBILITY_GROUP, VISIBILITY_VERSION};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::request::Caller;

/// The API server's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Not allowed, with the authorizer's reason if it gave one.
    Denied(String),
}

/// The review that asks whether `caller` may read the logs of Job `name`
/// in `namespace`.
pub fn review(caller: &Caller, namespace: &str, name: &str) -> SubjectAccessReview {
    let extra = caller
        .extra
        .iter()
        .map(|(key, values)| (key.clone(), values.clone()))
        .collect();
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(caller.user.clone()),
            uid: caller.uid.clone(),
            groups: Some(caller.groups.clone()),
            extra: Some(extra),
            resource_attributes: Some(ResourceAttributes {
                group: Some(VISIBILITY_GROUP.into()),
                version: Some(VISIBILITY_VERSION.into()),
                resource: Some("jobs".into()),
                subresource: Some("log".into()),
                verb: Some("get".into()),
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

/// What the API server's answer to a review says.
pub fn verdict(answered: &SubjectAccessReview) -> Verdict {
    match &answered.status {
        Some(status) if status.allowed && status.denied != Some(true) => Verdict::Allowed,
        Some(status) => Verdict::Denied(status.reason.clone().unwrap_or_default()),
        None => Verdict::Denied(String::new()),
    }
}

/// Asks the API server.
pub async fn ask(
    client: &kube::Client,
    caller: &Caller,
    namespace: &str,
    name: &str,
) -> Result<Verdict, kube::Error> {
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let answered = reviews
        .create(&PostParams::default(), &review(caller, namespace, name))
        .await?;
    Ok(verdict(&answered))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;

    use super::*;

    #[test]
    fn the_review_asks_for_get_on_jobs_log_as_the_caller() {
        let caller = Caller {
            user: "alice".into(),
            uid: Some("u-1".into()),
            groups: vec!["team-a".into()],
            extra: [("scopes".to_string(), vec!["x".to_string()])].into(),
        };
        let asked = review(&caller, "ml", "train");
        let attributes = asked.spec.resource_attributes.unwrap();
        assert_eq!(attributes.group.as_deref(), Some(VISIBILITY_GROUP));
        assert_eq!(attributes.resource.as_deref(), Some("jobs"));
        assert_eq!(attributes.subresource.as_deref(), Some("log"));
        assert_eq!(attributes.verb.as_deref(), Some("get"));
        assert_eq!(attributes.namespace.as_deref(), Some("ml"));
        assert_eq!(attributes.name.as_deref(), Some("train"));
        assert_eq!(asked.spec.user.as_deref(), Some("alice"));
        assert_eq!(asked.spec.uid.as_deref(), Some("u-1"));
        assert_eq!(asked.spec.groups, Some(vec!["team-a".to_string()]));
        assert_eq!(asked.spec.extra.unwrap()["scopes"], vec!["x".to_string()]);
    }

    fn answered(allowed: bool, denied: Option<bool>, reason: &str) -> SubjectAccessReview {
        SubjectAccessReview {
            status: Some(SubjectAccessReviewStatus {
                allowed,
                denied,
                reason: Some(reason.into()),
                ..SubjectAccessReviewStatus::default()
            }),
            ..SubjectAccessReview::default()
        }
    }

    #[test]
    fn only_an_allowed_review_allows() {
        assert_eq!(verdict(&answered(true, None, "")), Verdict::Allowed);
        assert_eq!(
            verdict(&answered(false, None, "no RBAC rule")),
            Verdict::Denied("no RBAC rule".into())
        );
        assert_eq!(
            verdict(&answered(true, Some(true), "denied")),
            Verdict::Denied("denied".into())
        );
        assert_eq!(
            verdict(&SubjectAccessReview::default()),
            Verdict::Denied(String::new())
        );
    }
}
