//! The watchdog: a small process that SIGKILLs the command's whole process group if redlock dies
//! without saying it is done (the parent-death signal reaches only the command's first process),
//! or if the lease deadline it was last given passes without a later one: a redlock that is
//! stopped (SIGSTOP, a debugger, Ctrl-Z) or frozen renews nothing, and its command must not run
//! on once another host could hold the lock.
//!
//! It is an ordinary fork of redlock, made before any thread starts, and shares nothing with it
//! but a pipe: redlock writes orders into it ([`Order`], fixed-size records: the group and the
//! moment by which it must be dead, on CLOCK_BOOTTIME, sent again on every renewal). The
//! watchdog sleeps in `poll` until the next order or until a timer on CLOCK_BOOTTIME set to that
//! moment fires; then it kills the group. A suspend (a laptop's lid, a VM hibernated) counts:
//! a kill line that passed while the machine slept fires the timer on resume, at once. The end
//! of file (every write end closed: redlock exited, however it died) is its cue to kill the last
//! group it was given and exit. Only a whole frozen machine stops it too. It lives in its own
//! process group, with every signal blocked, so a Ctrl-C or a signal sent to redlock's group
//! does not reach it; it holds no descriptor but the pipe's read end and its timer, so no
//! terminal or pipe of redlock's stays open because of it.
//!
//! It is a child of redlock: the reaper and the leftover checks (`group`) skip it by its pid.

use std::io::{self, PipeReader, PipeWriter, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use std::os::fd::AsFd;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::unistd::{ForkResult, Pid, close, fork, getpid, getppid, read, setpgid};

use super::job::Job;
use crate::clock::Moment;

/// The running watchdog's pid (0: none). One per process, and the reaper, on the signal thread,
/// must know it without being handed it.
static PID: AtomicI32 = AtomicI32::new(0);

/// The pid of redlock's watchdog, if one was started.
pub(crate) fn current_pid() -> Option<Pid> {
    match PID.load(Ordering::Relaxed) {
        0 => None,
        pid => Some(Pid::from_raw(pid)),
    }
}

/// One order to the watchdog: a fixed-size record, written with one `write` (atomic on a pipe up
/// to PIPE_BUF bytes) and read whole. The watchdog is a fork of the same program, so the record
/// can grow by changing this type alone: there is no reader of an older format to stay
/// compatible with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Order {
    /// The process group to SIGKILL if redlock dies; None: nothing to kill.
    group: Option<Pid>,
    /// When to SIGKILL the group although redlock lives (CLOCK_BOOTTIME, ns since boot): the
    /// lease's kill line. None: only when redlock dies.
    kill_at: Option<u64>,
}

impl Order {
    const SIZE: usize = 12;

    fn encode(self) -> [u8; Self::SIZE] {
        let mut record = [0u8; Self::SIZE];
        record[..4].copy_from_slice(&self.group.map_or(0, Pid::as_raw).to_ne_bytes());
        record[4..].copy_from_slice(&self.kill_at.unwrap_or(0).to_ne_bytes());
        record
    }

    fn decode(record: [u8; Self::SIZE]) -> Self {
        let (group, kill_at) = record.split_at(4);
        let group = i32::from_ne_bytes(group.try_into().unwrap_or_default());
        let kill_at = u64::from_ne_bytes(kill_at.try_into().unwrap_or_default());
        Self {
            group: (group > 0).then(|| Pid::from_raw(group)),
            kill_at: (kill_at > 0).then_some(kill_at),
        }
    }
}

