//! One shutdown for the whole process: requested once (by SIGINT or SIGTERM),
//! seen by everything that must stop — controllers, the gRPC servers, every
//! open session, the metrics endpoint — each through a clone of the same
//! [`Shutdown`].

use tokio::sync::watch;

/// A handle on the process's shutdown; cheap to clone.
#[derive(Clone, Debug)]
pub struct Shutdown {
    requested: watch::Receiver<bool>,
}

/// Requests the shutdown its [`Shutdown`]s wait for.
#[derive(Debug)]
pub struct Trigger(watch::Sender<bool>);

impl Trigger {
    pub fn request(&self) {
        self.0.send_replace(true);
    }
}

impl Shutdown {
    /// A shutdown only `Trigger::request` starts (tests, embedding).
    pub fn new() -> (Trigger, Shutdown) {
        let (trigger, requested) = watch::channel(false);
        (Trigger(trigger), Shutdown { requested })
    }

    /// The process's shutdown, requested by SIGINT or SIGTERM. The signals
    /// are listened for once, in a task of its own.
    pub fn on_signals() -> Shutdown {
        let (trigger, shutdown) = Shutdown::new();
        tokio::spawn(async move {
            signal().await;
            tracing::info!("shutdown requested");
            trigger.request();
        });
        shutdown
    }

    /// Resolves once the shutdown was requested (never, if its trigger was
    /// dropped without requesting it).
    pub async fn requested(mut self) {
        if self.requested.wait_for(|r| *r).await.is_err() {
            futures::future::pending::<()>().await;
        }
    }

    pub fn is_requested(&self) -> bool {
        *self.requested.borrow()
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => return futures::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_clone_sees_the_one_request() {
        let (trigger, shutdown) = Shutdown::new();
        let waiters: Vec<_> = (0..3)
            .map(|_| tokio::spawn(shutdown.clone().requested()))
            .collect();
        assert!(!shutdown.is_requested());
        trigger.request();
        for waiter in waiters {
            waiter.await.unwrap();
        }
        assert!(shutdown.is_requested());
        shutdown.clone().requested().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_trigger_is_no_request() {
        let (trigger, shutdown) = Shutdown::new();
        drop(trigger);
        let waited =
            tokio::time::timeout(std::time::Duration::from_secs(3600), shutdown.requested()).await;
        assert!(waited.is_err());
    }
}
