//! A relayed Job's logs read where its user is — on the manager, with no
//! worker credentials: a real container on worker-1's real node, its logs
//! streamed by the worker's agent through its session to the manager's
//! aggregated API, which the manager cluster's API server reaches through
//! the chart's APIService (the CA the manager keeps) and front proxy. Read
//! as `kubectl get --raw` does by a user whom `view` allows (the chart's
//! role aggregated into it) while the container runs, and followed with
//! `kubectl jobrelay logs -f` until the container ends; refused to a user
//! without the permission, by the API server and by jobrelay's own review
//! (asked straight, as the front proxy asks), and to any caller without the
//! front proxy's certificate; and, once the finished Job's mirror is gone, a
//! 404 that says why. `kubectl jobrelay status`, `describe` and `clusters`
//! show the Job, its mirror and the fleet from the manager alone.

use futures::{AsyncBufReadExt, StreamExt};
use jobrelay_e2e::deployed::{TIMEOUT, create, finish, namespace};
use jobrelay_proto::wire::LEADER_LABEL;
use jobrelay_proto::wire::job_log_path;
use jobrelay_testbed::deploy::{Installed, NAMESPACE};
use jobrelay_testbed::kit;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ListParams, PostParams};

use super::installed;
use super::why::on_real_node;
use jobrelay_testbed::cluster::node::WORKLOAD_IMAGE;