/// `at` as the watchdog's order carries it: nanoseconds since boot (at least 1: 0 means none).
fn boot_ns(at: Moment) -> u64 {
    u64::try_from(at.since_boot().as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// redlock's end of the watchdog: the pipe its orders go through.
pub(crate) struct Watchdog {
    orders: PipeWriter,
    pid: Pid,
}

impl Watchdog {
    /// Fork the watchdog. Call before any thread starts where possible (see [`Self::restart`]
    /// for the one later fork): the child is a copy of the calling thread alone.
    pub(crate) fn start() -> io::Result<Self> {
        let (orders_in, orders) = io::pipe()?;
        // Listed here, before the fork: what the watchdog closes.
        let open = open_descriptors();
        // Every signal blocked in the watchdog from its first instruction: it inherits this
        // thread's mask, restored here in redlock right after the fork.
        let mut mask = SigSet::empty();
        pthread_sigmask(
            SigmaskHow::SIG_SETMASK,
            Some(&SigSet::all()),
            Some(&mut mask),
        )?;
        // SAFETY: the child runs only `watch`, which never returns, makes system calls through
        // nix and std, and allocates only to kill the job, which glibc's fork keeps sound in a
        // child of a process with threads (a restart): it holds malloc's locks across the fork.
        // No other lock another thread held at the fork is ever needed in the child.
        let forked = unsafe { fork() };
        if let Ok(ForkResult::Child) = forked {
            watch(&orders_in, orders.as_raw_fd(), &open);
        }
        pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&mask), None)?;
        let ForkResult::Parent { child } = forked? else {
            unreachable!("the watchdog never returns from watch")
        };
        // Its own process group, set from both sides as shells do: whichever runs first wins.
        let _ = setpgid(child, child);
        PID.store(child.as_raw(), Ordering::Relaxed);
        Ok(Self { orders, pid: child })
    }

    /// Start a new watchdog in place of this one, which someone killed (it is reaped already):
    /// redlock must not run its command on without one. The caller gives it its orders again.
    ///
    /// This fork comes after redlock's threads started. The descriptors the new watchdog closes
    /// are listed just before it; one another thread opens in between (a Redis connection) stays
    /// open in the watchdog until it exits with redlock, which holds no one up.
    pub(crate) fn restart(&mut self) -> io::Result<()> {
        *self = Self::start()?;
        Ok(())
    }

    /// The watchdog's pid (a child of redlock, not to be mistaken for an adopted one).
    pub(crate) fn pid(&self) -> Pid {
        self.pid
    }

    /// Watch the group `pgid` from now on: SIGKILL it if redlock dies, and at `kill_at` (the
    /// lease's kill line) unless a later moment comes first. Sent again on every renewal.
    pub(crate) fn watch(&mut self, pgid: Pid, kill_at: Moment) {
        self.send(Order {
            group: Some(pgid),
            kill_at: Some(boot_ns(kill_at)),
        });
    }

    /// Nothing to kill any more: the command and its group are gone.
    pub(crate) fn done(&mut self) {
        self.send(Order {
            group: None,
            kill_at: None,
        });
    }

    fn send(&mut self, order: Order) {
        let _ = self.orders.write_all(&order.encode());
    }

    /// A second write end of the orders pipe, for [`announce`] in the command's child before
    /// exec (close-on-exec, like the first; the caller drops it once the child is spawned).
    pub(crate) fn orders(&self) -> io::Result<PipeWriter> {
        self.orders.try_clone()
    }
}

/// In the command's child, between fork and exec: tell the watchdog, through the orders pipe
/// (`orders`, inherited; close-on-exec), to SIGKILL this process's group if redlock dies. So a
/// redlock killed before its own first order (a loaded machine can delay that past the
/// command's first background processes) still takes the whole job with it. The lease's kill
/// line follows from redlock. Async-signal-safe: one `write` of a record built on the stack.
pub(crate) fn announce(mut orders: &PipeWriter) -> io::Result<()> {
    let record = Order {
        group: Some(getpid()),
        kill_at: None,
    }
    .encode();
    // One write(2), whole or not at all on a pipe (PIPE_BUF), and no allocation.
    match orders.write(&record)? {
        n if n == record.len() => Ok(()),
        _ => Err(Errno::EIO.into()),
    }
}

/// The descriptors open in this process, from `/proc/self/fd` (the listing's own descriptor,
/// closed by the time it returns, included); stdio alone where there is no `/proc`.
fn open_descriptors() -> Vec<RawFd> {
    match std::fs::read_dir("/proc/self/fd") {
        Ok(entries) => entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => vec![0, 1, 2],
    }
}

