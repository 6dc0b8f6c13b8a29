//! The lease's side of the core: a renewal that comes (and what it lets go on: a command that
//! waited, stopped, for it), the trouble renewals have, giving the lease up, and resuming once
//! redlock itself is continued.

use super::*;

impl Core {
    /// A renewal sent at `sent` extended the lease.
    pub(super) fn renewed(&mut self, sent: Moment, out: &mut Vec<Action>) {
        self.renewals += 1;
        out.push(Action::Note(Note::Renewed {
            renewals: self.renewals,
        }));
        // A renewal that comes after the lease was given up changes nothing: the command is
        // being stopped, by the kill line that was.
        if let Lease::Held {
            trouble,
            deadline: was,
        } = self.lease
        {
            if trouble != Trouble::None {
                out.push(Action::Note(Note::RenewRecovered));
            }
            // Never earlier than it was (renewals come in the order they were sent).
            self.lease = Lease::Held {
                deadline: was.max(deadline(sent, self.config.ttl)),
                trouble: Trouble::None,
            };
            if self.running() {
                out.push(Action::Watch(self.kill_line()));
            }
            if self.until_renewed() {
                self.command = Command::Running {
                    suspended: Suspended::No,
                };
                out.push(Action::Note(Note::Continued));
                out.push(Action::Continue);
            }
        }
    }

    /// Record trouble with the renewals of a held lease (`next` of the trouble there was);
    /// the trouble there was before, or None once the lease is lost.
    pub(super) fn trouble(&mut self, next: impl FnOnce(Trouble) -> Trouble) -> Option<Trouble> {
        match &mut self.lease {
            Lease::Held { trouble, .. } => {
                let before = *trouble;
                *trouble = next(before);
                Some(before)
            }
            // Lost: a renewal's failure is no news any more (the release may still retry).
            Lease::Lost { .. } => None,
        }
    }

    /// The lease was or may have been lost: stop the command, SIGKILL after the lease's grace
    /// at the latest, never past the kill line.
    pub(super) fn lose_lease(&mut self, why: LostWhy, now: Moment, out: &mut Vec<Action>) {
        if self.lost() {
            return;
        }
        self.lease = Lease::Lost {
            why,
            deadline: self.deadline(),
        };
        if self.running() {
            out.push(Action::Note(Note::LockLost(why)));
        }
        let grace = lease_grace(self.config.ttl, self.config.kill_after);
        let kill_line = self.kill_line();
        self.stop(now, out);
        self.schedule_kill((now + grace).min(kill_line));
    }

    /// redlock runs again: if the kill line passed meanwhile, kill the command without letting
    /// it run again; otherwise renew at once, and continue the command if redlock stopped it.
    pub(super) fn resume(&mut self, now: Moment, out: &mut Vec<Action>) {
        if now >= self.kill_line() {
            if !self.killed() {
                self.lose_lease(LostWhy::RanOutWhileStopped, now, out);
                self.kill(KillReason::LeaseRanOutWhileStopped, now, out);
            }
            return;
        }
        // SIGKILL went out already: nothing to renew for, nothing to continue.
        if self.killed() {
            return;
        }
        out.push(Action::RenewNow);
        if let Command::Running {
            suspended: Suspended::Yes,
        } = self.command
        {
            if now >= self.stop_line() {
                // Continued now, the command would only be stopped again for a lease running
                // low: it waits, stopped, for the renewal just asked for.
                self.command = Command::Running {
                    suspended: Suspended::UntilRenewed,
                };
                out.push(Action::Note(Note::ContinuedUntilRenewed));
                return;
            }
            self.command = Command::Running {
                suspended: Suspended::No,
            };
            out.push(Action::Note(Note::Continued));
            out.push(Action::Continue);
        }
    }
}
