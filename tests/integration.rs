// Integration tests for redlock: each test starts its own redis-server and runs the real binary.

// Fixtures shared with the chaos suite: redis-server per test, temp dirs, the redlock command,
// polling helpers.
mod common;

// The test modules, in tests/integration/ (a crate root's `mod x;` looks beside it, in tests/;
// the inline module adds the directory without a path attribute).
mod integration {
    // Fixtures of several servers: a master, a replica and three sentinels; a three-master Cluster.
    mod topology;
    // A hostile fake server: silent, trickling its reply, flooding one, or answering garbage.
    mod fake;
    // The builder itself: exit 0 and silence unless a test says otherwise.
    mod kit;
    // The contract every backend keeps, run on Redis and on a 3-member etcd cluster: exclusion,
    // exit statuses, waiting, --fair, --limit, --shared, --min-interval, the watchdog, TERM,
    // the admin commands, metrics.
    mod conformance;
    // The same contract in-process, at the boundary: the model of the lock, Redis, etcd,
    // PostgreSQL and ZooKeeper through one case list with faults (frozen, killed, a holder gone, 100 at
    // once), and random sequences on the model beside each real backend.
    mod inprocess;
    // etcd alone: a leader lost or frozen, no majority, a revoked lease, a restart of every
    // member, a compacted watch, what etcd refuses.
    mod etcd;
    // etcd: the URL and what etcd refuses (64), auth and the documented role, etcds://.
    mod etcd_access;
    // etcd, requests that go unanswered: a waiter whose member froze takes no lock on a lapsed
    // lease, a lease that ran out is replaced, a release whose answer was lost is a release, a
    // member killed under a request is said to have gone, a port that is not etcd's to be wrong.
    mod etcd_unanswered;
    // etcd's record of runs: every key on a lease that ends 40 days after the name's last use,
    // the next token larger still; exact counts under 100 writers at once.
    mod etcd_record;
    // The etcd cluster fixture itself: a leader killed and replaced, restarts, compaction, leases.
    mod etcd_fixture;
    // ZooKeeper alone: the leader lost or frozen, no majority, an entry deleted and a session
    // ended, a restart of every member, a --ttl past the ensemble's sessions, the chroot.
    mod zookeeper;
    // ZooKeeper without TTL nodes keeps nothing for ever: a name unused for 40 days by the
    // server's clock (moved by libfaketime) leaves every node at another name's sampled release,
    // unless held, waited for or not only redlock's; other folders and stems are not touched.
    mod zookeeper_prune;
    // zks:// against a member serving TLS as docs/zookeeper.md sets it up, pasted: a client
    // certificate takes the lock; another CA, none, or the plain port are refused.
    mod zookeeper_tls;
    // The ZooKeeper ensemble fixture itself: a leader killed and replaced, restarts, a stopped
    // majority, its client beside ZooKeeper's own.
    mod zk_fixture;

