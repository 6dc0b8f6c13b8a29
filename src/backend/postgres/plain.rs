//! The plain lock's steps as single statements: an exclusive lock, not `--fair`, no
//! `--min-interval`, the common case; and every holder's release while its lease holds. A statement costs a new session one plan, where a
//! function costs it its whole body, planned under the lock's row lock: measured in
//! scripts/bench.sh, it is most of a plain run's overhead and of a hand-over's when newcomers
//! keep arriving. What these cannot decide (a holder's lease ended, a queue, shared holders) the
//! functions of `schema.sql` do.

/// The plain take (an exclusive lock, not `--fair`, no `--min-interval`) in one statement, as the
/// classic lock table takes it: the lock's row inserted, or taken over where it has no holder and no queued
/// waiter (counts kept in the row by every step, so that this decides on the row it locks,
/// seeing what the step before it committed); the holder's row and the run's record beside it.
/// It answers the fencing token and when, or no row: then the `take` function decides (holders
/// to expire, waiters to queue). One statement costs a new session a plan, where the function
/// costs it the function's whole body: a plain run's overhead, measured in scripts/bench.sh.
/// A new row's token starts at the server's clock (`first_fence()`). `$8`, `$9`: `RUNS_KEPT`
/// and `RECORD_TTL` in milliseconds, the lock's own record's limits. Other locks unused for
/// `RECORD_TTL` are removed apart, after a release (`PgLocker::prune`).
pub const PLAIN_TAKE: &str = "
WITH l AS (
  INSERT INTO @schema@.locks AS l (name, fence, holders, used)
  VALUES ($1, @schema@.first_fence(), 1, clock_timestamp())
  ON CONFLICT (name) DO UPDATE SET fence = l.fence + 1, holders = 1,
    -- To the minute, as `used()` keeps it.
    used = CASE WHEN l.used < clock_timestamp() - interval '1 minute' THEN clock_timestamp()
                ELSE l.used END
  WHERE l.holders = 0 AND l.queued = 0
    -- A holder's row made by hand, not counted: the function decides.
    AND NOT EXISTS (SELECT 1 FROM @schema@.holders h WHERE h.name = $1)
  RETURNING l.fence, l.last_success_fence, l.last_ended_fence, clock_timestamp() AS at
), h AS (
  INSERT INTO @schema@.holders (name, token, fence, kind, since, until, host, pid, command, started)
  SELECT $1, $2, l.fence, 'lock', l.at, l.at + $3 * interval '1 millisecond', $4, $5, $6, $7
  FROM l
), r AS (
  INSERT INTO @schema@.runs AS r (name, fence, token, host, pid, started, until)
  SELECT $1, l.fence, $2, $4, $5, l.at, l.at + $3 * interval '1 millisecond' FROM l
  ON CONFLICT ON CONSTRAINT runs_pkey DO UPDATE
    SET token = excluded.token, host = excluded.host, pid = excluded.pid,
        started = excluded.started, until = excluded.until, ended = NULL, outcome = NULL,
        status = NULL, min_interval_ms = NULL
), waiting AS (
  -- Its place as a plain waiter, if it had one (a queued one sends it to the function).
  DELETE FROM @schema@.waiters w USING l WHERE w.name = $1 AND w.token = $2 AND NOT w.queued
), pruned AS (
  DELETE FROM @schema@.runs r USING l
  WHERE r.name = $1
    AND (r.fence <= l.fence - $8 OR r.ended < l.at - $9 * interval '1 millisecond')
    AND r.fence IS DISTINCT FROM l.last_success_fence
    AND r.fence IS DISTINCT FROM l.last_ended_fence
)
SELECT l.fence, @schema@.ms(l.at) AS started_ms
FROM l";

