-- redlock's tables and functions on PostgreSQL (13 and later), made by `redlock init` or applied
-- by a DBA from `redlock init --print`. Idempotent: applying it again changes nothing, and
-- updates the functions to this redlock's and the tables of an older one (a column added).
-- Every time is the server's own (clock_timestamp()), never a client's, and never now(), which
-- stands still for a transaction.
--
-- Each step of the protocol is one function call: one statement, one transaction, one round
-- trip, so that no transaction stays open across the network while a client may freeze. The
-- lock's row in `locks` is locked first in each, so that the steps on one lock happen one at a
-- time, each seeing what the one before committed.

CREATE SCHEMA IF NOT EXISTS @schema@;

-- Applied while runs go on: each of their steps locks `locks` first. So does this, and the other
-- tables it alters after, in that order and at once, so that it waits for a step to end rather
-- than deadlocking with it.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['locks', 'holders', 'waiters', 'runs'] LOOP
        IF to_regclass('@schema@.' || t) IS NOT NULL THEN
            EXECUTE format('LOCK TABLE @schema@.%I IN ACCESS EXCLUSIVE MODE', t);
        END IF;
    END LOOP;
END
$$;

-- One row per lock: its fencing counter (raised by one per acquisition, kept by the database's
-- log; a new row's starts at the server's clock, `first_fence()`), its last success (for
-- --min-interval) and its counters by outcome. A lock unused for the record's lifetime leaves
-- with all its rows (`prune()`).
CREATE TABLE IF NOT EXISTS @schema@.locks (
    name text PRIMARY KEY,
    fence bigint NOT NULL DEFAULT 0,
    last_success timestamptz,
    success_interval_ms bigint,
    -- The runs the record shows however many came after: the last success, the last to end.
    last_success_fence bigint,
    last_ended_fence bigint,
    counts jsonb NOT NULL DEFAULT '{}',
    -- How many holders' rows (whether their lease ended or not) and queued waiters' rows the
    -- lock has, kept by every step that changes them: the plain take's one statement decides
    -- on them, in the lock's row it locks.
    holders bigint NOT NULL DEFAULT 0,
    queued bigint NOT NULL DEFAULT 0,
    -- When a take or release last came, to the minute (kept coarse so that most steps leave
    -- the indexed column as it was and update the row in place): what `prune()` looks up.
    used timestamptz NOT NULL DEFAULT now()
);

-- Its holders: one row each (one for an exclusive lock, up to N for --limit N, any number of
-- --shared ones). A lease ends at `until`, by the server's clock; nothing is pushed at expiry:
-- the next step on the lock finds it ended.
CREATE TABLE IF NOT EXISTS @schema@.holders (
    name text NOT NULL REFERENCES @schema@.locks (name) ON DELETE CASCADE,
    token text NOT NULL,
    fence bigint NOT NULL,
    kind text NOT NULL,
    since timestamptz NOT NULL,
    until timestamptz NOT NULL,
    host text NOT NULL,
    pid bigint NOT NULL,
    command text NOT NULL,
    started bigint NOT NULL,
    PRIMARY KEY (name, token)
);

-- Clients turned away and still waiting, in the order they came (`seq`); `queued`: first come,
-- first served (--fair, or an exclusive client behind shared holders): those that came later
-- wait behind it.
CREATE TABLE IF NOT EXISTS @schema@.waiters (
    name text NOT NULL REFERENCES @schema@.locks (name) ON DELETE CASCADE,
    token text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    kind text NOT NULL,
    queued boolean NOT NULL,
    since timestamptz NOT NULL,
    until timestamptz NOT NULL,
    -- The server process of the session it waits in (`session()`), passed over once that
    -- session has ended (`ended()`); NULL where unknown: then only `until` ends its wait.
    backend_pid integer,
    PRIMARY KEY (name, token)
);
-- Tables made by redlock 0.3.0 have no backend_pid: its hosts register without one.
ALTER TABLE @schema@.waiters ADD COLUMN IF NOT EXISTS backend_pid integer;

