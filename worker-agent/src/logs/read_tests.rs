//! A stream's task against an API server that answers `pods/log` from a
//! table: what it sends, when it waits for credit, and how it ends.

use std::collections::HashMap;
use std::time::Duration;

use http::{Request, Response};
use jobrelay_proto::v1::agent_message::Kind;
use jobrelay_proto::v1::{LogData, LogEnd};
use kube::client::Body;

use super::*;

/// An API server whose Pods' logs are `logs` (pod → body); a Pod not
/// there is waiting to start.
pub(in crate::logs) fn api_server(logs: &[(&str, Vec<u8>)]) -> Api<Pod> {
    let logs: HashMap<String, Vec<u8>> = logs
        .iter()
        .map(|(pod, log)| (pod.to_string(), log.clone()))
        .collect();
    let service = tower::service_fn(move |request: Request<Body>| {
        let path = request.uri().path().to_string();
        let pod = path
            .strip_prefix("/api/v1/namespaces/ml/pods/")
            .and_then(|p| p.strip_suffix("/log"))
            .unwrap_or_default()
            .to_string();
        let found = logs.get(&pod).cloned();
        async move {
            let response = match found {
                Some(log) => Response::new(Body::from(log)),
                None => {
                    let message = format!(
                        r#"container \"main\" in pod \"{pod}\" is waiting to start: ContainerCreating"#
                    );
                    let status = format!(
                        r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"{message}","reason":"BadRequest","code":400}}"#
                    );
                    Response::builder()
                        .status(400)
                        .body(Body::from(status.into_bytes()))
                        .expect("a response")
                }
            };
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    Api::namespaced(kube::Client::new(service, "ml"), "ml")
}

/// The stream of `targets` (prefixed with more than one), its window
/// `window`; where its messages go, and where the test credits it.
fn serving(
    pods: Api<Pod>,
    targets: &[&str],
    window: u64,
) -> (
    Serving,
    mpsc::UnboundedReceiver<AgentMessage>,
    watch::Sender<u64>,
) {
    let (outbox, sent) = mpsc::unbounded_channel();
    let (credits, credited) = watch::channel(0);
    let serving = Serving {
        stream: 3,
        pods,
        targets: targets
            .iter()
            .map(|pod| Target {
                pod: pod.to_string(),
                container: "main".into(),
            })
            .collect(),
        prefixed: targets.len() > 1,
        params: LogParams::default(),
        window: Window::asked(window),
        credited,
        outbox,
        pace: LogPace::default(),
        bytes_sent: Counter::default(),
    };
    (serving, sent, credits)
}

/// The next message of stream 3 within ten seconds.
async fn next(sent: &mut mpsc::UnboundedReceiver<AgentMessage>) -> LogData {
    let message = tokio::time::timeout(Duration::from_secs(10), sent.recv())
        .await
        .expect("waited 10s for a LogData")
        .expect("the stream's task is still there");
    match message.kind {
        Some(Kind::LogData(data)) if data.stream == 3 => data,
        other => panic!("a LogData of stream 3, not {other:?}"),
    }
}

/// Whether nothing comes while the task can do nothing more (paused
/// time moves on only once every task waits).
async fn nothing_comes(sent: &mut mpsc::UnboundedReceiver<AgentMessage>) -> bool {
    tokio::time::timeout(Duration::from_secs(60), sent.recv())
        .await
        .is_err()
}

/// The data of messages until the stream's end, and the end.
async fn to_the_end(sent: &mut mpsc::UnboundedReceiver<AgentMessage>) -> (Vec<u8>, LogEnd) {
    let mut read = Vec::new();
    loop {
        let data = next(sent).await;
        read.extend(data.data);
        if let Some(end) = data.end {
            return (read, end);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_sends_its_window_in_chunks_then_waits_for_credit() {
    let log: Vec<u8> = (0..100 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let (serving, mut sent, credits) = serving(api_server(&[("a", log.clone())]), &["a"], 40_000);
    let task = tokio::spawn(serve(serving));
    let opened = next(&mut sent).await;
    assert!(
        opened.data.is_empty() && opened.end.is_none(),
        "first, that the read opened"
    );
    let lens = [next(&mut sent).await, next(&mut sent).await].map(|d| d.data.len());
    assert_eq!(lens, [CHUNK_BYTES, 40_000 - CHUNK_BYTES]);
    assert!(nothing_comes(&mut sent).await, "the window is full");
    let mut read = Vec::new();
    let mut credited = 0;
    let end = loop {
        credited += 40_000;
        credits.send_replace(credited);
        let (data, end) = to_the_end_or_full(&mut sent).await;
        read.extend(data);
        if let Some(end) = end {
            break end;
        }
    };
    assert_eq!(end.reason(), LogEndReason::Done);
    assert_eq!(read.len() + 40_000, log.len());
    assert_eq!(read, log[40_000..], "in order, as read");
    task.await.expect("the task ends");
}

/// The data sent until the window is full again, or the end.
async fn to_the_end_or_full(
    sent: &mut mpsc::UnboundedReceiver<AgentMessage>,
) -> (Vec<u8>, Option<LogEnd>) {
    let mut read = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), sent.recv()).await;
        let Ok(Some(AgentMessage {
            kind: Some(Kind::LogData(data)),
        })) = message
        else {
            return (read, None);
        };
        assert!(data.data.len() <= CHUNK_BYTES);
        read.extend(data.data);
        if data.end.is_some() {
            return (read, data.end);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn all_pods_are_read_at_once_each_line_prefixed() {
    let pods = api_server(&[("a", b"a1\na2".to_vec()), ("b", b"b1\n".to_vec())]);
    let (serving, mut sent, _credits) = serving(pods, &["a", "b"], 0);
    tokio::spawn(serve(serving));
    let (read, end) = to_the_end(&mut sent).await;
    assert_eq!(end.reason(), LogEndReason::Done);
    let mut lines: Vec<&str> = std::str::from_utf8(&read).expect("UTF-8").lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["[pod/a/main] a1", "[pod/a/main] a2", "[pod/b/main] b1"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_container_not_started_ends_the_stream_failed_with_the_api_servers_message() {
    let (serving, mut sent, _credits) = serving(api_server(&[]), &["a"], 0);
    tokio::spawn(serve(serving));
    let first = next(&mut sent).await;
    assert!(first.end.is_some(), "no read opened: the end comes first");
    let (read, end) = (first.data, first.end.expect("an end"));
    assert!(read.is_empty());
    assert_eq!(end.reason(), LogEndReason::Failed);
    assert_eq!(
        end.message,
        r#"container "main" in pod "a" is waiting to start: ContainerCreating"#
    );
}

#[tokio::test(start_paused = true)]
async fn of_several_pods_those_read_are_sent_and_the_end_names_those_not() {
    let pods = api_server(&[("a", b"a1\n".to_vec())]);
    let (serving, mut sent, _credits) = serving(pods, &["a", "b"], 0);
    tokio::spawn(serve(serving));
    let (read, end) = to_the_end(&mut sent).await;
    assert_eq!(read, b"[pod/a/main] a1\n");
    assert_eq!(end.reason(), LogEndReason::Failed);
    assert!(
        end.message.starts_with("pod/b/main: container"),
        "{}",
        end.message
    );
}

#[tokio::test(start_paused = true)]
async fn a_closed_stream_sends_nothing_more() {
    let log = vec![b'x'; 64 * 1024];
    let (serving, mut sent, credits) = serving(api_server(&[("a", log)]), &["a"], 1024);
    let task = tokio::spawn(serve(serving));
    assert_eq!(next(&mut sent).await.data.len(), 0, "the read opened");
    assert_eq!(next(&mut sent).await.data.len(), 1024);
    drop(credits);
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the task ends once its stream is closed")
        .expect("no panic");
    assert!(sent.try_recv().is_err(), "no end either");
}
