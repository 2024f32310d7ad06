//! `logs` end to end against a stand-in API server on loopback (plain
//! HTTP, one connection): the request it makes, each chunk copied out as it
//! arrives, and a refusal shown as the server's own message.

use std::io::Write;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// How long any one step may take before the test says what it waited for.
const DEADLINE: Duration = Duration::from_secs(20);

/// An output that hands each write to the test as it happens.
struct Chunks(mpsc::UnboundedSender<Vec<u8>>);

impl Write for Chunks {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.send(bytes.to_vec());
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A kubeconfig naming a server on `port`, in a file of its own (removed
/// when dropped).
struct Kubeconfig(std::path::PathBuf);

impl Drop for Kubeconfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn kubeconfig(port: u16, test: &str) -> Kubeconfig {
    let path = std::env::temp_dir().join(format!(
        "kubectl-jobrelay-{test}-{}.kubeconfig",
        std::process::id()
    ));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\n\
         users:\n- name: u\n  user: {{}}\ncontexts:\n- name: m\n  context: {{cluster: m, user: u, namespace: ml}}\n\
         current-context: m\n"
    );
    std::fs::write(&path, text).expect("the kubeconfig is written");
    Kubeconfig(path)
}

/// Reads one request's head; returns its request line.
async fn request_line(socket: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = socket.read(&mut byte).await.expect("the request is read");
        assert_eq!(
            read, 1,
            "the client closed before its request ended: {head:?}"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).expect("a UTF-8 head");
    head.lines().next().unwrap_or_default().to_string()
}

async fn chunk(socket: &mut TcpStream, data: &str) {
    let frame = format!("{:x}\r\n{data}\r\n", data.len());
    socket
        .write_all(frame.as_bytes())
        .await
        .expect("a chunk is sent");
}

async fn next(chunks: &mut mpsc::UnboundedReceiver<Vec<u8>>, waiting_for: &str) -> String {
    let chunk = tokio::time::timeout(DEADLINE, chunks.recv())
        .await
        .unwrap_or_else(|_| {
            panic!("no output within {DEADLINE:?} while waiting for {waiting_for:?}")
        })
        .unwrap_or_else(|| panic!("the output closed while waiting for {waiting_for:?}"));
    String::from_utf8(chunk).expect("UTF-8 output")
}

#[tokio::test]
async fn logs_asks_jobrelays_path_and_copies_each_chunk_as_it_arrives() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = listener.local_addr().expect("an address").port();
    let (line_tx, line_rx) = oneshot::channel();
    let (more_tx, more_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("a connection");
        let _ = line_tx.send(request_line(&mut socket).await);
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";
        socket
            .write_all(head.as_bytes())
            .await
            .expect("the head is sent");
        chunk(&mut socket, "step 1\n").await;
        // The second line only once the first was seen out: nothing waits
        // for the stream to end before copying.
        let _ = more_rx.await;
        chunk(&mut socket, "step 2\n").await;
        socket
            .write_all(b"0\r\n\r\n")
            .await
            .expect("the end is sent");
    });
    let config = kubeconfig(port, "stream");
    let args = [
        "--kubeconfig",
        &config.0.to_string_lossy(),
        "logs",
        "job/train",
        "-c",
        "main",
        "-f",
        "--tail",
        "5",
        "--since",
        "2m",
    ]
    .map(String::from)
    .to_vec();
    let (out_tx, mut out_rx) = mpsc::unbounded_channel();
    let run = tokio::spawn(async move { kubectl_jobrelay::run(args, &mut Chunks(out_tx)).await });

    let line = tokio::time::timeout(DEADLINE, line_rx)
        .await
        .expect("a request within the deadline")
        .expect("the server read a request");
    assert_eq!(
        line,
        "GET /apis/visibility.jobrelay.dev/v1alpha1/namespaces/ml/jobs/train/log?container=main&follow=true&tailLines=5&sinceSeconds=120 HTTP/1.1"
    );
    assert_eq!(next(&mut out_rx, "step 1").await, "step 1\n");
    more_tx.send(()).expect("the server waits");
    assert_eq!(next(&mut out_rx, "step 2").await, "step 2\n");
    tokio::time::timeout(DEADLINE, run)
        .await
        .expect("logs ends with the stream")
        .expect("the task ran")
        .expect("logs succeeded");
    server.await.expect("the server ran");
}

#[tokio::test]
async fn a_refusal_is_the_api_servers_message() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = listener.local_addr().expect("an address").port();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("a connection");
        request_line(&mut socket).await;
        let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the Job ml/train has no mirror yet: it waits for a cluster","reason":"NotFound","code":404}"#;
        let response = format!(
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        socket
            .write_all(response.as_bytes())
            .await
            .expect("the answer is sent");
    });
    let config = kubeconfig(port, "refusal");
    let args = ["--kubeconfig", &config.0.to_string_lossy(), "logs", "train"]
        .map(String::from)
        .to_vec();
    let mut out = Vec::new();
    let error = tokio::time::timeout(DEADLINE, kubectl_jobrelay::run(args, &mut out))
        .await
        .expect("logs answers within the deadline")
        .expect_err("the server refused");
    assert_eq!(
        error.to_string(),
        "the Job ml/train has no mirror yet: it waits for a cluster"
    );
    let api = error
        .downcast_ref::<kubectl_jobrelay::ApiError>()
        .expect("an ApiError");
    assert_eq!(api.code, 404);
    assert!(out.is_empty());
    server.await.expect("the server ran");
}
