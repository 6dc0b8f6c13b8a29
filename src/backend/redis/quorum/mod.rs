//! A quorum of independent Redis masters (the Redlock algorithm): the same token on every node,
//! the lock held only with a majority of them within the lease's validity, released everywhere.
//!
//! The lease thread and the supervisor need nothing special: they count the lease from just
//! before [`Locker::acquire`] was called (before any node was asked) minus the drift allowance,
//! which is exactly Redlock's validity, `ttl − elapsed − drift` from the earliest request. A
//! quorum acquisition is refused unless at least half the ttl of that validity is left when it
//! completes, fencing phases included.

use std::thread;
use std::time::{Duration, Instant};

use crate::backend::block::Block;
use crate::backend::redis::single::SingleRedis;
use crate::backend::redis::transport::Identity;
use crate::backend::redis::waiters::BLPOP;
use crate::clock::Moment;
use crate::lock::validity::{deadline, random_unit};
use crate::lock::{Acquire, Failure, Held, Interrupt, Locker, Renewal, RunEnding, Until};

/// A lock on N independent masters, each a [`SingleRedis`] with its own connection; every
/// request goes to all of them at once, one thread per node, except a waiter's wait, which
/// blocks on one of them (see `wait` below).
pub struct Quorum {
    nodes: Vec<SingleRedis>,
    /// Split votes in a row, for the retry delay's backoff.
    splits: u32,
    /// The ttl of the last acquire, to keep the release's per-node time limit small too.
    ttl: Option<Duration>,
    /// The nodes by name (as shown), the order in which a waiter listens on them.
    order: Vec<usize>,
    /// The place in `order` of the node a waiter listens on.
    listening: usize,
}

/// The time limit of one node's request (connecting included): small against the ttl, as the
/// Redlock algorithm asks, so that a node that does not answer costs little: a fiftieth of the
/// ttl (600 ms at the default 30 s), at least 100 ms (a new connection's few round trips, TLS
/// included, on a slow network) and at most 1 s; never more than the caller's `timeout`. A dead
/// node of three delays the start by this once, and the release by this once.
pub fn node_timeout(ttl: Duration, timeout: Duration) -> Duration {
    (ttl / 50)
        .clamp(Duration::from_millis(100), Duration::from_secs(1))
        .min(timeout)
}

/// The wait before retrying after the `splits`-th split vote in a row: 50 to 250 ms at first
/// (as redsync), the random part doubling with each further split up to 50 ms to 3.25 s, so
/// waiters that cannot see a majority anywhere (a node down) do not poll fast for long.
/// `random` is uniform in [0, 1).
pub fn split_delay(splits: u32, random: f64) -> Duration {
    let spread = Duration::from_millis(200) * (1u32 << splits.saturating_sub(1).min(4));
    Duration::from_millis(50) + spread.mul_f64(random.clamp(0.0, 1.0))
}

/// The majority of `n` nodes.
pub fn majority(n: usize) -> usize {
    n / 2 + 1
}

/// Whether a lease counted from `sent` still has at least half the ttl of validity left.
fn valid(sent: Moment, ttl: Duration) -> bool {
    deadline(sent, ttl).until() >= ttl / 2
}

/// The nodes that are one server, if any: the first `run_id` that more than one of
/// `identities` (a node's, None when unknown) shares, and the places of the nodes that have it.
/// A node whose server did not say which it is matches none.
pub fn same_server(identities: &[Option<&str>]) -> Option<Vec<usize>> {
    identities.iter().enumerate().find_map(|(i, id)| {
        let id = (*id)?;
        let same: Vec<usize> = (i..identities.len())
            .filter(|&j| identities[j] == Some(id))
            .collect();
        (same.len() > 1).then_some(same)
    })
}

