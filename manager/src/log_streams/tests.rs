use std::sync::Arc;

use futures::StreamExt;
use jobrelay_proto::v1::{LogEnd, ManagerMessage, manager_message};

use super::*;

fn data(stream: u64, text: &str) -> LogData {
    LogData {
        stream,
        data: text.as_bytes().to_vec(),
        end: None,
    }
}

fn end(stream: u64, reason: LogEndReason, text: &str) -> LogData {
    LogData {
        stream,
        data: Vec::new(),
        end: Some(LogEnd {
            reason: reason as i32,
            message: text.into(),
        }),
    }
}

#[test]
fn each_message_is_data_nothing_an_end_or_a_failure() {
    assert_eq!(step(data(1, "line\n")), Step::Data(Bytes::from("line\n")));
    assert_eq!(step(data(1, "")), Step::Nothing);
    assert_eq!(step(end(1, LogEndReason::Done, "")), Step::Done(None));
    let mut last = end(1, LogEndReason::Done, "");
    last.data = b"tail\n".to_vec();
    assert_eq!(step(last), Step::Done(Some(Bytes::from("tail\n"))));
    assert_eq!(
        step(end(1, LogEndReason::NotFound, "no Pod")),
        Step::Failed(LogEndReason::NotFound, "no Pod".into())
    );
    let mut unknown = end(1, LogEndReason::Done, "new");
    unknown.end.as_mut().unwrap().reason = 99;
    assert_eq!(
        step(unknown),
        Step::Failed(LogEndReason::Unspecified, "new".into())
    );
}

#[tokio::test]
async fn data_reaches_only_its_streams_reader_from_its_own_cluster() {
    let streams = LogStreams::default();
    let mut opened = streams.open("alice", "worker-1", 1).unwrap();
    streams.deliver("worker-2", data(opened.stream, "not from here"));
    streams.deliver("worker-1", data(opened.stream + 1, "another stream"));
    streams.deliver("worker-1", data(opened.stream, "mine"));
    let got = opened.from_agent.recv().await.unwrap();
    assert_eq!(got.data, b"mine");
    assert!(opened.from_agent.try_recv().is_err());
}

#[tokio::test]
async fn an_agent_that_sends_past_the_window_ends_its_stream() {
    let streams = LogStreams::default();
    let mut opened = streams.open("alice", "worker-1", 1).unwrap();
    for _ in 0..=QUEUED {
        streams.deliver("worker-1", data(opened.stream, "x"));
    }
    assert_eq!(streams.open_now(), 0, "the stream was ended");
    let mut read = 0;
    while opened.from_agent.recv().await.is_some() {
        read += 1;
    }
    assert_eq!(
        read, QUEUED,
        "what was queued is read, then the stream ends"
    );
}

#[tokio::test]
async fn a_session_that_ends_ends_its_clusters_streams() {
    let streams = LogStreams::default();
    let mut one = streams.open("alice", "worker-1", 1).unwrap();
    let mut other = streams.open("alice", "worker-2", 1).unwrap();
    let mut newer = streams.open("alice", "worker-1", 2).unwrap();
    streams.session_ended("worker-1", 1);
    assert!(one.from_agent.recv().await.is_none());
    streams.deliver("worker-2", data(other.stream, "still here"));
    assert!(other.from_agent.recv().await.is_some());
    streams.deliver("worker-1", data(newer.stream, "the new session's"));
    assert!(newer.from_agent.recv().await.is_some());
    assert_eq!(streams.open_now(), 2);
}

fn sent(queued: &mut tokio::sync::mpsc::Receiver<ManagerMessage>) -> Vec<manager_message::Kind> {
    let mut kinds = Vec::new();
    while let Ok(message) = queued.try_recv() {
        kinds.extend(message.kind);
    }
    kinds
}

#[tokio::test]
async fn the_body_passes_the_logs_on_and_credits_what_it_took() {
    let streams = Arc::new(LogStreams::default());
    let (outbox, mut queued) = Outbox::new(16);
    let opened = streams.open("alice", "worker-1", 1).unwrap();
    let stream = opened.stream;
    let first = Some(data(stream, ""));
    let body = body(
        Arc::clone(&streams),
        outbox,
        opened,
        first,
        "worker-1".into(),
    );
    streams.deliver("worker-1", data(stream, "one\n"));
    let mut last = end(stream, LogEndReason::Done, "");
    last.data = b"two\n".to_vec();
    streams.deliver("worker-1", last);
    let frames: Vec<_> = body.collect().await;
    let text: Vec<Bytes> = frames
        .into_iter()
        .map(|f| f.unwrap().into_data().unwrap())
        .collect();
    assert_eq!(text, vec![Bytes::from("one\n"), Bytes::from("two\n")]);
    let kinds = sent(&mut queued);
    assert_eq!(
        kinds,
        vec![
            manager_message::Kind::LogCredit(LogCredit { stream, bytes: 4 }),
            manager_message::Kind::LogClose(LogClose { stream }),
        ]
    );
    assert_eq!(streams.open_now(), 0);
}

#[tokio::test]
async fn a_failed_read_or_a_lost_session_ends_the_body_with_an_error() {
    let streams = Arc::new(LogStreams::default());
    let (outbox, _queued) = Outbox::new(16);
    let opened = streams.open("alice", "worker-1", 1).unwrap();
    let failed = Some(end(
        opened.stream,
        LogEndReason::Failed,
        "container main is gone",
    ));
    let frames: Vec<_> = body(
        Arc::clone(&streams),
        outbox.clone(),
        opened,
        failed,
        "worker-1".into(),
    )
    .collect()
    .await;
    assert_eq!(frames.len(), 1);
    let error = frames.into_iter().next().unwrap().unwrap_err();
    assert_eq!(error.to_string(), "container main is gone");

    let opened = streams.open("alice", "worker-1", 1).unwrap();
    let body = body(
        Arc::clone(&streams),
        outbox,
        opened,
        None,
        "worker-1".into(),
    );
    streams.session_ended("worker-1", 1);
    let frames: Vec<_> = body.collect().await;
    let error = frames.into_iter().next().unwrap().unwrap_err();
    assert!(
        error
            .to_string()
            .contains("cluster worker-1's agent disconnected")
    );
}

#[tokio::test]
async fn a_reader_that_goes_away_tells_the_agent_to_stop() {
    let streams = Arc::new(LogStreams::default());
    let (outbox, mut queued) = Outbox::new(16);
    let opened = streams.open("alice", "worker-1", 1).unwrap();
    let stream = opened.stream;
    let body = body(
        Arc::clone(&streams),
        outbox,
        opened,
        None,
        "worker-1".into(),
    );
    drop(body);
    assert_eq!(
        sent(&mut queued),
        vec![manager_message::Kind::LogClose(LogClose { stream })]
    );
    assert_eq!(streams.open_now(), 0);
}
