
use builtin;
use str;

set edit:completion:arg-completer[redlock] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'redlock'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'redlock'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand run 'Run COMMAND while holding the lock NAME; release it when COMMAND ends'
            cand status 'Show whether the lock NAME is free or held, by whom (each holder of a semaphore or shared lock), for how long, its fencing counter and its waiters'
            cand list 'List the locks under a prefix, held ones with their holders and waiters (on Redis by SCAN, never KEYS)'
            cand history 'Show the recent runs of the lock NAME, newest first: host, start, duration, how each ended (a holder that vanished too), fencing token'
            cand check 'A dead man''s switch for monitoring: did a run of the lock NAME succeed, on any host, within --max-age? One line starting OK, WARNING, CRITICAL or UNKNOWN'
            cand release 'Break-glass: delete the lock NAME whoever holds it (or one of its several holders), and advance its fencing counter'
            cand init 'Make the tables a PostgreSQL database keeps its locks in (idempotent), or print the SQL that makes them for a DBA to apply (--print). Redis, etcd and ZooKeeper need none'
            cand completions 'Print a shell completion script to stdout (no server needed)'
            cand man 'Print the man page, redlock(1), to stdout as roff (no server needed)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'redlock;run'= {
            cand --url 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters'
            cand --prefix 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)'
            cand --password-file 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL'
            cand --tls-ca-cert 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)'
            cand --tls-cert 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)'
            cand --tls-key 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)'
            cand --key 'Name of the lock (not read from the environment: REDLOCK_KEY is what the command sees)'
            cand --ttl 'Lease length; renewed every ttl/3 while the command runs'
            cand --wait 'How long to wait for a busy lock, an unreachable server, or the replicas --min-replicas asks for (retried with back-off): 0 tries once, `forever` waits without limit'
            cand --limit 'A semaphore: at most N holders of the lock at once, across every host, each with its own token and lease. Every client of the lock must give the same N (not read from the environment, like --key)'
            cand --conflict-exit-code 'Exit status when the lock was not acquired (or the run was skipped by --min-interval)'
            cand --min-interval 'Skip the run (conflict status) if a run of this lock succeeded this recently, on any host, with or without --min-interval'
            cand --splay 'Before the first attempt, wait a random time in [0, DURATION), so that a fleet started by the same crontab line spreads out (and another host can win). A signal ends it as it ends a wait for the lock; --min-interval is checked after it'
            cand --stop-signal 'Signal that asks the command to stop (lock lost, --max-runtime): a name or number'
            cand --kill-after 'Grace between the stop signal and SIGKILL [default: 5s]. After the loss of the lease the grace is the shorter of --kill-after and a quarter of the ttl, and never runs past the lease.'
            cand --min-replicas 'Redis only, refused elsewhere (etcd and ZooKeeper commit to a majority of their members before they answer; on PostgreSQL a synchronous standby does this): after taking the lock and after every renewal, wait for N replicas to acknowledge it (WAIT, up to ttl/10, at most 1s). Too few after taking it: release it, do not run the command, exit 69 (with --wait: try again until the wait ends). A renewal too few acknowledged does not extend the lease: if none is acknowledged before it runs low, the command is stopped (76). With several --url: N replicas of each node. 0: do not wait'
            cand --max-runtime 'Stop the command after this long and exit 124'
            cand --metrics-file 'Write Prometheus metrics (textfile collector format) to PATH when redlock exits'
            cand --log-format 'Diagnostics as text lines, or as one JSON object per line (stable event names)'
            cand --tls-insecure 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
            cand --fair 'Waiters take the lock first come, first served (use it on every client of the lock)'
            cand --shared 'Hold the lock shared: any number of --shared holders at once, but never beside a holder without it (an exclusive one), and not ahead of one that waits (not read from the environment, like --key)'
            cand --fsync 'Redis only, refused elsewhere (etcd, ZooKeeper and PostgreSQL fsync each commit before they answer): after taking the lock and after every renewal, wait until the write is fsynced to the master''s append-only file, and with --min-replicas N to N replicas'' (WAITAOF, within the same time as --min-replicas). Not fsynced after taking it: release it, do not run the command, exit 69 (with --wait: try again until the wait ends); a renewal not fsynced does not extend the lease. Needs appendonly yes and Redis 7.2+ or Valkey 8: refused with 69 otherwise, before the command runs'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors'
            cand --quiet 'Say nothing on stderr but errors'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;status'= {
            cand --url 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters'
            cand --prefix 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)'
            cand --password-file 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL'
            cand --tls-ca-cert 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)'
            cand --tls-cert 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)'
            cand --tls-key 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)'
            cand --key 'Name of the lock'
            cand --log-format 'Diagnostics as text lines, or as one JSON object per line (stable event names)'
            cand --tls-insecure 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
            cand --json 'Print one JSON object instead of text'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors'
            cand --quiet 'Say nothing on stderr but errors'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;list'= {
            cand --url 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters'
            cand --prefix 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)'
            cand --password-file 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL'
            cand --tls-ca-cert 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)'
            cand --tls-cert 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)'
            cand --tls-key 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)'
            cand --log-format 'Diagnostics as text lines, or as one JSON object per line (stable event names)'
            cand --tls-insecure 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
            cand --json 'Print a JSON array of the locks instead of text'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors'
            cand --quiet 'Say nothing on stderr but errors'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;history'= {
            cand --url 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters'
            cand --prefix 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)'
            cand --password-file 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL'
            cand --tls-ca-cert 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)'
            cand --tls-cert 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)'
            cand --tls-key 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)'
            cand --key 'Name of the lock'
            cand --log-format 'Diagnostics as text lines, or as one JSON object per line (stable event names)'
            cand --tls-insecure 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
            cand --json 'Print one JSON array of the runs instead of text'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors'
            cand --quiet 'Say nothing on stderr but errors'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;check'= {
            cand --url 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters'
            cand --prefix 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)'
            cand --password-file 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL'
            cand --tls-ca-cert 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)'
            cand --tls-cert 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)'
            cand --tls-key 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)'
            cand --key 'Name of the lock'
            cand --max-age 'OK only if a run succeeded within this long (by the server''s clock), on any host'
            cand --log-format 'Diagnostics as text lines, or as one JSON object per line (stable event names)'
            cand --tls-insecure 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
            cand --json 'Print one JSON object (with the same exit status) instead of the line'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors'
            cand --quiet 'Say nothing on stderr but errors'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;release'= {
            cand --url 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters'
            cand --prefix 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)'
            cand --password-file 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL'
            cand --tls-ca-cert 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)'
            cand --tls-cert 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)'
            cand --tls-key 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)'
            cand --key 'Name of the lock'
            cand --token 'Only if the lock still holds this owner token (as shown by status): never break the lock of a holder that took it since you looked. Of several holders, the one to remove'
            cand --log-format 'Diagnostics as text lines, or as one JSON object per line (stable event names)'
            cand --tls-insecure 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
            cand --force 'Required: delete the lock even though another process holds it'
            cand --json 'Print one JSON object saying what was done instead of text'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors'
            cand --quiet 'Say nothing on stderr but errors'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;init'= {
            cand --url 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters'
            cand --prefix 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)'
            cand --password-file 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL'
            cand --tls-ca-cert 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)'
            cand --tls-cert 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)'
            cand --tls-key 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)'
            cand --log-format 'Diagnostics as text lines, or as one JSON object per line (stable event names)'
            cand --tls-insecure 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
            cand --print 'Print the SQL instead of running it (nothing is connected to)'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors'
            cand --quiet 'Say nothing on stderr but errors'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;completions'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;man'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;help'= {
            cand run 'Run COMMAND while holding the lock NAME; release it when COMMAND ends'
            cand status 'Show whether the lock NAME is free or held, by whom (each holder of a semaphore or shared lock), for how long, its fencing counter and its waiters'
            cand list 'List the locks under a prefix, held ones with their holders and waiters (on Redis by SCAN, never KEYS)'
            cand history 'Show the recent runs of the lock NAME, newest first: host, start, duration, how each ended (a holder that vanished too), fencing token'
            cand check 'A dead man''s switch for monitoring: did a run of the lock NAME succeed, on any host, within --max-age? One line starting OK, WARNING, CRITICAL or UNKNOWN'
            cand release 'Break-glass: delete the lock NAME whoever holds it (or one of its several holders), and advance its fencing counter'
            cand init 'Make the tables a PostgreSQL database keeps its locks in (idempotent), or print the SQL that makes them for a DBA to apply (--print). Redis, etcd and ZooKeeper need none'
            cand completions 'Print a shell completion script to stdout (no server needed)'
            cand man 'Print the man page, redlock(1), to stdout as roff (no server needed)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'redlock;help;run'= {
        }
        &'redlock;help;status'= {
        }
        &'redlock;help;list'= {
        }
        &'redlock;help;history'= {
        }
        &'redlock;help;check'= {
        }
        &'redlock;help;release'= {
        }
        &'redlock;help;init'= {
        }
        &'redlock;help;completions'= {
        }
        &'redlock;help;man'= {
        }
        &'redlock;help;help'= {
        }
    ]
    $completions[$command]
}
