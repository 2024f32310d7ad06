//! A TCP proxy between an agent and the manager that a test can cut: drop
//! every connection (as a reset or a crashed middlebox would), or black-hole
//! them (bytes vanish and nothing is closed, so only heartbeats and HTTP/2
//! keepalive can notice), and restore. It runs on a thread of its own, so it
//! outlives the test runtime that started it, and stops when dropped.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forwards both ways.
    Pass,
    /// Closes every connection, and every new one at once.
    Drop,
    /// Holds every connection open and forwards nothing.
    BlackHole,
}

/// One link: a listener per upstream (each manager replica), all cut and
/// restored together.
pub struct Proxy {
    /// Where agents dial instead of the manager, one per upstream.
    pub addrs: Vec<SocketAddr>,
    mode: watch::Sender<Mode>,
}

impl Proxy {
    /// A proxy on a free loopback port for each of `upstreams`, forwarding
    /// to it.
    pub fn start(upstreams: &[SocketAddr]) -> std::io::Result<Proxy> {
        let (mode, modes) = watch::channel(Mode::Pass);
        let mut addrs = Vec::new();
        for &upstream in upstreams {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            listener.set_nonblocking(true)?;
            let addr = listener.local_addr()?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let modes = modes.clone();
            std::thread::Builder::new()
                .name(format!("proxy-{addr}"))
                .spawn(move || {
                    runtime.block_on(async move {
                        if let Ok(listener) = TcpListener::from_std(listener) {
                            serve(listener, upstream, modes).await;
                        }
                    })
                })?;
            addrs.push(addr);
        }
        Ok(Proxy { addrs, mode })
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

async fn serve(listener: TcpListener, upstream: SocketAddr, mut modes: watch::Receiver<Mode>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((client, _)) = accepted {
                    tokio::spawn(connection(client, upstream, modes.clone()));
                }
            }
            changed = modes.changed() => if changed.is_err() { return },
        }
    }
}

async fn connection(mut client: TcpStream, upstream: SocketAddr, mut modes: watch::Receiver<Mode>) {
    let mode = *modes.borrow_and_update();
    match mode {
        Mode::Drop => return,
        Mode::BlackHole => return black_hole(modes).await,
        Mode::Pass => {}
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut from_client, mut from_server) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        tokio::select! {
            read = client.read(&mut from_client) => match read {
                Ok(n) if n > 0 => if server.write_all(&from_client[..n]).await.is_err() { return },
                _ => return,
            },
            read = server.read(&mut from_server) => match read {
                Ok(n) if n > 0 => if client.write_all(&from_server[..n]).await.is_err() { return },
                _ => return,
            },
            changed = modes.changed() => {
                if changed.is_err() {
                    return;
                }
                let mode = *modes.borrow_and_update();
                match mode {
                    Mode::Pass => {}
                    Mode::Drop => return,
                    Mode::BlackHole => {
                        // Both sockets stay open, unread, until the cut ends.
                        let _held = (client, server);
                        return black_hole(modes).await;
                    }
                }
            }
        }
    }
}

/// Waits, forwarding nothing, until the proxy stops black-holing.
async fn black_hole(mut modes: watch::Receiver<Mode>) {
    while *modes.borrow_and_update() == Mode::BlackHole {
        if modes.changed().await.is_err() {
            return;
        }
    }
}
