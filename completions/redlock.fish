# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_redlock_global_optspecs
    string join \n h/help V/version
end

function __fish_redlock_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_redlock_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_redlock_using_subcommand
    set -l cmd (__fish_redlock_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c redlock -n "__fish_redlock_needs_command" -s h -l help -d 'Print help'
complete -c redlock -n "__fish_redlock_needs_command" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "run" -d 'Run COMMAND while holding the lock NAME; release it when COMMAND ends'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "status" -d 'Show whether the lock NAME is free or held, by whom (each holder of a semaphore or shared lock), for how long, its fencing counter and its waiters'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "list" -d 'List the locks under a prefix, held ones with their holders and waiters (on Redis by SCAN, never KEYS)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "history" -d 'Show the recent runs of the lock NAME, newest first: host, start, duration, how each ended (a holder that vanished too), fencing token'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "check" -d 'A dead man\'s switch for monitoring: did a run of the lock NAME succeed, on any host, within --max-age? One line starting OK, WARNING, CRITICAL or UNKNOWN'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "release" -d 'Break-glass: delete the lock NAME whoever holds it (or one of its several holders), and advance its fencing counter'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "init" -d 'Make the tables a PostgreSQL database keeps its locks in (idempotent), or print the SQL that makes them for a DBA to apply (--print). Redis, etcd and ZooKeeper need none'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "completions" -d 'Print a shell completion script to stdout (no server needed)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "man" -d 'Print the man page, redlock(1), to stdout as roff (no server needed)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l url -d 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq\'s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l prefix -d 'Prefix of the lock\'s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a \'/\' in the prefix makes folders)' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l password-file -d 'Read the password (Redis\'s, the etcd or ZooKeeper user\'s or PostgreSQL\'s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-ca-cert -d 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL\'s sslrootcert wins)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-cert -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-key -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client\'s private key (PEM; needs --tls-cert)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l key -d 'Name of the lock (not read from the environment: REDLOCK_KEY is what the command sees)' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l ttl -d 'Lease length; renewed every ttl/3 while the command runs' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l wait -d 'How long to wait for a busy lock, an unreachable server, or the replicas --min-replicas asks for (retried with back-off): 0 tries once, `forever` waits without limit' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l limit -d 'A semaphore: at most N holders of the lock at once, across every host, each with its own token and lease. Every client of the lock must give the same N (not read from the environment, like --key)' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l conflict-exit-code -d 'Exit status when the lock was not acquired (or the run was skipped by --min-interval)' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l min-interval -d 'Skip the run (conflict status) if a run of this lock succeeded this recently, on any host, with or without --min-interval' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l splay -d 'Before the first attempt, wait a random time in [0, DURATION), so that a fleet started by the same crontab line spreads out (and another host can win). A signal ends it as it ends a wait for the lock; --min-interval is checked after it' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l stop-signal -d 'Signal that asks the command to stop (lock lost, --max-runtime): a name or number' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l kill-after -d 'Grace between the stop signal and SIGKILL [default: 5s]. After the loss of the lease the grace is the shorter of --kill-after and a quarter of the ttl, and never runs past the lease.' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l min-replicas -d 'Redis only, refused elsewhere (etcd and ZooKeeper commit to a majority of their members before they answer; on PostgreSQL a synchronous standby does this): after taking the lock and after every renewal, wait for N replicas to acknowledge it (WAIT, up to ttl/10, at most 1s). Too few after taking it: release it, do not run the command, exit 69 (with --wait: try again until the wait ends). A renewal too few acknowledged does not extend the lease: if none is acknowledged before it runs low, the command is stopped (76). With several --url: N replicas of each node. 0: do not wait' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l max-runtime -d 'Stop the command after this long and exit 124' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l metrics-file -d 'Write Prometheus metrics (textfile collector format) to PATH when redlock exits' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l log-format -d 'Diagnostics as text lines, or as one JSON object per line (stable event names)' -r -f -a "text\t''
json\t''"
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-insecure -d 'TESTING ONLY: do not verify the server\'s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l fair -d 'Waiters take the lock first come, first served (use it on every client of the lock)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l shared -d 'Hold the lock shared: any number of --shared holders at once, but never beside a holder without it (an exclusive one), and not ahead of one that waits (not read from the environment, like --key)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l fsync -d 'Redis only, refused elsewhere (etcd, ZooKeeper and PostgreSQL fsync each commit before they answer): after taking the lock and after every renewal, wait until the write is fsynced to the master\'s append-only file, and with --min-replicas N to N replicas\' (WAITAOF, within the same time as --min-replicas). Not fsynced after taking it: release it, do not run the command, exit 69 (with --wait: try again until the wait ends); a renewal not fsynced does not extend the lease. Needs appendonly yes and Redis 7.2+ or Valkey 8: refused with 69 otherwise, before the command runs'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s q -l quiet -d 'Say nothing on stderr but errors'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s h -l help -d 'Print help'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand status" -l url -d 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq\'s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters' -r
complete -c redlock -n "__fish_redlock_using_subcommand status" -l prefix -d 'Prefix of the lock\'s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a \'/\' in the prefix makes folders)' -r
complete -c redlock -n "__fish_redlock_using_subcommand status" -l password-file -d 'Read the password (Redis\'s, the etcd or ZooKeeper user\'s or PostgreSQL\'s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-ca-cert -d 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL\'s sslrootcert wins)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-cert -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-key -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client\'s private key (PEM; needs --tls-cert)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l key -d 'Name of the lock' -r
complete -c redlock -n "__fish_redlock_using_subcommand status" -l log-format -d 'Diagnostics as text lines, or as one JSON object per line (stable event names)' -r -f -a "text\t''
json\t''"
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-insecure -d 'TESTING ONLY: do not verify the server\'s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
complete -c redlock -n "__fish_redlock_using_subcommand status" -l json -d 'Print one JSON object instead of text'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s q -l quiet -d 'Say nothing on stderr but errors'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s h -l help -d 'Print help'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand list" -l url -d 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq\'s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters' -r
complete -c redlock -n "__fish_redlock_using_subcommand list" -l prefix -d 'Prefix of the lock\'s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a \'/\' in the prefix makes folders)' -r
complete -c redlock -n "__fish_redlock_using_subcommand list" -l password-file -d 'Read the password (Redis\'s, the etcd or ZooKeeper user\'s or PostgreSQL\'s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand list" -l tls-ca-cert -d 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL\'s sslrootcert wins)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand list" -l tls-cert -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand list" -l tls-key -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client\'s private key (PEM; needs --tls-cert)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand list" -l log-format -d 'Diagnostics as text lines, or as one JSON object per line (stable event names)' -r -f -a "text\t''
json\t''"
complete -c redlock -n "__fish_redlock_using_subcommand list" -l tls-insecure -d 'TESTING ONLY: do not verify the server\'s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
complete -c redlock -n "__fish_redlock_using_subcommand list" -l json -d 'Print a JSON array of the locks instead of text'
complete -c redlock -n "__fish_redlock_using_subcommand list" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand list" -s q -l quiet -d 'Say nothing on stderr but errors'
complete -c redlock -n "__fish_redlock_using_subcommand list" -s h -l help -d 'Print help'
complete -c redlock -n "__fish_redlock_using_subcommand list" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand history" -l url -d 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq\'s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters' -r
complete -c redlock -n "__fish_redlock_using_subcommand history" -l prefix -d 'Prefix of the lock\'s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a \'/\' in the prefix makes folders)' -r
complete -c redlock -n "__fish_redlock_using_subcommand history" -l password-file -d 'Read the password (Redis\'s, the etcd or ZooKeeper user\'s or PostgreSQL\'s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand history" -l tls-ca-cert -d 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL\'s sslrootcert wins)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand history" -l tls-cert -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand history" -l tls-key -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client\'s private key (PEM; needs --tls-cert)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand history" -l key -d 'Name of the lock' -r
complete -c redlock -n "__fish_redlock_using_subcommand history" -l log-format -d 'Diagnostics as text lines, or as one JSON object per line (stable event names)' -r -f -a "text\t''
json\t''"
complete -c redlock -n "__fish_redlock_using_subcommand history" -l tls-insecure -d 'TESTING ONLY: do not verify the server\'s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
complete -c redlock -n "__fish_redlock_using_subcommand history" -l json -d 'Print one JSON array of the runs instead of text'
complete -c redlock -n "__fish_redlock_using_subcommand history" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand history" -s q -l quiet -d 'Say nothing on stderr but errors'
complete -c redlock -n "__fish_redlock_using_subcommand history" -s h -l help -d 'Print help'
complete -c redlock -n "__fish_redlock_using_subcommand history" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand check" -l url -d 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq\'s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l prefix -d 'Prefix of the lock\'s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a \'/\' in the prefix makes folders)' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l password-file -d 'Read the password (Redis\'s, the etcd or ZooKeeper user\'s or PostgreSQL\'s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-ca-cert -d 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL\'s sslrootcert wins)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-cert -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-key -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client\'s private key (PEM; needs --tls-cert)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l key -d 'Name of the lock' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l max-age -d 'OK only if a run succeeded within this long (by the server\'s clock), on any host' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l log-format -d 'Diagnostics as text lines, or as one JSON object per line (stable event names)' -r -f -a "text\t''
json\t''"
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-insecure -d 'TESTING ONLY: do not verify the server\'s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
complete -c redlock -n "__fish_redlock_using_subcommand check" -l json -d 'Print one JSON object (with the same exit status) instead of the line'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s q -l quiet -d 'Say nothing on stderr but errors'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s h -l help -d 'Print help'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand release" -l url -d 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq\'s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters' -r
complete -c redlock -n "__fish_redlock_using_subcommand release" -l prefix -d 'Prefix of the lock\'s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a \'/\' in the prefix makes folders)' -r
complete -c redlock -n "__fish_redlock_using_subcommand release" -l password-file -d 'Read the password (Redis\'s, the etcd or ZooKeeper user\'s or PostgreSQL\'s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-ca-cert -d 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL\'s sslrootcert wins)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-cert -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-key -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client\'s private key (PEM; needs --tls-cert)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l key -d 'Name of the lock' -r
complete -c redlock -n "__fish_redlock_using_subcommand release" -l token -d 'Only if the lock still holds this owner token (as shown by status): never break the lock of a holder that took it since you looked. Of several holders, the one to remove' -r
complete -c redlock -n "__fish_redlock_using_subcommand release" -l log-format -d 'Diagnostics as text lines, or as one JSON object per line (stable event names)' -r -f -a "text\t''
json\t''"
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-insecure -d 'TESTING ONLY: do not verify the server\'s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
complete -c redlock -n "__fish_redlock_using_subcommand release" -l force -d 'Required: delete the lock even though another process holds it'
complete -c redlock -n "__fish_redlock_using_subcommand release" -l json -d 'Print one JSON object saying what was done instead of text'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s q -l quiet -d 'Say nothing on stderr but errors'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s h -l help -d 'Print help'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand init" -l url -d 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq\'s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters' -r
complete -c redlock -n "__fish_redlock_using_subcommand init" -l prefix -d 'Prefix of the lock\'s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a \'/\' in the prefix makes folders)' -r
complete -c redlock -n "__fish_redlock_using_subcommand init" -l password-file -d 'Read the password (Redis\'s, the etcd or ZooKeeper user\'s or PostgreSQL\'s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand init" -l tls-ca-cert -d 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL\'s sslrootcert wins)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand init" -l tls-cert -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand init" -l tls-key -d 'For rediss://, etcds:// and zks:// with mutual TLS: the client\'s private key (PEM; needs --tls-cert)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand init" -l log-format -d 'Diagnostics as text lines, or as one JSON object per line (stable event names)' -r -f -a "text\t''
json\t''"
complete -c redlock -n "__fish_redlock_using_subcommand init" -l tls-insecure -d 'TESTING ONLY: do not verify the server\'s TLS certificate, so anyone on the network path can pose as the server. Warns on every use'
complete -c redlock -n "__fish_redlock_using_subcommand init" -l print -d 'Print the SQL instead of running it (nothing is connected to)'
complete -c redlock -n "__fish_redlock_using_subcommand init" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand init" -s q -l quiet -d 'Say nothing on stderr but errors'
complete -c redlock -n "__fish_redlock_using_subcommand init" -s h -l help -d 'Print help'
complete -c redlock -n "__fish_redlock_using_subcommand init" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand completions" -s h -l help -d 'Print help'
complete -c redlock -n "__fish_redlock_using_subcommand completions" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand man" -s h -l help -d 'Print help'
complete -c redlock -n "__fish_redlock_using_subcommand man" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run status list history check release init completions man help" -f -a "run" -d 'Run COMMAND while holding the lock NAME; release it when COMMAND ends'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run status list history check release init completions man help" -f -a "status" -d 'Show whether the lock NAME is free or held, by whom (each holder of a semaphore or shared lock), for how long, its fencing counter and its waiters'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run status list history check release init completions man help" -f -a "list" -d 'List the locks under a prefix, held ones with their holders and waiters (on Redis by SCAN, never KEYS)'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run status list history check release init completions man help" -f -a "history" -d 'Show the recent runs of the lock NAME, newest first: host, start, duration, how each ended (a holder that vanished too), fencing token'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run status list history check release init completions man help" -f -a "check" -d 'A dead man\'s switch for monitoring: did a run of the lock NAME succeed, on any host, within --max-age? One line starting OK, WARNING, CRITICAL or UNKNOWN'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run status list history check release init completions man help" -f -a "release" -d 'Break-glass: delete the lock NAME whoever holds it (or one of its several holders), and advance its fencing counter'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run status list history check release init completions man help" -f -a "init" -d 'Make the tables a PostgreSQL database keeps its locks in (idempotent), or print the SQL that makes them for a DBA to apply (--print). Redis, etcd and ZooKeeper need none'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run status list history check release init completions man help" -f -a "completions" -d 'Print a shell completion script to stdout (no server needed)'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run status list history check release init completions man help" -f -a "man" -d 'Print the man page, redlock(1), to stdout as roff (no server needed)'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run status list history check release init completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c redlock -n "__fish_redlock_using_subcommand completions; and not __fish_seen_subcommand_from bash elvish fish powershell zsh" -f -a "bash elvish fish powershell zsh"
