//! What goes into the core and what comes out: the run's configuration, the inputs, the
//! actions, the notes with their reasons, and how a supervision ended.

use std::process::ExitStatus;
use std::time::Duration;

use crate::clock::Moment;
use crate::exit::Outcome;
use crate::lock::Held;
use crate::process::Signo;

/// What the core is told about the run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub ttl: Duration,
    /// The grace between the stop signal and SIGKILL.
    pub kill_after: Duration,
    /// The signal that asks the command to stop (SIGKILL: kill at once, reported).
    pub stop_signal: Signo,
    pub max_runtime: Option<Duration>,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// A stop request reached redlock (TERM or `--stop-signal`).
    StopRequest(Signo),
    /// A signal to pass on to the command's group.
    Forward(Signo),
    /// Job control: TSTP, TTIN or TTOU reached redlock, or stopped the command.
    JobStop(Signo),
    /// redlock runs again after a stop: its own (job control), or someone's SIGSTOP.
    Continued,
    /// The command exited (or died), as seen at the step's moment: its group may linger.
    Exited(ExitStatus),
    /// Someone stopped the command with a signal that is not job control (SIGSTOP): not a
    /// job stop, nothing to do.
    Paused(Signo),
    /// Waiting on the command failed: redlock cannot tell how it is.
    LostTrack(String),
    /// What the executor found of the command's group (and the processes redlock adopted),
    /// when [`Core::watching_group`] asks.
    Group { alive: bool },
    /// A renewal sent at this moment extended the lease.
    Renewed { sent: Moment },
    /// A renewal got no answer or an error; the lease thread keeps trying.
    RenewFailed(String),
    /// The master extended the lease but too few replicas acknowledged it.
    Unacknowledged(String),
    /// A renewal found the key gone, or another owner's.
    Lost(Held),
    /// The lease thread ended although nothing asked it to.
    LeaseEnded,
    /// Someone killed the watchdog (`how`: "was killed by SIGKILL").
    WatchdogDied(String),
    /// A new watchdog took over, after the old one went `how`.
    WatchdogRestarted { how: String, pid: i32 },
    /// No new watchdog could be started.
    WatchdogFailed { how: String, error: String },
    /// Someone stopped the watchdog; the executor continued it already.
    WatchdogStopped(Signo),
    /// Time passed.
    Tick,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Send this signal to the command's group (the stop signal, a forwarded one, SIGCONT).
    Signal(Signo),
    /// SIGKILL the command's group and what redlock adopted. Always with a [`Note::Killed`].
    Kill,
    /// Tell the watchdog: kill the group at this moment unless told a later one.
    Watch(Moment),
    /// Start a new watchdog, the old one having gone as said (then step
    /// [`Input::WatchdogRestarted`] or [`Input::WatchdogFailed`]).
    RestartWatchdog(String),
    /// Renew the lease now.
    RenewNow,
    /// Job control: SIGSTOP the command's group, take the terminal back, then stop redlock
    /// with this signal; step [`Input::Continued`] once redlock runs again.
    Suspend(Signo),
    /// Stop redlock itself with this signal (the command is gone already); step
    /// [`Input::Continued`] once it runs again.
    StopSelf(Signo),
    /// Continue the command's group (`fg` or `bg`: hand it the terminal if redlock has it).
    Continue,
    /// Say this.
    Note(Note),
}

/// Why the lease was given up: it was, or may have been, lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LostWhy {
    /// A renewal found the key gone.
    Gone,
    /// A renewal found another owner's token.
    Theirs,
    /// The kill line passed without a renewal that counted.
    RanOut,
    /// redlock was stopped past the kill line.
    RanOutWhileStopped,
    /// The command was seen to end only at the kill line or later (redlock stopped or frozen).
    RanOutBeforeSeen,
    /// No renewal counted before the stop line; `unacknowledged`: the replicas stopped
    /// acknowledging them (`--min-replicas`).
    RunningLow { unacknowledged: bool },
    /// The lease thread ended unexpectedly.
    LeaseEnded,
    /// The watchdog died and no new one could be started (why).
    NoWatchdog,
}

/// Why redlock SIGKILLs the command's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KillReason {
    /// The kill line passed.
    LeaseRanOut,
    /// The kill line passed while redlock was stopped.
    LeaseRanOutWhileStopped,
    /// The grace after the stop signal ran out.
    GraceRanOut,
    /// A second stop request, later than [`SAME_REQUEST`] after the first.
    SecondRequest(Signo),
    /// The stop signal is KILL.
    StopSignalIsKill,
    /// redlock lost track of the command.
    LostTrack,
    /// Not redlock's: the watchdog killed the group while redlock was stopped (seen after).
    Watchdog,
}

/// What to say (the executor renders each as a line and a JSON event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Note {
    StopRequested(Signo),
    StopRepeated(Signo),
    Forwarded(Signo),
    Suspended(Signo),
    Continued,
    /// Continued past the stop line: the command stays stopped until a renewal comes.
    ContinuedUntilRenewed,
    /// The lock was or may have been lost; said only while the command runs.
    LockLost(LostWhy),
    Killed(KillReason),
    MaxRuntime,
    Leftovers,
    Renewed {
        renewals: u64,
    },
    RenewRecovered,
    RenewFailed {
        error: String,
        first: bool,
    },
    Unacknowledged {
        why: String,
        first: bool,
    },
    LostTrack(String),
    LeaseEnded,
    WatchdogRestarted {
        how: String,
        pid: i32,
    },
    WatchdogFailed {
        how: String,
        error: String,
    },
    WatchdogStopped(Signo),
}

/// How the supervision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ended {
    /// How the run ended: the command's status, or redlock's verdict over it.
    pub outcome: Outcome,
    /// A stop asked of redlock reached the command (a stop request, or TERM, INT, HUP or QUIT
    /// forwarded to it): the record of runs says the run was cut short, whatever its status.
    pub cut_short: bool,
    /// Whether the command died of a signal (its terminal modes are then redlock's to restore).
    pub signaled: bool,
    /// The lease's end by the last renewal that counted: past it the lock may be someone else's.
    pub deadline: Moment,
    pub renewals: u64,
    pub renewal_failures: u64,
}
