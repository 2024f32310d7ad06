//! The tasks a binary runs beside its main work (watches, fan-outs, the
//! health and metrics endpoints, periodic passes), stopped together at the
//! shutdown and drained together: the process ends once every one of them
//! has returned, none left running or cut off unawaited.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::Shutdown;
use crate::shutdown::Trigger;

/// A set of tasks that stop at the shutdown, or when drained. Clones add
/// to the same set.
#[derive(Clone, Debug)]
pub struct Tasks {
    tracker: TaskTracker,
    stop: Arc<Trigger>,
    stopping: Shutdown,
}

impl Tasks {
    /// Tasks that stop once `shutdown` is requested, or once drained.
    pub fn new(shutdown: &Shutdown) -> Tasks {
        let (stop, stopping) = Shutdown::new();
        let tasks = Tasks {
            tracker: TaskTracker::new(),
            stop: Arc::new(stop),
            stopping,
        };
        let requested = shutdown.clone().requested();
        let (stop, drained) = (Arc::clone(&tasks.stop), tasks.shutdown());
        tasks.tracker.spawn(async move {
            tokio::select! {
                () = requested => stop.request(),
                () = drained.requested() => {}
            }
        });
        tasks
    }

    /// The shutdown these tasks stop at: the process's, or the drain.
    /// Servers and loops that stop by themselves are given this one.
    pub fn shutdown(&self) -> Shutdown {
        self.stopping.clone()
    }

    /// Runs `task` until it returns or the tasks are stopped.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stopped = self.shutdown().requested();
        self.tracker.spawn(async move {
            tokio::select! {
                () = task => {}
                () = stopped => {}
            }
        });
    }

    /// Runs `task`, which stops by itself at [`Tasks::shutdown`], to its
    /// end; the drain waits for it.
    pub fn spawn_to_end<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(task)
    }

    /// Stops every task (whether or not the shutdown was requested) and
    /// waits until each has returned; gives up, saying how many are left,
    /// after `grace`.
    pub async fn drain(self, grace: Duration) {
        self.stop.request();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                left = self.tracker.len(),
                "tasks still running {}s after the shutdown; stopping without them",
                grace.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    const GRACE: Duration = Duration::from_secs(5);

    /// Sets its flag when dropped: the task's future was let go.
    struct Dropped(Arc<AtomicBool>, Option<tokio::sync::oneshot::Sender<()>>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
            if let Some(said) = self.1.take() {
                let _ = said.send(());
            }
        }
    }

    /// A task that never ends by itself among `tasks`: its flag says it was
    /// let go, and the receiver hears it.
    fn spawn_forever(tasks: &Tasks) -> (Arc<AtomicBool>, tokio::sync::oneshot::Receiver<()>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let (said, heard) = tokio::sync::oneshot::channel();
        let guard = Dropped(Arc::clone(&dropped), Some(said));
        tasks.spawn(async move {
            let _guard = guard;
            futures::future::pending::<()>().await;
        });
        (dropped, heard)
    }

    #[tokio::test]
    async fn the_shutdown_stops_a_task_that_runs_forever_before_any_drain() {
        let (trigger, shutdown) = Shutdown::new();
        let tasks = Tasks::new(&shutdown);
        let (_, heard) = spawn_forever(&tasks);
        trigger.request();
        tokio::time::timeout(GRACE, heard)
            .await
            .expect("the task stops at the shutdown")
            .expect("its guard says so");
        tasks.drain(GRACE).await;
    }

    #[tokio::test]
    async fn a_drain_without_a_shutdown_stops_the_tasks_too() {
        let (_trigger, shutdown) = Shutdown::new();
        let tasks = Tasks::new(&shutdown);
        let (dropped, _) = spawn_forever(&tasks);
        tasks.drain(GRACE).await;
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_does_not_end_is_left_after_the_grace() {
        let (trigger, shutdown) = Shutdown::new();
        let tasks = Tasks::new(&shutdown);
        tasks.spawn_to_end(futures::future::pending::<()>());
        trigger.request();
        let start = tokio::time::Instant::now();
        tasks.drain(GRACE).await;
        assert_eq!(start.elapsed(), GRACE);
    }

    #[tokio::test]
    async fn a_task_run_to_its_end_is_waited_for_not_cut_off() {
        let (_trigger, shutdown) = Shutdown::new();
        let tasks = Tasks::new(&shutdown);
        let finished = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&finished);
        let stopping = tasks.shutdown();
        tasks.spawn_to_end(async move {
            stopping.requested().await;
            tokio::task::yield_now().await;
            flag.store(true, Ordering::SeqCst);
        });
        tasks.drain(GRACE).await;
        assert!(finished.load(Ordering::SeqCst));
    }
}
