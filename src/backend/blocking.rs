//! A blocking face for the backends whose well-kept clients are async (etcd's gRPC client,
//! tokio-postgres): a current-thread tokio runtime of the connection's own, on which a future
//! runs only while the caller blocks, up to a deadline; and the interrupt that ends a waiter's
//! wait from another thread.
//!
//! The runtime is made when the connection is, in the thread that uses it (the lease thread,
//! started after the watchdog's fork; an admin command's), and has no worker threads.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::sync::Notify;

use crate::lock::{Failure, Interrupt};

/// A current-thread runtime that runs one future at a time, blocking, until a deadline.
pub(crate) struct Blocking {
    runtime: Runtime,
}

impl Blocking {
    pub(crate) fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime");
        Self { runtime }
    }

    /// Run `future` until it ends or `deadline` passes (None).
    pub(crate) fn block_on<T>(
        &self,
        deadline: Instant,
        future: impl Future<Output = T>,
    ) -> Option<T> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.runtime
            .block_on(async { tokio::time::timeout(left, future).await.ok() })
    }
}

/// Ends a waiter's wait from another thread: the wait, which selects on `notified()`, hears
/// it (kept for the next wait if none is under way).
pub(crate) fn interrupter(notify: &Arc<Notify>) -> Box<dyn Interrupt> {
    Box::new(Wake(Arc::clone(notify)))
}

struct Wake(Arc<Notify>);

impl Interrupt for Wake {
    fn interrupt(&self, _timeout: Duration) -> Result<(), Failure> {
        self.0.notify_one();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_future_runs_until_its_deadline_and_an_interrupt_is_kept() {
        let blocking = Blocking::new();
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(blocking.block_on(soon, async { 7 }), Some(7));
        let late = blocking.block_on(soon, async {
            tokio::time::sleep(Duration::from_secs(5)).await
        });
        assert_eq!(late, None);
        assert!(Instant::now() < soon + Duration::from_secs(1));
        // An interrupt before the wait is heard by it.
        let notify = Arc::new(Notify::new());
        interrupter(&notify).interrupt(Duration::ZERO).unwrap();
        let far = Instant::now() + Duration::from_secs(5);
        assert_eq!(blocking.block_on(far, notify.notified()), Some(()));
    }
}