/// Why a quorum whose `nodes` are one server is refused (exit 64), as one line.
pub fn same_server_refusal(nodes: &[String]) -> String {
    let named = match nodes {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    format!(
        "{named} are one Redis server (INFO server gives them the same run_id): the nodes of a \
         quorum must be independent servers; not running the command"
    )
}

impl Quorum {
    pub fn new(mut nodes: Vec<SingleRedis>) -> Self {
        assert!(!nodes.is_empty(), "a quorum needs nodes");
        // Names cannot tell whether two nodes are one server; each connection's set-up asks.
        for node in &mut nodes {
            node.conn.identify();
        }
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by_cached_key(|&i| nodes[i].endpoint().to_string());
        Self {
            nodes,
            splits: 0,
            ttl: None,
            order,
            listening: 0,
        }
    }

    fn majority(&self) -> usize {
        majority(self.nodes.len())
    }

    /// `request` on every node selected by `on` at once; None for the others.
    fn each<T: Send>(
        &mut self,
        on: &[bool],
        request: impl Fn(&mut SingleRedis) -> T + Sync,
    ) -> Vec<Option<T>> {
        let request = &request;
        thread::scope(|scope| {
            let handles: Vec<_> = self
                .nodes
                .iter_mut()
                .zip(on)
                .map(|(node, &on)| on.then(|| scope.spawn(move || request(node))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.map(|h| h.join().expect("a quorum request thread panicked")))
                .collect()
        })
    }

    fn all(&self) -> Vec<bool> {
        vec![true; self.nodes.len()]
    }

    /// A connection to every node, opened by `until` where none is (its set-up asks which
    /// server it is); what each node is, or why it could not be reached. Nothing is sent
    /// where a connection is open already.
    fn connect(&mut self, until: Instant) -> Vec<Result<Option<Identity>, Failure>> {
        let open: Vec<_> = self.nodes.iter().map(|n| n.conn.open_identity()).collect();
        let closed: Vec<bool> = open.iter().map(Option::is_none).collect();
        let opened = self.each(&closed, |node| node.conn.identity(until));
        open.into_iter()
            .zip(opened)
            .map(|(open, opened)| match (open, opened) {
                (Some(identity), _) => Ok(identity),
                (None, Some(opened)) => opened,
                (None, None) => unreachable!("asked of every node without a connection"),
            })
            .collect()
    }

    /// After a failed attempt: delete our key on every node, since a request that timed out
    /// may have landed. Best effort (the keys expire anyway), and quiet: no wake-ups, which
    /// this waiter's own next wait would take at once and spin on.
    /// `waiting`: the attempt (with this ttl) ended turned away, so the waiter is recorded as
    /// waiting on every node, the ones that let it in included: it may block on any of them,
    /// and a release there wakes only a waiter it knows of.
    fn clean_up(&mut self, waiting: Option<Duration>, timeout: Duration) {
        let all = self.all();
        self.each(&all, |node| node.undo(waiting, timeout));
    }

    /// The fencing token for a holder of a majority (see docs/high-availability.md): read the counters of a
    /// majority, then raise a majority to one past the highest. None when no majority answered.
    fn fence(&mut self, answered: &[bool], timeout: Duration) -> Result<i64, Unfenced> {
        let read = self.each(answered, |node| node.read_fence(timeout));
        let counters: Vec<i64> = read.into_iter().flatten().filter_map(Result::ok).collect();
        if counters.len() < self.majority() {
            return Err(Unfenced::Unanswered);
        }
        let highest = counters.iter().max().copied().unwrap_or_default();
        let token = highest.checked_add(1).ok_or(Unfenced::AtTheEnd)?;
        let raised = self.each(answered, |node| node.raise_fence(token, timeout));
        let ok = raised.iter().flatten().filter(|r| r.is_ok()).count();
        if ok < self.majority() {
            return Err(Unfenced::Unanswered);
        }
        // Each node's record of the run ends with the token the command got, not its own.
        for node in &mut self.nodes {
            node.fenced_as(token);
        }
        Ok(token)
    }
}

/// Why a quorum that took the lock on a majority gave it no fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unfenced {
    /// Fewer than a majority answered the read of the counters, or their raise.
    Unanswered,
    /// A counter read is the largest 64-bit integer: no token can follow it.
    AtTheEnd,
}

impl Quorum {
    /// After an attempt some nodes turned away: a wait listens on the first of them by name.
    /// Their releases are the wake-ups it needs. A node that let it in may have had its release
    /// (and its wake-up) already, while the others had not: a retry woken there finds them
    /// still held, and a wait on that node again would hear none of their releases, sitting
    /// out its fallback timer instead. Waiters turned away by the same nodes still listen on
    /// the same one.
    fn listen_where_held(&mut self, replies: &[Option<Result<Acquire, Failure>>]) {
        let held = |i: &usize| matches!(replies[*i], Some(Ok(Acquire::Busy { .. })));
        if let Some(place) = self.order.iter().position(held) {
            self.listening = place;
        }
    }

    /// What a failed attempt that found the lock held on the nodes in `busy` (each with the
    /// lease it saw left) comes to, if any node was busy.
    fn busy(&mut self, busy: &[Option<Duration>]) -> Option<Acquire> {
        self.splits = if !busy.is_empty() && busy.len() < self.majority() {
            self.splits.saturating_add(1)
        } else {
            0
        };
        let first_end = busy.iter().flatten().min().copied();
        if busy.len() >= self.majority() {
            // Someone may hold a majority: wait for its release (a wake-up) or for the first of
            // the leases seen to run out.
            return Some(Acquire::Busy {
                remaining: first_end,
                queued: false,
            });
        }
        if busy.is_empty() {
            return None;
        }
        // A split vote (contenders took a node or two each, or a node is down): nobody may
        // release, so retry after a random delay, as Redlock prescribes, which desynchronises
        // the contenders; never later than the first lease seen runs out.
        let delay = split_delay(self.splits, random_unit());
        Some(Acquire::Busy {
            queued: false,
            remaining: Some(first_end.map_or(delay, |r| delay.min(r))),
        })
    }
}

impl Quorum {
    /// Why the nodes are refused as a quorum, when two of the `connected` are one server.
    fn one_server(&self, connected: &[Result<Option<Identity>, Failure>]) -> Option<String> {
        let ids: Vec<Option<&str>> = connected
            .iter()
            .map(|r| {
                r.as_ref()
                    .ok()
                    .and_then(Option::as_ref)
                    .and_then(Identity::run_id)
            })
            .collect();
        let same = same_server(&ids)?;
        let nodes: Vec<String> = same
            .iter()
            .map(|&i| self.nodes[i].endpoint().to_string())
            .collect();
        Some(same_server_refusal(&nodes))
    }

    /// The acquire on every node `connected` reached; a node that could not be reached
    /// answers it with why.
    fn acquire_reached(
        &mut self,
        connected: Vec<Result<Option<Identity>, Failure>>,
        ttl: Duration,
        per_node: Duration,
    ) -> Vec<Option<Result<Acquire, Failure>>> {
        let reached: Vec<bool> = connected.iter().map(Result::is_ok).collect();
        let acquired = self.each(&reached, |node| node.acquire(ttl, per_node));
        acquired
            .into_iter()
            .zip(connected)
            .map(|(acquired, connected)| match connected {
                Err(failure) => Some(Err(failure)),
                Ok(_) => acquired,
            })
            .collect()
    }

    /// The refusal when `taken` nodes let us in but a fencing counter is at its end.
    fn fence_at_the_end(&self, taken: usize) -> Failure {
        let n = self.nodes.len();
        let counter = crate::report::shell_quote(&self.nodes[0].keys.fence);
        Failure::Refused(
            format!(
                "took the lock on {taken} of {n} Redis nodes, but a fencing counter \
                 there is {} (the largest 64-bit integer, which no token can \
                 follow); not running the command (delete it with `redis-cli DEL \
                 {counter}` on each node, and the next holder's token carries on \
                 from the servers' clocks)",
                i64::MAX
            )
            .into(),
        )
    }

    /// An attempt that did not end holding a valid majority: undo it everywhere, then wait
    /// where the lock is held, or fail with the first failure's class.
    fn not_taken(
        &mut self,
        replies: &[Option<Result<Acquire, Failure>>],
        taken: usize,
        ttl: Duration,
        per_node: Duration,
    ) -> Result<Acquire, Failure> {
        let busy = replies
            .iter()
            .flatten()
            .filter_map(|r| match r {
                Ok(Acquire::Busy { remaining, .. }) => Some(*remaining),
                _ => None,
            })
            .collect::<Vec<_>>();
        self.listen_where_held(replies);
        self.clean_up((!busy.is_empty()).then_some(ttl), per_node);
        if let Some(busy) = self.busy(&busy) {
            return Ok(busy);
        }
        let n = self.nodes.len();
        let message = if taken >= self.majority() {
            format!("took the lock on {taken} of {n} Redis nodes, but too late to be valid")
        } else {
            shortfall("granted the lock", taken, n, first_failure(replies))
        };
        // Of the first failure's class, a refusal first: it ends a wait; the others are waited out.
        Err(match first_failure(replies) {
            Some(Failure::Refused(_)) => Failure::Refused(message.into()),
            Some(Failure::Unacknowledged(_)) => Failure::Unacknowledged(message.into()),
            Some(Failure::Unreachable(_)) | None => Failure::Unreachable(message.into()),
        })
    }
}

/// What an attempt comes to whatever the other nodes said, if any node settled it: a run
/// skipped by `--min-interval` on one node is skipped (the shortest `ago`), and a node whose
/// holders use the key otherwise (a semaphore) shows the key is not this lock.
fn settled(replies: &[Option<Result<Acquire, Failure>>]) -> Option<Acquire> {
    let answers = || replies.iter().flatten().filter_map(|r| r.as_ref().ok());
    let skipped = answers()
        .filter_map(|a| match a {
            Acquire::Skipped { ago } => Some(*ago),
            _ => None,
        })
        .min();
    if let Some(ago) = skipped {
        return Some(Acquire::Skipped { ago });
    }
    answers().find_map(|a| match a {
        Acquire::Mismatch { found } => Some(Acquire::Mismatch {
            found: found.clone(),
        }),
        _ => None,
    })
}

/// The first failure among `replies`, for the message; Refused before Unreachable.
fn first_failure<T>(replies: &[Option<Result<T, Failure>>]) -> Option<&Failure> {
    let failures = || replies.iter().flatten().filter_map(|r| r.as_ref().err());
    failures()
        .find(|f| matches!(f, Failure::Refused(_)))
        .or_else(|| failures().next())
}

fn shortfall(what: &str, got: usize, n: usize, first: Option<&Failure>) -> String {
    let why = first.map_or_else(String::new, |f| format!(": {f}"));
    format!(
        "only {got} of {n} Redis nodes {what} (a majority is {}){why}",
        majority(n)
    )
}

impl Locker for Quorum {
    fn acquire(&mut self, ttl: Duration, timeout: Duration) -> Result<Acquire, Failure> {
        // The lease thread took its `sent` just before this call: no earlier than this.
        let sent = Moment::now();
        self.ttl = Some(ttl);
        let per_node = node_timeout(ttl, timeout);
        // Connections first, so that nothing is written to any node until the quorum is
        // known to be of distinct servers. The acquire then has its own time limit: a node
        // that is slow to connect must not leave the others none.
        let connected = self.connect(Instant::now() + per_node);
        if let Some(refusal) = self.one_server(&connected) {
            return Ok(Acquire::Misconfigured(refusal));
        }
        let replies = self.acquire_reached(connected, ttl, per_node);
        if let Some(settled) = settled(&replies) {
            self.clean_up(None, per_node);
            return Ok(settled);
        }
        let taken = replies
            .iter()
            .flatten()
            .filter(|r| matches!(r, Ok(Acquire::Acquired { .. })))
            .count();
        if taken >= self.majority() && valid(sent, ttl) {
            let answered: Vec<bool> = replies.iter().map(|r| matches!(r, Some(Ok(_)))).collect();
            match self.fence(&answered, per_node) {
                Ok(fence) if valid(sent, ttl) => return Ok(Acquire::Acquired { fence }),
                Ok(_) | Err(Unfenced::Unanswered) => {}
                Err(Unfenced::AtTheEnd) => {
                    self.clean_up(None, per_node);
                    return Err(self.fence_at_the_end(taken));
                }
            }
        }
        self.not_taken(&replies, taken, ttl, per_node)
    }

    /// With `--min-replicas`, it applies per node: a node whose replicas did not acknowledge
    /// its extension counts as not renewed, so the lease needs a majority of nodes each
    /// extended and acknowledged by that many of its own replicas.
    fn extend(&mut self, ttl: Duration, timeout: Duration) -> Result<Renewal, Failure> {
        let sent = Moment::now();
        let all = self.all();
        let timeout = node_timeout(ttl, timeout);
        let replies = self.each(&all, |node| node.extend(ttl, timeout));
        let count = |found: Renewal| {
            replies
                .iter()
                .flatten()
                .filter(|r| matches!(r, Ok(f) if *f == found))
                .count()
        };
        let ours = count(Renewal::Extended);
        let gone = count(Renewal::Lost(Held::Gone));
        let taken = count(Renewal::Lost(Held::Theirs));
        let unacknowledged = replies.iter().flatten().find_map(|r| match r {
            Ok(Renewal::Unacknowledged(why)) => Some(why),
            _ => None,
        });
        let n = self.nodes.len();
        if ours >= self.majority() {
            // Each node extended on receipt, after `sent`: the lease counts from `sent`.
            if deadline(sent, ttl) > Moment::now() {
                return Ok(Renewal::Extended);
            }
            return Err(Failure::Unreachable(
                format!("the renewal of the lock on {n} Redis nodes answered too late").into(),
            ));
        }
        if n - gone - taken < self.majority() {
            // No majority can be ours any more, whatever the silent nodes say.
            return Ok(Renewal::Lost(if taken > 0 {
                Held::Theirs
            } else {
                Held::Gone
            }));
        }
        if let Some(why) = unacknowledged {
            return Ok(Renewal::Unacknowledged(format!(
                "{ours} of {n} Redis nodes renewed the lock with their replicas acknowledging \
                 it, a majority is {}; {why}",
                self.majority()
            )));
        }
        Err(Failure::Unreachable(
            shortfall("renewed the lock", ours, n, first_failure(&replies)).into(),
        ))
    }

    fn release(&mut self, ended: RunEnding, timeout: Duration) -> Result<Held, Failure> {
        // A silent node must not hold up the exit for the whole release timeout: its key
        // expires by itself.
        let timeout = self.ttl.map_or(timeout, |ttl| node_timeout(ttl, timeout));
        let all = self.all();
        let replies = self.each(&all, |node| node.release(ended, timeout));
        let answers: Vec<Held> = replies
            .iter()
            .flatten()
            .filter_map(|r| r.as_ref().ok().copied())
            .collect();
        let n = self.nodes.len();
        if answers.len() < self.majority() {
            return Err(Failure::Unreachable(
                shortfall(
                    "answered the release",
                    answers.len(),
                    n,
                    first_failure(&replies),
                )
                .into(),
            ));
        }
        Ok(if answers.contains(&Held::Ours) {
            Held::Ours
        } else if answers.contains(&Held::Theirs) {
            Held::Theirs
        } else {
            Held::Gone
        })
    }

    /// Blocks on one node only: the first by name of those that turned the last attempt away
    /// (see `listen_where_held`), or else the one listened to last, or the first by name, so
    /// that waiters with the same URLs listen on the same node and each release (which wakes
    /// one waiter on every node) wakes one of them. The other nodes' connections stay free for the
    /// acquire that follows. A node that fails hands the rest of the wait to the next one, and
    /// stays passed over until that one fails too.
    fn wait(&mut self, until: Until) -> Result<bool, Failure> {
        let block = Block::until(until, BLPOP);
        let start = Instant::now();
        let (held_until, until) = (start + block.hold, start + block.limit);
        let mut last = None;
        for _ in 0..self.nodes.len() {
            let now = Instant::now();
            let left = until.saturating_duration_since(now);
            if left.is_zero() {
                break;
            }
            // The rest of the block, and of the time for its answer: a node that failed at
            // once leaves the whole of both to the next.
            let rest = Block {
                hold: held_until.saturating_duration_since(now),
                limit: left,
            };
            match self.nodes[self.order[self.listening]].wait_block(rest) {
                Ok(woken) => return Ok(woken),
                Err(failure) => {
                    self.listening = (self.listening + 1) % self.nodes.len();
                    last = Some(failure);
                }
            }
        }
        last.map_or(Ok(false), Err)
    }

    /// Interrupts on every node at once: the one blocked on may change while it runs.
    fn interrupter(&self) -> Box<dyn Interrupt> {
        Box::new(QuorumInterrupt(
            self.nodes.iter().map(|node| node.interrupter()).collect(),
        ))
    }

    fn leave(&mut self, busy: bool, timeout: Duration) -> Result<(), Failure> {
        let all = self.all();
        let replies = self.each(&all, |node| node.leave(busy, timeout));
        match first_failure(&replies) {
            Some(_) if replies.iter().flatten().all(Result::is_err) => Err(Failure::Unreachable(
                shortfall("answered", 0, self.nodes.len(), first_failure(&replies)).into(),
            )),
            _ => Ok(()),
        }
    }
}

/// Interrupts a quorum waiter's wait: a marker on every node, one short-lived connection and
/// thread each; done when any node took it.
struct QuorumInterrupt(Vec<Box<dyn Interrupt>>);

impl Interrupt for QuorumInterrupt {
    fn interrupt(&self, timeout: Duration) -> Result<(), Failure> {
        let replies: Vec<Option<Result<(), Failure>>> = thread::scope(|scope| {
            let handles: Vec<_> = self
                .0
                .iter()
                .map(|node| scope.spawn(move || node.interrupt(timeout)))
                .collect();
            handles.into_iter().map(|h| h.join().ok()).collect()
        });
        if replies.iter().flatten().any(Result::is_ok) {
            return Ok(());
        }
        Err(first_failure(&replies).map_or_else(
            || Failure::Unreachable("no Redis node took the interrupt".to_owned().into()),
            |f| Failure::Unreachable(f.to_string().into()),
        ))
    }
}

#[cfg(test)]
mod tests;
