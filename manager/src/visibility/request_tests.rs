use super::*;

#[test]
fn a_jobs_log_path_names_the_job() {
    let path = jobrelay_proto::wire::job_log_path("ml", "train");
    assert_eq!(
        route(&path),
        Route::JobLog {
            namespace: "ml".into(),
            name: "train".into()
        }
    );
}

#[test]
fn the_version_path_is_discovery_and_anything_else_is_not_found() {
    let version = format!("/apis/{VISIBILITY_GROUP}/{VISIBILITY_VERSION}");
    assert_eq!(route(&version), Route::Resources);
    assert_eq!(route(&format!("{version}/")), Route::Resources);
    assert_eq!(route("/healthz"), Route::Health);
    assert_eq!(
        route(&format!("{version}/namespaces/ml/jobs/train")),
        Route::NotFound
    );
    assert_eq!(
        route(&format!("{version}/namespaces//jobs/train/log")),
        Route::NotFound
    );
    assert_eq!(
        route("/apis/batch/v1/namespaces/ml/jobs/train/log"),
        Route::NotFound
    );
    assert_eq!(route("/apis"), Route::NotFound);
}

#[test]
fn kubectls_log_parameters_are_read() {
    let asked = log_query(Some(
        "container=main&follow=true&tailLines=20&sinceSeconds=300&previous=true&timestamps=true&pod=train-x7k2p",
    ))
    .unwrap();
    assert_eq!(
        asked,
        LogQuery {
            container: Some("main".into()),
            pod: Some("train-x7k2p".into()),
            all_pods: false,
            follow: true,
            tail_lines: Some(20),
            since_seconds: Some(300),
            previous: true,
            timestamps: true,
        }
    );
    assert_eq!(log_query(None).unwrap(), LogQuery::default());
    assert!(log_query(Some("allPods=true")).unwrap().all_pods);
    assert!(log_query(Some("follow")).unwrap().follow);
}

#[test]
fn a_parameter_that_cannot_be_taken_is_named_with_its_value() {
    let bad = log_query(Some("tailLines=-3")).unwrap_err();
    assert_eq!(
        bad.to_string(),
        "query parameter tailLines=\"-3\": not a count of lines"
    );
    let bad = log_query(Some("sinceSeconds=0")).unwrap_err();
    assert_eq!(bad.name, "sinceSeconds");
    let bad = log_query(Some("follow=maybe")).unwrap_err();
    assert_eq!(bad.name, "follow");
    let bad = log_query(Some("color=red")).unwrap_err();
    assert_eq!(bad.why, "not a parameter of a Job's logs");
    let bad = log_query(Some("pod=a&allPods=true")).unwrap_err();
    assert_eq!(bad.why, "cannot be asked with pod");
}

#[test]
fn values_are_percent_decoded() {
    let asked = log_query(Some("container=a%2Db+c&pod=%zz")).unwrap();
    assert_eq!(asked.container.as_deref(), Some("a-b c"));
    assert_eq!(asked.pod.as_deref(), Some("%zz"));
}

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_caller_is_read_from_the_front_proxys_headers() {
    let got = caller(
        &Headers::default(),
        &headers(&[
            ("x-remote-user", "alice"),
            ("X-Remote-Group", "team-a"),
            ("x-remote-group", "system:authenticated"),
            ("X-Remote-Extra-Scopes%2fOne", "x"),
            ("Accept", "*/*"),
        ]),
    )
    .unwrap();
    assert_eq!(got.user, "alice");
    assert_eq!(got.groups, vec!["team-a", "system:authenticated"]);
    assert_eq!(got.extra.get("scopes/one"), Some(&vec!["x".to_string()]));
    assert_eq!(got.uid, None);
}

#[test]
fn no_user_header_is_no_caller() {
    assert_eq!(
        caller(&Headers::default(), &headers(&[("X-Remote-Group", "a")])),
        None
    );
    assert_eq!(
        caller(&Headers::default(), &headers(&[("X-Remote-User", "")])),
        None
    );
}