/// The APIService the chart registers.
const API_SERVICE: &str = "v1alpha1.visibility.jobrelay.dev";
/// How long the container runs: long enough to read its logs while it runs.
const RUNS: &str = "-sleep=20s";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relayed_jobs_logs_are_read_on_the_manager_through_the_agent() {
    let installed = installed().await;
    let manager = installed.clusters.manager();
    let (ns, jobs) = namespace(installed, "deploy-visibility").await;
    wait_available(&kit::client(manager).await).await;

    // `view` in the namespace reads Pod logs, and so a relayed Job's.
    let admin = kit::client(manager).await;
    let bindings: Api<RoleBinding> = Api::namespaced(admin, &ns);
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "reader-views"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "reader"}],
    }))
    .expect("a RoleBinding");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding view");
    let reader = manager
        .client_as("reader", &["system:authenticated"])
        .await
        .expect("a client as reader");
    let stranger = manager
        .client_as("stranger", &["system:authenticated"])
        .await
        .expect("a client as stranger");

    create(
        &jobs,
        on_real_node(&ns, "talks", WORKLOAD_IMAGE, &[RUNS], 0),
    )
    .await;
    let path = job_log_path(&ns, "talks");

    // Read once, while the container runs: its first line.
    let first = wait::until("talks's first log line on the manager", TIMEOUT, || async {
        match get(&reader, &path).await {
            Ok(text) if text.contains("workload: uid=65532") => Seen::Ready(text),
            other => Seen::Waiting(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        !first.contains("exiting with"),
        "read while it runs: {first}"
    );

    // The plugin, as the manager's admin: where the Job runs and how.
    let kubeconfig = manager.kubeconfig.display().to_string();
    let plugin = |args: &[&str]| {
        let mut all = vec!["--kubeconfig".to_string(), kubeconfig.clone()];
        all.extend(args.iter().map(|a| a.to_string()));
        all
    };
    let status = run_plugin(plugin(&["status", "talks", "-n", &ns])).await;
    let row = status.lines().nth(1).unwrap_or_default();
    assert!(
        status.starts_with("NAME") && row.starts_with("talks") && row.contains("worker-1"),
        "{status}"
    );
    let described = run_plugin(plugin(&["describe", "job/talks", "-n", &ns])).await;
    assert!(
        described.contains("Cluster:  worker-1")
            && described.contains("Dispatched")
            && ["Mirror:", "Pods:", "Events:"]
                .iter()
                .all(|section| described.lines().any(|l| l.starts_with(section))),
        "{described}"
    );
    let as_json = run_plugin(plugin(&["status", "talks", "-n", &ns, "-o", "json"])).await;
    serde_json::from_str::<serde_json::Value>(&as_json)
        .unwrap_or_else(|e| panic!("status -o json is JSON ({e}): {as_json}"));
    eprintln!("kubectl jobrelay status:\n{status}\nkubectl jobrelay describe:\n{described}");
    let clusters = run_plugin(plugin(&["clusters"])).await;
    assert!(
        clusters
            .lines()
            .any(|l| l.starts_with("worker-1") && l.contains("True")),
        "{clusters}"
    );

    // Followed with the plugin: the stream goes on until the container
    // ends, then ends. Beside it, the same logs with the runtime's
    // timestamps, each line's delay from the container to its reader noted
    // (a figure for the record, not a check).
    let timed = tokio::spawn(delays(
        reader.clone(),
        format!("{path}?follow=true&timestamps=true"),
    ));
    let follow = run_plugin(plugin(&["logs", "job/talks", "-n", &ns, "-f"]));
    let followed = tokio::time::timeout(TIMEOUT, follow)
        .await
        .expect("the followed logs end when the container ends");
    assert!(
        followed.contains("workload: uid=65532") && followed.contains("workload: exiting with 0"),
        "{followed}"
    );
    let delays = tokio::time::timeout(TIMEOUT, timed)
        .await
        .expect("the timed stream ends too")
        .expect("no panic");
    eprintln!("log lines' delay from the container runtime to the reader: {delays:?}");

    // Refused to a user who may not read them.
    let refused = get(&stranger, &path)
        .await
        .expect_err("a stranger reads no logs");
    assert_eq!(refused.0, 403, "{}", refused.1);
    assert!(refused.1.contains("jobs/log"), "{}", refused.1);

    // jobrelay's own review, asked as the front proxy asks (its client
    // certificate, the caller in headers) straight at the leader: the
    // stranger is refused by jobrelay, in the API server's words; and
    // without that certificate no header is believed, not even a reader's.
    let proxied = straight_to_the_leader(installed, "stranger", true).await;
    let refused = get(&proxied, &path)
        .await
        .expect_err("jobrelay refuses the stranger");
    assert_eq!(refused.0, 403, "{}", refused.1);
    assert!(
        refused
            .1
            .contains(r#"User "stranger" cannot get resource "jobs/log" in API group "visibility.jobrelay.dev""#),
        "{}",
        refused.1
    );
    let unproxied = straight_to_the_leader(installed, "reader", false).await;
    let refused = get(&unproxied, &path)
        .await
        .expect_err("no front proxy, no caller");
    assert_eq!(refused.0, 401, "{}", refused.1);

    // Bad parameters are named.
    let bad = get(&reader, &format!("{path}?tailLines=-1"))
        .await
        .expect_err("a bad tail");
    assert_eq!(bad.0, 400, "{}", bad.1);
    assert!(bad.1.contains("tailLines"), "{}", bad.1);

    // Once the Job finished and its mirror is gone (no retention here),
    // there are no logs to read, and the answer says why.
    let gone = wait::until("talks's logs gone with its mirror", TIMEOUT, || async {
        match get(&reader, &path).await {
            Err((404, text)) if text.contains("finished") => Seen::Ready(text),
            other => Seen::Waiting(format!("{other:?}")),
        }
    })
    .await;
    assert!(gone.contains("retention.remoteAfterFinished"), "{gone}");
    finish(installed, &ns, &jobs).await;
}

/// Waits until the chart's APIService is Available: the API server trusts
/// the CA the manager wrote into it and reached the leader.
async fn wait_available(client: &kube::Client) {
    let services: Api<APIService> = Api::all(client.clone());
    wait::until("the logs API's APIService available", TIMEOUT, || async {
        let service = services.get(API_SERVICE).await;
        let available = service.as_ref().ok().and_then(|s| {
            let conditions = s.status.as_ref()?.conditions.as_ref()?;
            conditions.iter().find(|c| c.type_ == "Available").cloned()
        });
        match available {
            Some(c) if c.status == "True" => Seen::Ready(()),
            other => Seen::Waiting(format!("{other:?}")),
        }
    })
    .await;
}

/// A client of the leader's logs API itself, not through the API server:
/// `user` (in `system:authenticated`) named in the front proxy's headers,
/// on a connection with the front proxy's client certificate if
/// `certificate`. The API's own certificate is not checked here: the
/// APIService's is, by the API server.
async fn straight_to_the_leader(
    installed: &Installed,
    user: &str,
    certificate: bool,
) -> kube::Client {
    let manager = installed.clusters.manager();
    let pods: Api<Pod> = Api::namespaced(kit::client(manager).await, NAMESPACE);
    let leaders = pods
        .list(&ListParams::default().labels(&format!("{LEADER_LABEL}=true")))
        .await
        .expect("listing the manager's Pods");
    let address = leaders
        .items
        .iter()
        .find_map(|pod| pod.status.as_ref()?.pod_ip.clone())
        .expect("the leader's address");
    let port = installed
        .manager_values
        .iter()
        .find_map(|value| value.strip_prefix("manager.visibility.port="))
        .expect("the logs API's port");
    let url = format!("https://{address}:{port}").parse().expect("a URL");
    let mut config = kube::Config::new(url);
    config.accept_invalid_certs = true;
    if certificate {
        let pki = installed.clusters.set().state_dir.join("pki");
        config.auth_info.client_certificate =
            Some(pki.join("front-proxy-client.crt").display().to_string());
        config.auth_info.client_key =
            Some(pki.join("front-proxy-client.key").display().to_string());
    }
    config.headers = vec![
        (
            http::HeaderName::from_static("x-remote-user"),
            http::HeaderValue::from_str(user).expect("a header"),
        ),
        (
            http::HeaderName::from_static("x-remote-group"),
            http::HeaderValue::from_static("system:authenticated"),
        ),
    ];
    kube::Client::try_from(config).expect("a client of the logs API")
}

/// `kubectl get --raw path` as `client`: the body, or the status code and
/// the API's message.
async fn get(client: &kube::Client, path: &str) -> Result<String, (u16, String)> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .expect("a request");
    client
        .request_text(request)
        .await
        .map_err(|error| match error {
            kube::Error::Api(status) => (status.code, status.message.clone()),
            other => (0, other.to_string()),
        })
}

/// Follows `path` as `client`, noting for each line how long after the
/// runtime's timestamp on it the line arrived.
async fn delays(client: kube::Client, path: String) -> Vec<SignedDuration> {
    let request = http::Request::get(&path)
        .body(Vec::new())
        .expect("a request");
    let Ok(read) = client.request_stream(request).await else {
        return Vec::new();
    };
    let mut lines = read.lines();
    let mut delays = Vec::new();
    while let Some(Ok(line)) = lines.next().await {
        let stamped = line
            .split_once(' ')
            .and_then(|(at, _)| at.parse::<Timestamp>().ok());
        if let Some(stamped) = stamped {
            delays.push(Timestamp::now().duration_since(stamped));
        }
    }
    delays
}

/// `kubectl jobrelay <args>`: what it printed; panics with its error.
async fn run_plugin(args: Vec<String>) -> String {
    let mut out = Vec::new();
    kubectl_jobrelay::run(args.clone(), &mut out)
        .await
        .unwrap_or_else(|e| panic!("kubectl jobrelay {args:?}: {e:#}"));
    String::from_utf8(out).expect("UTF-8")
}
