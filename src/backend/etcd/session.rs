//! The lease keep-alives and the watch, async: a lease kept alive once (a renewal, a take that
//! reuses a lease, the record's lease), and a waiter's session with one member as one loop:
//! the watch on what it waits for, its lease kept alive meanwhile, and the four ways a wait
//! ends. No decision is made here that the caller cannot see in the answer.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Error, EventType, WatchFilterType, WatchOptions};
use tokio::sync::Notify;

/// What a waiter watches, from when, and its lease.
pub(super) struct Waiting {
    /// The key watched, or the prefix when `prefix`.
    pub key: String,
    pub prefix: bool,
    /// The revision the queue was read at: the watch starts after it, so that no release in
    /// between is missed.
    pub read_at: i64,
    pub lease: i64,
    /// How often the lease is kept alive.
    pub beat: Duration,
    /// How long the wait may last.
    pub hold: Duration,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Woken {
    /// What it watched changed, its waiting place's lease ran out, the stream ended, or it was
    /// interrupted: the queue is read again.
    Look,
    /// The watch was cancelled, its start compacted away (to this revision): the queue is read
    /// again.
    Cancelled(i64),
    /// The keep-alives went unanswered for two beats: the member is frozen or cut off.
    Unheard,
    /// `hold` passed and nothing changed.
    Quiet,
}

/// The wait: until a deletion is seen (puts are filtered out), the lease is found gone, two
/// beats pass unanswered, `interrupt` is notified, or `hold` passes.
pub(super) async fn wait(
    mut client: Client,
    w: Waiting,
    interrupt: Arc<Notify>,
) -> Result<Woken, Error> {
    let mut options = WatchOptions::new()
        .with_start_revision(w.read_at + 1)
        .with_filters([WatchFilterType::NoPut]);
    if w.prefix {
        options = options.with_prefix();
    }
    let mut stream = client.watch(w.key, Some(options)).await?;
    let (mut keeper, mut alive) = match client.lease_client().keep_alive(w.lease).await {
        Ok(kept) => kept,
        // The only error of this kind a first keep-alive gives: the lease ran out.
        Err(Error::LeaseKeepAliveError(_)) => return Ok(Woken::Look),
        Err(err) => return Err(err),
    };
    let mut heard = tokio::time::Instant::now();
    let mut beat = tokio::time::interval(w.beat);
    let end = tokio::time::sleep(w.hold);
    tokio::pin!(end);
    loop {
        tokio::select! {
            message = stream.message() => match message? {
                Some(r) if r.canceled() => return Ok(Woken::Cancelled(r.compact_revision())),
                Some(r) if r.events().iter().any(|e| e.event_type() == EventType::Delete) => {
                    return Ok(Woken::Look);
                }
                Some(_) => {}
                None => return Ok(Woken::Look),
            },
            answer = alive.message() => match answer? {
                Some(r) if r.ttl() <= 0 => return Ok(Woken::Look),
                Some(_) => heard = tokio::time::Instant::now(),
                None => return Ok(Woken::Look),
            },
            _ = beat.tick() => {
                if heard.elapsed() > beat.period() * 2 {
                    return Ok(Woken::Unheard);
                }
                keeper.keep_alive().await?
            }
            _ = interrupt.notified() => return Ok(Woken::Look),
            _ = &mut end => return Ok(Woken::Quiet),
        }
    }
}

/// A lease kept alive once: false when it is gone.
pub(super) async fn keep_alive(mut client: Client, lease: i64) -> Result<bool, Error> {
    match client.lease_keep_alive(lease).await {
        Ok(_) => Ok(true),
        // The only error of this kind a first keep-alive gives: the lease is gone.
        Err(Error::LeaseKeepAliveError(_)) => Ok(false),
        Err(err) => Err(err),
    }
}