/// The watchdog's whole life, in the forked child: never returns. System calls only while it
/// waits; killing the job reads `/proc` and allocates, which a child forked from threads may do
/// because glibc's fork leaves malloc usable in the child (it takes malloc's locks around the
/// fork), and nothing else it uses takes a lock.
fn watch(orders: &PipeReader, write_end: RawFd, open: &[RawFd]) -> ! {
    let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
    // Not `redlock` to `killall redlock` or `pkill -x redlock`, which would take the job's
    // guard with it (`pkill redlock`, a pattern, still matches).
    let _ = nix::sys::prctl::set_name(c"redlock-watch");
    let redlock = getppid();
    // The write end first (redlock's death is the end of file only once no writer is left),
    // then stdio and whatever else redlock had open.
    let _ = close(write_end);
    for &fd in open {
        if fd != orders.as_raw_fd() && fd != write_end {
            let _ = close(fd);
        }
    }
    let mut current = Order {
        group: None,
        kill_at: None,
    };
    // The kill line's timer, on CLOCK_BOOTTIME so that a suspend counts. Without one (never, on
    // Linux), redlock's death is still watched for.
    let timer = TimerFd::new(ClockId::CLOCK_BOOTTIME, TimerFlags::TFD_CLOEXEC).ok();
    loop {
        if let Some(timer) = &timer {
            let armed = match current.kill_at {
                Some(at) => timer.set(
                    Expiration::OneShot(TimeSpec::from_duration(Duration::from_nanos(at))),
                    TimerSetTimeFlags::TFD_TIMER_ABSTIME,
                ),
                None => timer.unset(),
            };
            if armed.is_err() {
                break;
            }
        }
        let mut fds = [
            PollFd::new(orders.as_fd(), PollFlags::POLLIN),
            match &timer {
                Some(timer) => PollFd::new(timer.as_fd(), PollFlags::POLLIN),
                None => PollFd::new(orders.as_fd(), PollFlags::empty()),
            },
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        }
        let fired = fds[1]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLIN));
        if fired && timer.is_some() {
            // The lease ran out and no renewal came: redlock is stopped or frozen (or the
            // machine slept through the kill line).
            if let Some(group) = current.group {
                // redlock's children are the job's while it lives (stopped); once it is gone
                // they are someone else's (init's).
                let parent = (getppid() == redlock).then_some(redlock);
                kill_job(group, parent);
            }
            current.kill_at = None;
            continue;
        }
        let readable = fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP));
        if !readable {
            continue;
        }
        match next_order(orders) {
            Some(order) => current = order,
            None => break,
        }
    }
    if let Some(group) = current.group {
        kill_job(group, None);
    }
    // SAFETY: ends this process at once, without the exit handlers and buffers, which are
    // redlock's (copied by the fork), not the watchdog's.
    unsafe { nix::libc::_exit(0) }
}

/// SIGKILL the job of `group`: the group, every process descended from it, and `parent`'s
/// children but this watchdog (see `job`).
fn kill_job(group: Pid, parent: Option<Pid>) {
    Job {
        group,
        parent,
        spare: &[getpid()],
    }
    .kill();
}

