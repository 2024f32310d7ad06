use super::choose::Target;
use super::read::{ReadFailure, end_of};
use super::*;

#[test]
fn streams_open_until_as_many_are_open_as_the_agent_serves() {
    for open in 0..MAX_STREAMS {
        assert_eq!(admit(open, false, "worker-1"), Ok(()), "{open} open");
    }
    let end = admit(MAX_STREAMS, false, "worker-1").expect_err("one too many");
    assert_eq!(end.reason(), LogEndReason::TooMany);
    assert_eq!(
        end.message,
        "the agent of cluster worker-1 serves 8 log streams, as many as it serves at once (8); \
         try again when one ends"
    );
}

#[test]
fn a_stream_number_already_open_is_invalid() {
    let end = admit(1, true, "worker-1").expect_err("a number reused");
    assert_eq!(end.reason(), LogEndReason::Invalid);
}

fn failed(pod: &str, not_found: bool, message: &str) -> ReadFailure {
    ReadFailure {
        target: Target {
            pod: pod.into(),
            container: "main".into(),
        },
        not_found,
        message: message.into(),
    }
}

#[test]
fn a_stream_ends_by_how_its_reads_ended() {
    let waiting = r#"container "main" in pod "a" is waiting to start: ContainerCreating"#;
    // (failures, reads, reason, message)
    let cases = [
        (vec![], 1, LogEndReason::Done, ""),
        (vec![], 3, LogEndReason::Done, ""),
        (
            vec![failed("a", false, waiting)],
            1,
            LogEndReason::Failed,
            waiting,
        ),
        (
            vec![failed("a", true, r#"pods "a" not found"#)],
            1,
            LogEndReason::NotFound,
            r#"pods "a" not found"#,
        ),
        (
            vec![failed("a", false, "refused"), failed("b", true, "gone")],
            3,
            LogEndReason::Failed,
            "pod/a/main: refused; pod/b/main: gone",
        ),
        (
            vec![failed("b", true, "gone")],
            2,
            LogEndReason::NotFound,
            "pod/b/main: gone",
        ),
    ];
    for (failures, reads, reason, message) in cases {
        let end = end_of(&failures, reads);
        assert_eq!(
            (end.reason(), end.message.as_str()),
            (reason, message),
            "{failures:?} of {reads}"
        );
    }
}

#[test]
fn a_long_failure_is_cut_short() {
    let failures: Vec<ReadFailure> = (0..100)
        .map(|i| failed(&format!("pod-{i}"), false, &"x".repeat(200)))
        .collect();
    let end = end_of(&failures, 100);
    assert!(end.message.len() <= 4096, "{}", end.message.len());
    assert!(end.message.ends_with('…'));
}

#[test]
fn a_log_data_message_carries_its_stream_bytes_and_end() {
    let message = log_data(7, b"line\n".to_vec(), None);
    let Some(agent_message::Kind::LogData(data)) = message.kind else {
        panic!("LogData: {message:?}");
    };
    assert_eq!(
        (data.stream, data.data, data.end),
        (7, b"line\n".to_vec(), None)
    );
}

/// The logs of a worker holding the mirror `train` (origin UID u1) in `ml`
/// with Pods `train-a` and `train-b`, whose logs are 64 KiB each.
async fn serving_train() -> (Logs, LogMetrics) {
    use jobrelay_proto::wire::ORIGIN_UID_LABEL;
    use k8s_openapi::api::batch::v1::Job;
    use std::sync::Arc;

    let labels = serde_json::json!({ORIGIN_UID_LABEL: "u1"});
    let job: Job = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "train", "namespace": "ml", "labels": labels},
    }))
    .expect("a Job");
    let pod = |name: &str| -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ml", "labels": labels},
            "spec": {"containers": [{"name": "main"}]},
        }))
        .expect("a Pod")
    };
    let changes = Arc::new(crate::watched::Changes::default());
    let jobs = crate::watched::listed(vec![job], &changes).await;
    let pods = crate::watched::listed(vec![pod("train-a"), pod("train-b")], &changes).await;
    let log = vec![b'x'; 64 * 1024];
    let api = super::read::tests::api_server(&[("train-a", log.clone()), ("train-b", log)]);
    let metrics = LogMetrics::default();
    let logs = Logs::new(
        api.into_client(),
        "worker-1".into(),
        Objects::new(jobs, None),
        pods,
        metrics.clone(),
    );
    (logs, metrics)
}

fn opening(stream: u64, origin_uid: &str) -> LogOpen {
    LogOpen {
        stream,
        namespace: "ml".into(),
        origin_uid: origin_uid.into(),
        window: 1024,
        ..LogOpen::default()
    }
}

/// The next message to the manager within ten seconds, as (stream, bytes,
/// end).
async fn told(sent: &mut mpsc::UnboundedReceiver<AgentMessage>) -> (u64, usize, Option<LogEnd>) {
    let message = tokio::time::timeout(std::time::Duration::from_secs(10), sent.recv())
        .await
        .expect("waited 10s for a message to the manager")
        .expect("the session's outbox is open");
    match message.kind {
        Some(agent_message::Kind::LogData(data)) => (data.stream, data.data.len(), data.end),
        other => panic!("a LogData, not {other:?}"),
    }
}

/// Waits until the gauge of open streams shows `open`.
async fn streams_open(metrics: &LogMetrics, open: i64) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while metrics.streams.get() != open {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited 10s for {open} open streams; {} are",
            metrics.streams.get()
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_session_serves_as_many_streams_as_it_may_and_ends_them_all_with_it() {
    let (mut logs, metrics) = serving_train().await;
    let (outbox, mut sent) = mpsc::unbounded_channel();
    logs.open(opening(1, "u1"));
    assert!(sent.try_recv().is_err(), "no session, no stream");
    logs.start_session(outbox);
    logs.open(opening(11, "unknown"));
    let (stream, _, end) = told(&mut sent).await;
    let end = end.expect("refused at once");
    assert_eq!((stream, end.reason()), (11, LogEndReason::NotFound));

    for stream in 1..=MAX_STREAMS as u64 {
        logs.open(opening(stream, "u1"));
        assert_eq!(told(&mut sent).await, (stream, 0, None), "the read opened");
        assert_eq!(
            told(&mut sent).await,
            (stream, 1024, None),
            "a window's worth"
        );
    }
    streams_open(&metrics, MAX_STREAMS as i64).await;
    logs.open(opening(9, "u1"));
    let (stream, bytes, end) = told(&mut sent).await;
    let end = end.expect("refused at once");
    assert_eq!((stream, bytes, end.reason()), (9, 0, LogEndReason::TooMany));

    logs.credit(LogCredit {
        stream: 99,
        bytes: 1024,
    });
    logs.close(LogClose { stream: 1 });
    streams_open(&metrics, MAX_STREAMS as i64 - 1).await;
    logs.open(opening(10, "u1"));
    assert_eq!(told(&mut sent).await, (10, 0, None), "a slot freed");
    assert_eq!(told(&mut sent).await, (10, 1024, None));
    logs.credit(LogCredit {
        stream: 10,
        bytes: 1024,
    });
    assert_eq!(told(&mut sent).await, (10, 1024, None), "credit, more");

    logs.end_session();
    streams_open(&metrics, 0).await;
    assert!(sent.try_recv().is_err(), "nothing more of any stream");
}