    // Admin subcommands: status and list show holders, release --force breaks a lock and fences it.
    mod admin;
    // Admin subcommands on semaphores and shared locks: holders, waiters, one holder removed.
    mod holders_admin;
    // Run a command under the lock: key while running, release, environment, fencing, URLs, output.
    mod basic;
    // Every request bounded: silent, trickling and flooding servers end in 69 in time, in memory;
    // a SCAN that never ends is refused; a command line is stored cut; an unreadable lock is said.
    mod bounded;
    // Redis Cluster: the slot's owner found through any seed, waiters, list, a slot migration.
    mod cluster;
    // Moving the lock between contenders: busy exit, --conflict-exit-code, --wait, no overlap.
    mod contention;
    // --min-interval: a success recorded in Redis skips later runs and waiters on any host.
    mod cron;
    // docs/recipes.md's crontab lines and /etc/cron.d file in a real Debian cron (in a mount
    // namespace of its own) against a real Redis with a password: one run a minute, mails
    // without the password. Not in scripts/test.sh's Valkey run: about two minutes of cron time.
    mod crond;
    // `redlock completions` and `redlock man`: committed output, no Redis, bash, fish and groff
    // accept it; every `redlock run` line in the README, docs/, man page and packaging/ is
    // accepted; every relative link resolves; the options and environment tables are true; no
    // sentence runs past 60 words, and no user page names an issue.
    mod docs;
    // The exit-status table: passthrough, 128+N, 126, 127, --max-runtime's 124.
    mod exit_codes;
    // Passwords from --password-file and REDLOCK_PASSWORD; docs/security.md's least-privilege ACL user.
    mod credentials;
    // --min-replicas through failovers: a replica that stopped following and was promoted never
    // gives the lock away early, plain and through Sentinel; fencing tokens never repeat.
    mod failover;
    // Redis failing under a lock: killed, paused, restarted, scripts flushed, unreachable, auth.
    mod faults;
    // --min-replicas at the take: too few replicas is waited out within --wait, said once; 69
    // without a wait or at its end.
    mod replicas;
    // -v lines and --log-format json: events in order, errors as JSON, statuses unchanged.
    mod logs;
    // Files a user names: devices, directories, sockets, files past their cap (and FIFOs where
    // a pipe will not do) refused at start with 64; a metrics file turned into a FIFO never
    // blocks the end of a run.
    mod files;
    // --metrics-file: the Prometheus textfile on every exit path, last success carried over.
    mod metrics;
    // The metrics file's counters and histograms carried across runs; promtool accepts the file.
    mod counters;
    // The record of runs: history, status's last run and counts, check's four statuses, a
    // SIGKILLed holder shown as vanished, the bound, quorum, Sentinel and Cluster.
    mod records;
    // One run, one outcome: busy, vanished, cut short and a late failure as they happened.
    mod outcomes;
    // What a hostile tester broke, one test each (fencing past 2^53, a quorum's record, ...).
    mod found;
    // `check`: OK, WARNING, CRITICAL and UNKNOWN with Redis up and down; the cron recipe's line.
    mod checks;
    // --splay: the spread of the starts, -v and the JSON log, a signal ending it, bad values.
    mod splay;
    // A quorum of independent masters: minority/majority down, restarts, no overlap, fencing.
    mod quorum;
    // The admin commands on a quorum: release --force, status and list over every node.
    mod quorum_admin;
    // Redis Sentinel: the master found through the sentinels, a forced failover, --min-replicas
    // with and without a replica, a waiter through a failover to a master without one.
    mod sentinel;
    // Only a master holds a lock: replicas refused, read-only or not; ROLE forbidden by an ACL.
    mod roles;
    // The eviction preflight: a warning for an evicting maxmemory-policy, silence without CONFIG.
    mod preflight;
    // Child subreaper and PID 1: double-forked daemons stopped with the job, zombies reaped, TERM.
    mod reaper;
    // Hostile input: malformed values for every flag, odd lock names, garbage-speaking servers.
    mod hostile;
    // redlock's stdin, stdout or stderr closed, or a pipe's reader gone: no panic, no lock left.
    mod stdio;
    // Property tests: parsing durations, signals, URLs and whole command lines.
    mod props;
    // Renewal and losing the lease: TTLs, overwritten or deleted keys, the whole group stopped.
    mod lease;
    // Signals sent to redlock: forwarding, --kill-after, escalation, SIGKILL, while waiting.
    mod signals;
    // Signals nobody listed: every terminating one, real-time ones too; the watchdog killed.
    mod strays;
    // --limit N and --shared: N at once, a freed slot wakes a waiter, crashed holders' slots
    // free at their lease's end, clients that disagree refused, readers and a writer.
    mod semaphore;
    // A real terminal in tmux: reading the tty, Ctrl-C.
    mod terminal;
    // rediss://: verified server certificates, an unknown CA refused, TLS against a plain port.
    mod tls;
    // Fencing tokens carried by the server's clock across lost counters; no key without an
    // expiry; --fsync (WAITAOF) on Valkey, and its refusals.
    mod fencing;
    // docs/fencing.md at a real PostgreSQL: a holder frozen with its whole process tree past its
    // lease is refused by the database's token check (and overwrites the row without it).
    mod pgfence;
    // The PostgreSQL fixture itself: socket, port and passwords, frozen and thawed, killed and
    // restarted with its rows, nothing left on drop.
    mod pgserver;
    // redlock on PostgreSQL: init and a run refused without tables, the page's least-privilege
    // role, passwords from libpq's places, refusals, fencing in the same database, the server
    // frozen past the lease, restarted within it, unreachable at the start.
    mod postgres;
    // PostgreSQL over TLS beside psql: each sslmode with self-signed, CA-signed, misnamed and
    // expired server certificates, connected exactly when psql connects, refused in words.
    mod pgtls;
    // A primary failed over to its streaming standby: an asynchronous one can give a token
    // out twice; a synchronous one (remote_apply) loses nothing answered.
    mod postgres_failover;
    // PostgreSQL waiters whose session is gone (SIGKILLed; queued on a primary lost in a
    // failover) are passed over: the live waiter behind starts at once.
    mod postgres_waiters;
    // A rolling upgrade on PostgreSQL: 0.3.0, built from git, beside this build on one lock,
    // on 0.3.0's tables, while this build's init updates them, and on the new ones.
    mod postgres_upgrade;
    // What a hostile tester found on PostgreSQL: functions and rows edited by hand, a
    // SERIALIZABLE default, a table of redlock's name that is not redlock's.
    mod postgres_hostile;
    // Every fast path answers as its general path from the same random state: PostgreSQL's
    // plain statements beside the take and release functions, Redis's take.lua beside
    // acquire.lua.
    mod fastpaths;
    // PostgreSQL keeps nothing for ever: a lock unused for 40 days (rows aged by hand) leaves
    // every row at another lock's next step, unless still held or waited for; tokens still rise.
    mod postgres_prune;
    // Waiting: wake-ups on release, the cost of waiting, one waiter woken per release.
    mod waiting;
    // --fair: arrival order, no queue jumping, turns passed on, dead waiters forgotten.
    mod fair;
    // What redlock says when something is wrong: the culprit named, no part of a secret shown.
    mod messages;
    // What it says of servers that turn it away or answer oddly (maxclients, a plain Sentinel
    // behind rediss+sentinel://, a deep reply, a socket wanting a password) and of keys it did
    // not write (a list at the lock key, a fencing counter that is not one); durations rounded.
    mod diagnoses;
    // Outputs as documented, snapshot-tested (trycmd, snapbox): --help, usage errors, the
    // messages docs/messages.md quotes, status and list lines; the docs checked against them.
    mod snapshots;
    // No part of a password printed, whatever the URL form, subcommand or log format.
    mod redaction;
    // Rolling upgrades: the round's starting commit, built from git, beside the build under test
    // on one key: no overlap in any mode, waiters woken across builds, one fair queue, holders
    // seen by both.
    mod upgrade;
    // Bad command lines and environment values: 64, nothing run, nothing locked; --help, --version.
    mod usage;
}