-- The record of runs: one row per run that took the lock, the newest RUNS_KEPT of each lock kept.
-- No outcome while it runs; `vanished` once its lease ended without a release.
CREATE TABLE IF NOT EXISTS @schema@.runs (
    name text NOT NULL REFERENCES @schema@.locks (name) ON DELETE CASCADE,
    fence bigint NOT NULL,
    token text NOT NULL,
    host text NOT NULL,
    pid bigint NOT NULL,
    started timestamptz NOT NULL,
    until timestamptz,
    ended timestamptz,
    outcome text,
    status integer,
    min_interval_ms bigint,
    PRIMARY KEY (name, fence)
);

-- Tables made by redlock 0.3.0 have no `used`: each lock counts as used when its newest run
-- started or ended, or now if it has none.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '@schema@.locks'::regclass
                   AND attname = 'used' AND NOT attisdropped) THEN
        ALTER TABLE @schema@.locks ADD COLUMN used timestamptz NOT NULL DEFAULT now();
        UPDATE @schema@.locks l
        SET used = COALESCE((SELECT max(GREATEST(r.started, r.ended)) FROM @schema@.runs r
                             WHERE r.name = l.name), now());
    END IF;
END
$$;
CREATE INDEX IF NOT EXISTS locks_used ON @schema@.locks (used);

