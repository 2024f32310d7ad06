use super::*;

fn limited(qps: f64, burst: u32) -> RateLimit {
    RateLimit::PerSecond { qps, burst }
}

#[tokio::test]
async fn a_named_kubeconfig_is_used_and_a_bad_one_names_the_flag() {
    let dir = std::env::temp_dir().join(format!("jobrelay-kubeconfig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let path = dir.join("worker.kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: w\n\
         clusters: [{name: c, cluster: {server: 'https://10.1.2.3:6443'}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: w, context: {cluster: c, user: u, namespace: ml}}]\n",
    )
    .expect("kubeconfig written");
    let found = config(Some(&path)).await.expect("a usable kubeconfig");
    assert_eq!(found.cluster_url.host(), Some("10.1.2.3"));
    assert_eq!(found.default_namespace, "ml");
    let missing = dir.join("missing.kubeconfig");
    let error = config(Some(&missing))
        .await
        .expect_err("no such file")
        .to_string();
    assert!(
        error.starts_with("--kubeconfig ") && error.contains("missing.kubeconfig"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).expect("the temporary folder removed");
}

#[test]
fn the_limiter_counts_the_requests_that_wait() {
    let start = Instant::now();
    let limiter = Limiter::new(limited(1.0, 2), start);
    assert_eq!(limiter.take(start), None);
    assert_eq!(limiter.take(start), None);
    assert_eq!(limiter.take(start), Some(start + Duration::from_secs(1)));
    assert_eq!(limiter.take(start), Some(start + Duration::from_secs(2)));
    assert_eq!(limiter.waited.load(Ordering::Relaxed), 2);
}

fn flags(qps: f64, burst: u32) -> KubeApiFlags {
    KubeApiFlags {
        kube_api_qps: qps,
        kube_api_burst: burst,
    }
}

#[test]
fn flags_become_a_rate_limit() {
    assert_eq!(
        flags(500.0, 1000).rate_limit().ok(),
        Some(limited(500.0, 1000))
    );
    assert_eq!(flags(0.0, 0).rate_limit().ok(), Some(RateLimit::Unlimited));
}

#[test]
fn the_defaults_are_500_qps_and_a_burst_of_1000() {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        kube_api: KubeApiFlags,
    }
    let cli = Cli::try_parse_from(["test"]).expect("no flags given");
    assert_eq!(cli.kube_api.rate_limit().ok(), Some(limited(500.0, 1000)));
}

#[test]
fn a_burst_of_zero_is_refused_while_limited() {
    let error = flags(10.0, 0)
        .rate_limit()
        .expect_err("burst 0 with qps 10");
    assert!(error.to_string().contains("--kube-api-burst"), "{error}");
}

#[test]
fn a_negative_or_not_finite_qps_is_refused() {
    for qps in [-1.0, f64::NAN, f64::INFINITY] {
        let error = flags(qps, 10).rate_limit().expect_err("invalid qps");
        assert!(error.to_string().contains("--kube-api-qps"), "{error}");
    }
}

/// Answers every request at once and records when it was called.
struct Recorder {
    calls: Vec<Instant>,
}

impl Service<()> for Recorder {
    type Response = ();
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<(), Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, (): ()) -> Self::Future {
        self.calls.push(Instant::now());
        std::future::ready(Ok(()))
    }
}

#[tokio::test(start_paused = true)]
async fn the_layer_holds_requests_back_until_their_token() {
    let start = Instant::now();
    let layer = RateLimitLayer {
        limiter: Arc::new(Limiter::new(limited(10.0, 2), start)),
    };
    let mut service = layer.layer(Recorder { calls: Vec::new() });
    for _ in 0..4 {
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .await
            .expect("the recorder is always ready");
        service.call(()).await.expect("the recorder never fails");
    }
    let offsets: Vec<_> = service
        .inner
        .calls
        .iter()
        .map(|at| at.duration_since(start))
        .collect();
    assert_eq!(
        offsets,
        [0, 0, 100, 200].map(Duration::from_millis),
        "requests sent at these offsets from the start"
    );
    assert_eq!(layer.limiter.waited.load(Ordering::Relaxed), 2);
}