/// A plain client turned away by [`PLAIN_TAKE`]: registered as a plain waiter (not queued; a
/// release wakes the waiters in the order they came, passing over those whose session has
/// ended, as the `take` function registers them), told what is left of the soonest lease,
/// its channel, and whether the function must decide instead: nobody holds it, a holder's
/// lease has ended, a holder holds it another way, waiters are queued, or our own token holds
/// it (a take whose answer was lost, made again: the function answers it taken, with its
/// token), or our registration had ended (the function registers it again, behind those who
/// came meanwhile).
pub const PLAIN_WAIT: &str = "
WITH w AS (
  INSERT INTO @schema@.waiters AS w (name, token, kind, queued, since, until, backend_pid)
  SELECT $1, $2, 'lock', false, clock_timestamp(), clock_timestamp() + $3 * interval '1 millisecond',
         @schema@.session()
  -- Not when our own token holds it: the function answers that.
  WHERE NOT EXISTS (SELECT 1 FROM @schema@.holders h WHERE h.name = $1 AND h.token = $2)
  ON CONFLICT (name, token) DO UPDATE SET until = excluded.until, backend_pid = excluded.backend_pid
  -- A registration that ended is not renewed: its place in the order is lost, and the
  -- function, which removes it first, registers the client again.
  WHERE w.until >= clock_timestamp()
  RETURNING w.queued
), h AS (
  SELECT min(h.until) AS soonest, count(*) AS n, bool_and(h.kind = 'lock') AS plain
  FROM @schema@.holders h WHERE h.name = $1
)
SELECT @schema@.ms(h.soonest) - @schema@.ms(clock_timestamp()) AS remaining_ms,
       h.n = 0 OR NOT h.plain OR h.soonest < clock_timestamp()
         OR (SELECT l.queued > 0 FROM @schema@.locks l WHERE l.name = $1)
         OR NOT EXISTS (SELECT 1 FROM w) OR (SELECT w.queued FROM w) AS undecided,
       @schema@.channel($2) AS channel
FROM h";

/// A holder's release while its lease holds, in one statement: the lock's row locked first
/// (`l`, before the holder's row: the order of every step), the holder's row deleted where our
/// token still holds, the run's end recorded, the lock's counts and last runs kept, then the
/// first waiter woken (`wake`, which reads the waiters after the lock's row is ours: one that
/// came meanwhile is woken, or finds the lock free when it looks again). One row when it
/// released; none when our holder's row was gone or its lease had ended: then the `release`
/// function decides (a retried release already recorded, a lost lease). The same steps as that
/// function's first branch, planned once instead of the function's every statement: it is
/// most of a hand-over's time in a new session, measured in scripts/bench.sh.
pub const PLAIN_RELEASE: &str = "
WITH l AS MATERIALIZED (
  SELECT l.name FROM @schema@.locks l WHERE l.name = $1 FOR UPDATE
), h AS (
  DELETE FROM @schema@.holders h
  WHERE h.name = $1 AND h.token = $2 AND h.fence = $3 AND h.until >= clock_timestamp()
    AND EXISTS (SELECT 1 FROM l)
  RETURNING clock_timestamp() AS at
), r AS (
  UPDATE @schema@.runs r
  SET outcome = $4, status = $5, min_interval_ms = $7,
      ended = LEAST(r.started + $6 * interval '1 millisecond', h.at)
  FROM h WHERE r.name = $1 AND r.fence = $3 AND r.outcome IS NULL
), u AS (
  -- The counts as the row has them, as every step keeps them (this statement's snapshot
  -- may be older than the row it locked).
  UPDATE @schema@.locks l
  SET holders = GREATEST(l.holders - 1, 0), last_ended_fence = $3,
      used = CASE WHEN l.used < h.at - interval '1 minute' THEN h.at ELSE l.used END,
      counts = jsonb_set(CASE WHEN jsonb_typeof(l.counts) = 'object' THEN l.counts ELSE '{}' END,
                         ARRAY[$4], to_jsonb(COALESCE((l.counts ->> $4)::bigint, 0) + 1)),
      last_success = CASE WHEN $4 = 'success' THEN h.at ELSE l.last_success END,
      success_interval_ms = CASE WHEN $4 = 'success' THEN $7 ELSE l.success_interval_ms END,
      last_success_fence = CASE WHEN $4 = 'success' THEN $3 ELSE l.last_success_fence END
  FROM h WHERE l.name = $1
)
SELECT true AS released, @schema@.wake($1)::text AS woken
FROM h";