/// The next order, or None at the end of file (redlock is gone) or on an error reading.
fn next_order(orders: &PipeReader) -> Option<Order> {
    let mut record = [0u8; Order::SIZE];
    let mut filled = 0;
    while filled < Order::SIZE {
        match read(orders, &mut record[filled..]) {
            Ok(0) => return None,
            Ok(n) => filled += n,
            Err(Errno::EINTR) => {}
            Err(_) => return None,
        }
    }
    Some(Order::decode(record))
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::time::{Duration, Instant};

    use crate::clock::Moment;

    use nix::sys::signal::Signal;
    use nix::sys::wait::{WaitStatus, waitpid};

    use super::*;

    #[test]
    fn orders_are_fixed_size_records() {
        let some = Order {
            group: Some(Pid::from_raw(4242)),
            kill_at: Some(u64::MAX - 1),
        };
        assert_eq!(Order::decode(some.encode()), some);
        let none = Order {
            group: None,
            kill_at: None,
        };
        assert_eq!(none.encode(), [0; Order::SIZE]);
        assert_eq!(Order::decode(none.encode()), none);
    }

    #[test]
    fn kill_lines_go_as_nanoseconds_since_boot() {
        let at = Moment::from_boot(Duration::from_millis(1500));
        assert_eq!(boot_ns(at), 1_500_000_000);
        assert_eq!(
            boot_ns(Moment::from_boot(Duration::ZERO)),
            1,
            "0 means none"
        );
        assert_eq!(boot_ns(Moment::from_boot(Duration::MAX)), u64::MAX);
    }

    #[test]
    fn orders_are_read_whole_until_the_end_of_file() {
        let (reader, mut writer) = io::pipe().unwrap();
        let order = Order {
            group: Some(Pid::from_raw(7)),
            kill_at: Some(12345),
        };
        writer.write_all(&order.encode()).unwrap();
        // A record cut short by the end of file is no order.
        writer.write_all(&order.encode()[..2]).unwrap();
        drop(writer);
        assert_eq!(next_order(&reader), Some(order));
        assert_eq!(next_order(&reader), None);
    }

    /// Held by each test that starts a watchdog. Tests run on threads of one process, and a
    /// watchdog keeps open a descriptor another thread opened between its listing and its
    /// fork (see `restart`): another test's pipe to its watchdog, which then sees no end of
    /// file when that test drops it, and two such watchdogs wait for each other for good.
    static ONE_WATCHDOG_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn one_watchdog_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        ONE_WATCHDOG_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let give_up = Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(Instant::now() < give_up, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The process group of `pid`, from /proc.
    fn group_of(pid: Pid) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let mut fields = stat[stat.rfind(')').unwrap() + 1..].split_whitespace();
        fields.nth(2).unwrap().parse().unwrap()
    }

    #[test]
    fn kills_the_last_group_given_when_redlock_goes_and_not_after_none() {
        let _alone = one_watchdog_at_a_time();
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let group = Pid::from_raw(sleeper.id() as i32);

        // Told the group, then told it is done: the end of file kills nothing.
        let mut watchdog = Watchdog::start().unwrap();
        let pid = watchdog.pid();
        assert_eq!(group_of(pid), pid.as_raw(), "its own process group");
        // Its stdio closed: nothing there, or the timer it opened since (the lowest free number).
        wait_until("the watchdog to close its stdio", || {
            (0..3).all(
                |fd| match std::fs::read_link(format!("/proc/{pid}/fd/{fd}")) {
                    Ok(target) => target.to_string_lossy() == "anon_inode:[timerfd]",
                    Err(_) => true,
                },
            )
        });
        watchdog.watch(group, Moment::now() + Duration::from_secs(60));
        watchdog.done();
        drop(watchdog);
        assert_eq!(waitpid(pid, None), Ok(WaitStatus::Exited(pid, 0)));
        assert!(
            sleeper.try_wait().unwrap().is_none(),
            "the group was killed"
        );

        // Told the group, then redlock's end closes: the whole group is killed.
        let mut watchdog = Watchdog::start().unwrap();
        let pid = watchdog.pid();
        watchdog.watch(group, Moment::now() + Duration::from_secs(60));
        drop(watchdog);
        assert_eq!(waitpid(pid, None), Ok(WaitStatus::Exited(pid, 0)));
        assert_eq!(
            sleeper.wait().unwrap().signal(),
            Some(Signal::SIGKILL as i32)
        );
    }

    #[test]
    fn kills_the_group_at_the_deadline_unless_a_later_one_came() {
        let _alone = one_watchdog_at_a_time();
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let group = Pid::from_raw(sleeper.id() as i32);
        let mut watchdog = Watchdog::start().unwrap();
        // A deadline pushed back (a renewal) before it passed: nothing happens at the first.
        let first = Instant::now() + Duration::from_millis(100);
        // The look between them comes well before the second, even on a loaded machine.
        watchdog.watch(group, Moment::now() + Duration::from_millis(100));
        watchdog.watch(group, Moment::now() + Duration::from_millis(1000));
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            sleeper.try_wait().unwrap().is_none(),
            "killed at the first deadline"
        );
        // No later deadline: killed at the second, with redlock (this test) still alive.
        let status = sleeper.wait().unwrap();
        let killed = Instant::now();
        assert_eq!(status.signal(), Some(Signal::SIGKILL as i32));
        assert!(killed >= first + Duration::from_millis(850), "killed early");
        drop(watchdog);
    }
}
