//! Waiting for a lock: the registry of waiters, the wake-up a release passes on, and the fair
//! queue. Its Lua is here: `wake.lua` (the wake lists), `pass_on.lua` (wake one waiter, if any
//! may wait), `registry.lua` (who was turned away and waits), `queue.lua` (`--fair`, and an
//! exclusive waiter behind shared holders), the steps a plain run's scripts take after their
//! own (`registered.lua` after the take, `wake_next.lua` after the give-back), and the scripts
//! of a waiter that gives up or is interrupted (`leave.lua`, `interrupt.lua`). A plain run
//! nobody waits for pays one `EXISTS` for all of it, at its release.
//!
//! The keys are `PREFIX{NAME}:wake` (and a waiter's own `:wake:TOKEN`), `:waiting`, `:queue` and
//! `:alive`, laid out as redlock 0.1 laid them, so that waiters of both are woken by releases of
//! both. [`crate::lock::Locker::wait`] blocks on the wake lists; the timing is below, and how
//! late a blocked wait may answer is [`crate::backend::block::WAIT_SLACK`].

use std::time::Duration;

/// The longest a `--fair` waiter blocks before it tries again, which refreshes its place in the
/// queue.
pub(crate) const FAIR_BEAT: Duration = Duration::from_millis(1500);

/// How long a `--fair` waiter's place in the queue lasts without a refresh: a waiter that died
/// (SIGKILL, a lost host) is forgotten this long after its last attempt, so it holds up the
/// others no longer. Three beats and a late reply fit in it.
pub const FAIR_ENTRY_LIFETIME: Duration = Duration::from_secs(5);

/// How long a wake-up waits in its list for a waiter to take it.
pub(crate) const WAKE_LINGER: Duration = Duration::from_secs(5);