-- The channel a waiter listens on (its own: a release wakes whom it frees the lock for, not
-- every waiter at once).
CREATE OR REPLACE FUNCTION @schema@.channel(p_token text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'redlock_' || md5(p_token) $$;

-- A waiter's session holds a session-level advisory lock while it lives, on the key
-- ('rdlk' in ASCII, its server process's pid): PostgreSQL lets it go however the session ends
-- (its client killed or its connection closed, the server restarted, a pooler's `DISCARD
-- ALL`), and a promoted standby has none. Any role may take it. Taken at each registration
-- (again in the same session: a count), it answers the pid the waiter's row keeps; NULL if
-- another session holds that key.
CREATE OR REPLACE FUNCTION @schema@.session() RETURNS integer
LANGUAGE sql AS $$
    SELECT CASE WHEN pg_try_advisory_lock(1919183979, pg_backend_pid()) THEN pg_backend_pid() END
$$;

-- Whether the session of a waiter's row (`p_backend_pid`, as `session()` answered it) has
-- ended: nobody holds its key (taken and let go at once, so that a step passing over many
-- such rows holds none of their keys). A row of the caller's own session, or of none known
-- (NULL), has not; nor has one whose pid a later waiter's session has again (its
-- registration's end decides).
CREATE OR REPLACE FUNCTION @schema@.ended(p_backend_pid integer) RETURNS boolean
LANGUAGE sql AS $$
    SELECT CASE WHEN p_backend_pid IS NULL OR p_backend_pid = pg_backend_pid() THEN false
                WHEN pg_try_advisory_lock(1919183979, p_backend_pid)
                    THEN pg_advisory_unlock(1919183979, p_backend_pid)
                ELSE false END
$$;

-- Wake the first waiter of lock `p_name` in the order they came, and the shared waiters right
-- behind a shared one, who may all come in together (NOTIFY: heard when the caller commits).
-- A waiter whose session has ended is passed over and leaves (the caller holds the lock's
-- row; until a function counts the queue again, the plain take leaves the lock to `take`).
-- A waiter woken in vain waits again; one whose session lives on but who hears nothing
-- (frozen) is passed over once its registration ends.
CREATE OR REPLACE FUNCTION @schema@.wake(p_name text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    w record;
    first_kind text;
BEGIN
    FOR w IN SELECT token, kind, backend_pid FROM @schema@.waiters
             WHERE name = p_name AND until >= clock_timestamp() ORDER BY seq LOOP
        IF @schema@.ended(w.backend_pid) THEN
            DELETE FROM @schema@.waiters x WHERE x.name = p_name AND x.token = w.token;
            CONTINUE;
        END IF;
        IF first_kind IS NULL THEN
            first_kind := w.kind;
        ELSIF first_kind <> 'shared' OR w.kind <> 'shared' THEN
            EXIT;
        END IF;
        PERFORM pg_notify(@schema@.channel(w.token), '');
    END LOOP;
END
$$;

-- A moment as unix milliseconds, and a span as milliseconds: bounded, so that a time an
-- operator set by hand (`infinity`) reads as far away instead of failing every step.
CREATE OR REPLACE FUNCTION @schema@.ms(t timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT (LEAST(GREATEST(extract(epoch FROM t), -1e12), 1e12) * 1000)::bigint
$$;
CREATE OR REPLACE FUNCTION @schema@.ms(d interval) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT (LEAST(GREATEST(extract(epoch FROM d), -1e12), 1e12) * 1000)::bigint
$$;

-- Count the holders' and queued waiters' rows of lock `p_name` again, into its row; at the end of
-- every step that changes them (the caller holds the lock's row).
CREATE OR REPLACE FUNCTION @schema@.recount(p_name text) RETURNS void
LANGUAGE sql AS $$
    UPDATE @schema@.locks l
    SET holders = (SELECT count(*) FROM @schema@.holders h WHERE h.name = p_name),
        queued = (SELECT count(*) FROM @schema@.waiters w WHERE w.name = p_name AND w.queued)
    WHERE l.name = p_name
$$;

-- Raise counter `p_label` of lock `p_name` by `p_by`.
CREATE OR REPLACE FUNCTION @schema@.count(p_name text, p_label text, p_by bigint) RETURNS void
LANGUAGE sql AS $$
    UPDATE @schema@.locks
    SET counts = jsonb_set(
            CASE WHEN jsonb_typeof(counts) = 'object' THEN counts ELSE '{}' END, ARRAY[p_label],
            to_jsonb(COALESCE((counts ->> p_label)::bigint, 0) + p_by))
    WHERE name = p_name
$$;

-- A new lock row's first fencing token: the server's clock in microseconds. A lock's row goes
-- when it has been unused for the record's lifetime (`prune()`), and its counter with it; the
-- next take makes a row again, and its token must still be larger than every one given before.
-- The counter of a row made at time t, raised by one per take, stays below the clock as long as
-- its takes, one at a time behind the row's lock, each took a microsecond: its last token is
-- below the clock of its last take, and the new row's first comes at least the record's
-- lifetime later. So tokens rise across a pruned row unless the server's clock steps back by
-- that much (the same floor Redis takes, where the counter's key expires).
CREATE OR REPLACE FUNCTION @schema@.first_fence() RETURNS bigint
LANGUAGE sql AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint $$;

-- redlock 0.3.0's plain take makes a new row with fence 1: raised to the clock as ours.
CREATE OR REPLACE FUNCTION @schema@.old_first_fence() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.fence := GREATEST(NEW.fence, @schema@.first_fence());
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS old_first_fence ON @schema@.locks;
CREATE TRIGGER old_first_fence BEFORE INSERT ON @schema@.locks
FOR EACH ROW WHEN (NEW.fence = 1) EXECUTE FUNCTION @schema@.old_first_fence();

-- Lock `p_name` is in use at `p_now`: its row says so, to the minute (the caller holds it).
CREATE OR REPLACE FUNCTION @schema@.used(p_name text, p_now timestamptz) RETURNS void
LANGUAGE sql AS $$
    UPDATE @schema@.locks l SET used = p_now
    WHERE l.name = p_name AND l.used < p_now - interval '1 minute'
$$;

-- Removes up to 32 other locks unused for `p_record_ttl_ms` (RECORD_TTL): no holder, no
-- waiter, no run or success in that time; their holders', waiters' and runs' rows go with them
-- (ON DELETE CASCADE). A lock another step holds is passed over, left to the next. One release
-- in 16 calls it, as a statement of its own (the locker's `prune`): so a lock name leaves
-- nothing once the record's lifetime has passed and locks are used again, each call does a
-- bounded amount of this, found by `locks_used`, and no take or release plans it.
CREATE OR REPLACE FUNCTION @schema@.prune(
    p_name text, p_now timestamptz, p_record_ttl_ms bigint) RETURNS void
LANGUAGE sql AS $$
    DELETE FROM @schema@.locks l WHERE l.name IN (
        SELECT s.name FROM @schema@.locks s
        WHERE s.used < p_now - p_record_ttl_ms * interval '1 millisecond' AND s.name <> p_name
          AND s.holders = 0 AND s.queued = 0
          AND (s.last_success IS NULL
               OR s.last_success < p_now - p_record_ttl_ms * interval '1 millisecond')
          AND NOT EXISTS (SELECT 1 FROM @schema@.holders h WHERE h.name = s.name)
          AND NOT EXISTS (SELECT 1 FROM @schema@.waiters w
                          WHERE w.name = s.name AND w.until >= p_now)
          AND NOT EXISTS (SELECT 1 FROM @schema@.runs r WHERE r.name = s.name
                          AND GREATEST(r.started, r.until, r.ended)
                              >= p_now - p_record_ttl_ms * interval '1 millisecond')
        ORDER BY s.used LIMIT 32 FOR UPDATE SKIP LOCKED)
$$;

-- The holders of lock `p_name` whose lease has ended leave; their runs vanished (counted once,
-- here, by the holders' rows: a run the record no longer keeps, RUNS_KEPT runs after it,
-- counts too). Expired waiters leave too. The caller holds the lock's row.
CREATE OR REPLACE FUNCTION @schema@.expire(p_name text, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    -- A holder's row that its job has locked (`FOR KEY SHARE`, fencing a write in the job's own
    -- transaction) stays until that transaction ends: the lock is still held until then.
    WITH gone AS (
        DELETE FROM @schema@.holders WHERE ctid IN (
            SELECT ctid FROM @schema@.holders
            WHERE name = p_name AND until < p_now FOR UPDATE SKIP LOCKED)
        RETURNING fence, until
    ), marked AS (
        UPDATE @schema@.runs r SET outcome = 'vanished', until = gone.until
        FROM gone WHERE r.name = p_name AND r.fence = gone.fence AND r.outcome IS NULL
    )
    SELECT count(*) INTO n FROM gone;
    IF n > 0 THEN
        PERFORM @schema@.count(p_name, 'vanished', n);
    END IF;
    DELETE FROM @schema@.waiters WHERE name = p_name AND until < p_now;
END
$$;

-- One attempt to take lock `p_name` for `p_token`, as `p_kind` ('lock', 'limit N', 'shared'),
-- its lease `p_ttl_ms` from now by the server's clock. Answers one row:
--   ('acquired', fence, started_ms, ...)  taken: the fencing token, raised by one here;
--   ('busy', ..., remaining_ms, queued)   turned away (and registered as a waiter for
--                                         `p_waiting_ms`); remaining: the soonest lease end;
--   ('skipped', ..., ago_ms)              a success within `p_min_interval_ms`;
--   ('mismatch', ..., found_kind)         held as another kind (`found_kind`).
CREATE OR REPLACE FUNCTION @schema@.take(
    p_name text, p_token text, p_ttl_ms bigint, p_kind text, p_limit integer, p_fair boolean,
    p_min_interval_ms bigint, p_waiting_ms bigint,
    p_host text, p_pid bigint, p_command text, p_started bigint,
    p_runs_kept integer, p_record_ttl_ms bigint)
RETURNS TABLE (result text, fence bigint, started_ms bigint, remaining_ms bigint,
               queued boolean, ago_ms bigint, found_kind text, channel text)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    now timestamptz;
    l_row @schema@.locks%ROWTYPE;
    mine @schema@.holders%ROWTYPE;
    held_kind text;
    holding bigint;
    exclusive bigint;
    my_seq bigint;
    ahead bigint;
    room boolean;
    free boolean;
    soonest timestamptz;
BEGIN
    INSERT INTO @schema@.locks (name, fence) VALUES (p_name, @schema@.first_fence() - 1)
    ON CONFLICT DO NOTHING;
    SELECT * INTO l_row FROM @schema@.locks l WHERE l.name = p_name FOR UPDATE;
    now := clock_timestamp();
    PERFORM @schema@.used(p_name, now);
    PERFORM @schema@.expire(p_name, now);
    channel := @schema@.channel(p_token);

    -- Taken already by this token: an attempt whose answer was lost, made again.
    SELECT * INTO mine FROM @schema@.holders h WHERE h.name = p_name AND h.token = p_token;
    IF FOUND THEN
        UPDATE @schema@.holders h SET until = now + p_ttl_ms * interval '1 millisecond'
        WHERE h.name = p_name AND h.token = p_token;
        result := 'acquired';
        fence := mine.fence;
        started_ms := @schema@.ms(mine.since);
        PERFORM @schema@.recount(p_name);
        RETURN NEXT;
        RETURN;
    END IF;

    IF p_min_interval_ms IS NOT NULL AND l_row.last_success IS NOT NULL
       AND l_row.last_success > now - p_min_interval_ms * interval '1 millisecond' THEN
        DELETE FROM @schema@.waiters w WHERE w.name = p_name AND w.token = p_token;
        PERFORM @schema@.count(p_name, 'skipped', 1);
        result := 'skipped';
        ago_ms := @schema@.ms(now - l_row.last_success);
        PERFORM @schema@.recount(p_name);
        RETURN NEXT;
        RETURN;
    END IF;

    SELECT min(h.kind), count(*), count(*) FILTER (WHERE h.kind = 'lock'), min(h.until)
    INTO held_kind, holding, exclusive, soonest
    FROM @schema@.holders h WHERE h.name = p_name;
    IF holding > 0 AND held_kind <> p_kind
       AND NOT (held_kind IN ('lock', 'shared') AND p_kind IN ('lock', 'shared')) THEN
        DELETE FROM @schema@.waiters w WHERE w.name = p_name AND w.token = p_token;
        result := 'mismatch';
        found_kind := held_kind;
        PERFORM @schema@.recount(p_name);
        RETURN NEXT;
        RETURN;
    END IF;

    -- First come, first served: the queued waiters that came before this client (all of them,
    -- if it is not one) are let in first; those whose session has ended are passed over.
    SELECT w.seq INTO my_seq FROM @schema@.waiters w WHERE w.name = p_name AND w.token = p_token;
    DELETE FROM @schema@.waiters w
    WHERE w.name = p_name AND w.queued AND (my_seq IS NULL OR w.seq < my_seq)
      AND @schema@.ended(w.backend_pid);
    SELECT count(*) INTO ahead FROM @schema@.waiters w
    WHERE w.name = p_name AND w.queued AND (my_seq IS NULL OR w.seq < my_seq);
    free := CASE
        WHEN p_kind = 'lock' THEN holding = 0
        WHEN p_kind = 'shared' THEN exclusive = 0
        ELSE holding < p_limit
    END;
    room := free AND CASE
        WHEN p_kind IN ('lock', 'shared') THEN ahead = 0
        ELSE holding + ahead < p_limit
    END;

    IF room THEN
        DELETE FROM @schema@.waiters w WHERE w.name = p_name AND w.token = p_token;
        UPDATE @schema@.locks l SET fence = l.fence + 1 WHERE l.name = p_name
        RETURNING l.fence INTO fence;
        INSERT INTO @schema@.holders
            (name, token, fence, kind, since, until, host, pid, command, started)
        VALUES (p_name, p_token, fence, p_kind, now, now + p_ttl_ms * interval '1 millisecond',
                p_host, p_pid, p_command, p_started);
        -- A run of the same token found again (the counter set back by hand, or a backup
        -- restored) is replaced: the record keeps the newest.
        INSERT INTO @schema@.runs AS r (name, fence, token, host, pid, started, until)
        VALUES (p_name, fence, p_token, p_host, p_pid, now,
                now + p_ttl_ms * interval '1 millisecond')
        ON CONFLICT ON CONSTRAINT runs_pkey DO UPDATE
            SET token = excluded.token, host = excluded.host, pid = excluded.pid,
                started = excluded.started, until = excluded.until, ended = NULL,
                outcome = NULL, status = NULL, min_interval_ms = NULL;
        -- The newest `p_runs_kept` runs are kept (RUNS_KEPT), for `p_record_ttl_ms` after the
        -- last (RECORD_TTL), and the last success and the last to end.
        DELETE FROM @schema@.runs r
        WHERE r.name = p_name
          AND (r.fence <= fence - p_runs_kept
               OR r.ended < now - p_record_ttl_ms * interval '1 millisecond')
          AND r.fence IS DISTINCT FROM l_row.last_success_fence
          AND r.fence IS DISTINCT FROM l_row.last_ended_fence;
        result := 'acquired';
        started_ms := @schema@.ms(now);
        PERFORM @schema@.recount(p_name);
        RETURN NEXT;
        RETURN;
    END IF;

    -- Turned away: registered as waiting from this session, queued if it waits its turn
    -- (--fair, or exclusive behind shared holders, so that readers coming later do not keep it
    -- out for ever).
    INSERT INTO @schema@.waiters AS w (name, token, kind, queued, since, until, backend_pid)
    VALUES (p_name, p_token, p_kind,
            p_fair OR (p_kind = 'lock' AND holding > 0 AND exclusive = 0),
            now, now + p_waiting_ms * interval '1 millisecond', @schema@.session())
    ON CONFLICT (name, token) DO UPDATE
        SET until = excluded.until, queued = w.queued OR excluded.queued,
            backend_pid = excluded.backend_pid;
    result := 'busy';
    -- At least 100 ms: a lease that ended but whose row a fencing transaction still holds is
    -- looked at again that soon, not at once.
    remaining_ms := CASE WHEN soonest IS NOT NULL
                         THEN GREATEST(100, @schema@.ms(soonest::timestamptz) - @schema@.ms(now)) END;
    -- Free, but promised to the queued waiters ahead.
    queued := free;
    PERFORM @schema@.recount(p_name);
    RETURN NEXT;
END
$$;

-- The take as redlock 0.3.0 calls it, with this build's retention.
CREATE OR REPLACE FUNCTION @schema@.take(
    p_name text, p_token text, p_ttl_ms bigint, p_kind text, p_limit integer, p_fair boolean,
    p_min_interval_ms bigint, p_waiting_ms bigint,
    p_host text, p_pid bigint, p_command text, p_started bigint)
RETURNS TABLE (result text, fence bigint, started_ms bigint, remaining_ms bigint,
               queued boolean, ago_ms bigint, found_kind text, channel text)
LANGUAGE sql AS $$
    SELECT * FROM @schema@.take(p_name, p_token, p_ttl_ms, p_kind, p_limit, p_fair,
                                p_min_interval_ms, p_waiting_ms, p_host, p_pid, p_command,
                                p_started, @runs_kept@, @record_ttl_ms@)
$$;

-- What a step that did not find `p_token` holding lock `p_name` found instead at `p_now`:
-- 'theirs' where another holds it alone (exclusive, its lease running); else 'gone' (nobody, or
-- holders of a limit or shared lock, none of them this one), as the model says and Redis
-- answers. A run makes the same of both, its lock lost (76), and says which. redlock 0.3.0
-- reads any answer but 'ours' as gone.
CREATE OR REPLACE FUNCTION @schema@.theirs_or_gone(p_name text, p_token text, p_now timestamptz)
RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN count(*) = 1 AND bool_and(h.kind = 'lock') THEN 'theirs' ELSE 'gone' END
    FROM @schema@.holders h
    WHERE h.name = p_name AND h.token <> p_token AND h.until >= p_now
$$;

-- Extend the lease of `p_token` (fencing token `p_fence`) to `p_ttl_ms` from now, if it has not
-- ended. 'ours'; or the run lost its lock, its record says so (`p_lost_*`), and the answer is
-- what it found instead (`theirs_or_gone`).
CREATE OR REPLACE FUNCTION @schema@.renew(
    p_name text, p_token text, p_fence bigint, p_ttl_ms bigint,
    p_lost_outcome text, p_lost_status integer)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now timestamptz := clock_timestamp();
BEGIN
    UPDATE @schema@.holders h SET until = now + p_ttl_ms * interval '1 millisecond'
    WHERE h.name = p_name AND h.token = p_token AND h.fence = p_fence AND h.until >= now;
    IF FOUND THEN
        RETURN 'ours';
    END IF;
    PERFORM 1 FROM @schema@.locks l WHERE l.name = p_name FOR UPDATE;
    PERFORM @schema@.lost(p_name, p_fence, p_lost_outcome, p_lost_status, NULL, now);
    PERFORM @schema@.recount(p_name);
    RETURN @schema@.theirs_or_gone(p_name, p_token, now);
END
$$;

-- The run of `p_fence` lost its lock: its holder's row (an ended lease) leaves, and its record
-- ends as `p_outcome` at the earlier of its lease's end, `p_by` and now; counted once: where
-- its holder's row was still there (whether or not the record still keeps the run), or its
-- run's row says it has not ended.
CREATE OR REPLACE FUNCTION @schema@.lost(
    p_name text, p_fence bigint, p_outcome text, p_status integer, p_by timestamptz,
    p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    lease_end timestamptz;
    held boolean;
    was text;
    recorded boolean;
BEGIN
    DELETE FROM @schema@.holders h WHERE h.name = p_name AND h.fence = p_fence
    RETURNING h.until INTO lease_end;
    held := FOUND;
    -- A run the next taker marked vanished (no end yet when its lease ended) is corrected to
    -- what its holder, back, found: a lost lock, the count moved, as on Redis and etcd.
    SELECT r.outcome INTO was FROM @schema@.runs r
    WHERE r.name = p_name AND r.fence = p_fence FOR UPDATE;
    UPDATE @schema@.runs r
    SET outcome = p_outcome, status = p_status,
        ended = LEAST(COALESCE(lease_end, r.until, p_now), COALESCE(p_by, p_now), p_now)
    WHERE r.name = p_name AND r.fence = p_fence
      AND (r.outcome IS NULL OR r.outcome = 'vanished');
    recorded := FOUND;
    IF recorded THEN
        IF was = 'vanished' THEN
            PERFORM @schema@.count(p_name, 'vanished', -1);
        END IF;
        UPDATE @schema@.locks l SET last_ended_fence = p_fence WHERE l.name = p_name;
    END IF;
    IF held OR recorded THEN
        PERFORM @schema@.count(p_name, p_outcome, 1);
    END IF;
    PERFORM @schema@.wake(p_name);
END
$$;

-- Release `p_token`'s hold (fencing token `p_fence`) if its lease has not ended, record how the
-- run ended (`p_took_ms` after it started; a success also for --min-interval), and wake the
-- waiters (NOTIFY: delivered when this commits). 'ours'; or the run recorded as lost
-- (`p_lost_*`, held until `p_lost_by_ms` at the latest) and what it found instead ('theirs' or
-- 'gone': `theirs_or_gone`); 'ours' too for a release made again whose first answer was lost
-- (the record has its end already).
CREATE OR REPLACE FUNCTION @schema@.release(
    p_name text, p_token text, p_fence bigint, p_outcome text, p_status integer,
    p_took_ms bigint, p_min_interval_ms bigint,
    p_lost_outcome text, p_lost_status integer, p_lost_by_ms bigint, p_record_ttl_ms bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now timestamptz;
    ended_at timestamptz;
    recorded text;
BEGIN
    PERFORM 1 FROM @schema@.locks l WHERE l.name = p_name FOR UPDATE;
    now := clock_timestamp();
    PERFORM @schema@.used(p_name, now);
    DELETE FROM @schema@.holders h
    WHERE h.name = p_name AND h.token = p_token AND h.fence = p_fence AND h.until >= now;
    IF FOUND THEN
        UPDATE @schema@.runs r
        SET outcome = p_outcome, status = p_status, min_interval_ms = p_min_interval_ms,
            ended = LEAST(r.started + p_took_ms * interval '1 millisecond', now)
        WHERE r.name = p_name AND r.fence = p_fence AND r.outcome IS NULL
        RETURNING r.ended INTO ended_at;
        PERFORM @schema@.count(p_name, p_outcome, 1);
        UPDATE @schema@.locks l SET last_ended_fence = p_fence WHERE l.name = p_name;
        IF p_outcome = 'success' THEN
            UPDATE @schema@.locks l
            SET last_success = now, success_interval_ms = p_min_interval_ms,
                last_success_fence = p_fence
            WHERE l.name = p_name;
        END IF;
        PERFORM @schema@.wake(p_name);
        PERFORM @schema@.recount(p_name);
        RETURN 'ours';
    END IF;
    SELECT r.outcome INTO recorded FROM @schema@.runs r
    WHERE r.name = p_name AND r.fence = p_fence;
    IF recorded IS NOT NULL AND recorded = p_outcome THEN
        RETURN 'ours';
    END IF;
    PERFORM @schema@.lost(p_name, p_fence, p_lost_outcome, p_lost_status,
                          CASE WHEN p_lost_by_ms > 0
                               THEN to_timestamp(p_lost_by_ms / 1000.0) END, now);
    PERFORM @schema@.recount(p_name);
    RETURN @schema@.theirs_or_gone(p_name, p_token, now);
END
$$;

-- The release as redlock 0.3.0 calls it, with this build's retention.
CREATE OR REPLACE FUNCTION @schema@.release(
    p_name text, p_token text, p_fence bigint, p_outcome text, p_status integer,
    p_took_ms bigint, p_min_interval_ms bigint,
    p_lost_outcome text, p_lost_status integer, p_lost_by_ms bigint)
RETURNS text LANGUAGE sql AS $$
    SELECT @schema@.release(p_name, p_token, p_fence, p_outcome, p_status, p_took_ms,
                            p_min_interval_ms, p_lost_outcome, p_lost_status, p_lost_by_ms,
                            @record_ttl_ms@)
$$;

-- A waiter gives up: it leaves the queue (`p_busy`: counted as a run turned away by a busy
-- lock), and the next in line is woken, in case it waited behind this one. A take of this
-- token whose answer was lost is undone (its run never ran): true if there was one.
CREATE OR REPLACE FUNCTION @schema@.leave(p_name text, p_token text, p_busy boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    taken bigint;
BEGIN
    PERFORM 1 FROM @schema@.locks l WHERE l.name = p_name FOR UPDATE;
    DELETE FROM @schema@.waiters w WHERE w.name = p_name AND w.token = p_token;
    DELETE FROM @schema@.holders h WHERE h.name = p_name AND h.token = p_token
    RETURNING h.fence INTO taken;
    IF taken IS NOT NULL THEN
        DELETE FROM @schema@.runs r WHERE r.name = p_name AND r.fence = taken;
    END IF;
    IF p_busy THEN
        PERFORM @schema@.count(p_name, 'busy', 1);
    END IF;
    PERFORM @schema@.wake(p_name);
    PERFORM @schema@.recount(p_name);
    RETURN taken IS NOT NULL;
END
$$;

-- Break lock `p_name` (`redlock release --force`): remove the holder of `p_token`, or the only
-- holder when no token is given, and move the fencing counter past its token, so that a
-- resource that checks it refuses the removed holder's writes. Its renewals fail from now on,
-- and it stops its command. Answers what it found and did:
--   ('free', fence, cleared)             nobody held it; its queued waiters were cleared;
--   ('other', fence, holder's token)     an exclusive holder, not the one of `p_token`;
--   ('not_a_holder' | 'several', fence, kind, holders)
--   ('removed', new fence, token, kind, holders left, host, pid, command, started)
CREATE OR REPLACE FUNCTION @schema@.force(p_name text, p_token text)
RETURNS TABLE (result text, fence bigint, token text, kind text, holders bigint,
               host text, pid bigint, command text, started bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    now timestamptz;
    chosen @schema@.holders%ROWTYPE;
BEGIN
    SELECT l.fence INTO fence FROM @schema@.locks l WHERE l.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        result := 'free';
        fence := 0;
        holders := 0;
        PERFORM @schema@.recount(p_name);
        RETURN NEXT;
        RETURN;
    END IF;
    now := clock_timestamp();
    PERFORM @schema@.expire(p_name, now);
    SELECT count(*), min(h.kind) INTO holders, kind FROM @schema@.holders h
    WHERE h.name = p_name;
    IF holders = 0 THEN
        WITH cleared AS (
            DELETE FROM @schema@.waiters w WHERE w.name = p_name AND w.queued RETURNING 1
        ) SELECT count(*) INTO holders FROM cleared;
        result := 'free';
        PERFORM @schema@.recount(p_name);
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT * INTO chosen FROM @schema@.holders h
    WHERE h.name = p_name AND (h.token = p_token OR (p_token IS NULL AND holders = 1));
    IF NOT FOUND THEN
        IF p_token IS NOT NULL AND holders = 1 AND kind = 'lock' THEN
            result := 'other';
            SELECT h.token INTO token FROM @schema@.holders h WHERE h.name = p_name;
        ELSIF p_token IS NOT NULL THEN
            result := 'not_a_holder';
        ELSE
            result := 'several';
        END IF;
        PERFORM @schema@.recount(p_name);
        RETURN NEXT;
        RETURN;
    END IF;
    DELETE FROM @schema@.holders h WHERE h.name = p_name AND h.token = chosen.token;
    UPDATE @schema@.locks l SET fence = GREATEST(l.fence, chosen.fence) + 1 WHERE l.name = p_name
    RETURNING l.fence INTO fence;
    PERFORM @schema@.wake(p_name);
    result := 'removed';
    token := chosen.token;
    kind := chosen.kind;
    holders := holders - 1;
    host := chosen.host;
    pid := chosen.pid;
    command := chosen.command;
    started := chosen.started;
    PERFORM @schema@.recount(p_name);
    RETURN NEXT;
END
$$;
