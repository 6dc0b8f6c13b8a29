
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'redlock' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'redlock'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'redlock' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run COMMAND while holding the lock NAME; release it when COMMAND ends')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show whether the lock NAME is free or held, by whom (each holder of a semaphore or shared lock), for how long, its fencing counter and its waiters')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the locks under a prefix, held ones with their holders and waiters (on Redis by SCAN, never KEYS)')
            [CompletionResult]::new('history', 'history', [CompletionResultType]::ParameterValue, 'Show the recent runs of the lock NAME, newest first: host, start, duration, how each ended (a holder that vanished too), fencing token')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'A dead man''s switch for monitoring: did a run of the lock NAME succeed, on any host, within --max-age? One line starting OK, WARNING, CRITICAL or UNKNOWN')
            [CompletionResult]::new('release', 'release', [CompletionResultType]::ParameterValue, 'Break-glass: delete the lock NAME whoever holds it (or one of its several holders), and advance its fencing counter')
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Make the tables a PostgreSQL database keeps its locks in (idempotent), or print the SQL that makes them for a DBA to apply (--print). Redis, etcd and ZooKeeper need none')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script to stdout (no server needed)')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page, redlock(1), to stdout as roff (no server needed)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'redlock;run' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL')
            [CompletionResult]::new('--tls-ca-cert', '--tls-ca-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock (not read from the environment: REDLOCK_KEY is what the command sees)')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'Lease length; renewed every ttl/3 while the command runs')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'How long to wait for a busy lock, an unreachable server, or the replicas --min-replicas asks for (retried with back-off): 0 tries once, `forever` waits without limit')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'A semaphore: at most N holders of the lock at once, across every host, each with its own token and lease. Every client of the lock must give the same N (not read from the environment, like --key)')
            [CompletionResult]::new('--conflict-exit-code', '--conflict-exit-code', [CompletionResultType]::ParameterName, 'Exit status when the lock was not acquired (or the run was skipped by --min-interval)')
            [CompletionResult]::new('--min-interval', '--min-interval', [CompletionResultType]::ParameterName, 'Skip the run (conflict status) if a run of this lock succeeded this recently, on any host, with or without --min-interval')
            [CompletionResult]::new('--splay', '--splay', [CompletionResultType]::ParameterName, 'Before the first attempt, wait a random time in [0, DURATION), so that a fleet started by the same crontab line spreads out (and another host can win). A signal ends it as it ends a wait for the lock; --min-interval is checked after it')
            [CompletionResult]::new('--stop-signal', '--stop-signal', [CompletionResultType]::ParameterName, 'Signal that asks the command to stop (lock lost, --max-runtime): a name or number')
            [CompletionResult]::new('--kill-after', '--kill-after', [CompletionResultType]::ParameterName, 'Grace between the stop signal and SIGKILL [default: 5s]. After the loss of the lease the grace is the shorter of --kill-after and a quarter of the ttl, and never runs past the lease.')
            [CompletionResult]::new('--min-replicas', '--min-replicas', [CompletionResultType]::ParameterName, 'Redis only, refused elsewhere (etcd and ZooKeeper commit to a majority of their members before they answer; on PostgreSQL a synchronous standby does this): after taking the lock and after every renewal, wait for N replicas to acknowledge it (WAIT, up to ttl/10, at most 1s). Too few after taking it: release it, do not run the command, exit 69 (with --wait: try again until the wait ends). A renewal too few acknowledged does not extend the lease: if none is acknowledged before it runs low, the command is stopped (76). With several --url: N replicas of each node. 0: do not wait')
            [CompletionResult]::new('--max-runtime', '--max-runtime', [CompletionResultType]::ParameterName, 'Stop the command after this long and exit 124')
            [CompletionResult]::new('--metrics-file', '--metrics-file', [CompletionResultType]::ParameterName, 'Write Prometheus metrics (textfile collector format) to PATH when redlock exits')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Diagnostics as text lines, or as one JSON object per line (stable event names)')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use')
            [CompletionResult]::new('--fair', '--fair', [CompletionResultType]::ParameterName, 'Waiters take the lock first come, first served (use it on every client of the lock)')
            [CompletionResult]::new('--shared', '--shared', [CompletionResultType]::ParameterName, 'Hold the lock shared: any number of --shared holders at once, but never beside a holder without it (an exclusive one), and not ahead of one that waits (not read from the environment, like --key)')
            [CompletionResult]::new('--fsync', '--fsync', [CompletionResultType]::ParameterName, 'Redis only, refused elsewhere (etcd, ZooKeeper and PostgreSQL fsync each commit before they answer): after taking the lock and after every renewal, wait until the write is fsynced to the master''s append-only file, and with --min-replicas N to N replicas'' (WAITAOF, within the same time as --min-replicas). Not fsynced after taking it: release it, do not run the command, exit 69 (with --wait: try again until the wait ends); a renewal not fsynced does not extend the lease. Needs appendonly yes and Redis 7.2+ or Valkey 8: refused with 69 otherwise, before the command runs')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;status' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL')
            [CompletionResult]::new('--tls-ca-cert', '--tls-ca-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Diagnostics as text lines, or as one JSON object per line (stable event names)')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of text')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;list' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL')
            [CompletionResult]::new('--tls-ca-cert', '--tls-ca-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Diagnostics as text lines, or as one JSON object per line (stable event names)')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON array of the locks instead of text')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;history' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL')
            [CompletionResult]::new('--tls-ca-cert', '--tls-ca-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Diagnostics as text lines, or as one JSON object per line (stable event names)')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON array of the runs instead of text')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;check' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL')
            [CompletionResult]::new('--tls-ca-cert', '--tls-ca-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--max-age', '--max-age', [CompletionResultType]::ParameterName, 'OK only if a run succeeded within this long (by the server''s clock), on any host')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Diagnostics as text lines, or as one JSON object per line (stable event names)')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object (with the same exit status) instead of the line')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;release' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL')
            [CompletionResult]::new('--tls-ca-cert', '--tls-ca-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'Only if the lock still holds this owner token (as shown by status): never break the lock of a holder that took it since you looked. Of several holders, the one to remove')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Diagnostics as text lines, or as one JSON object per line (stable event names)')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Required: delete the lock even though another process holds it')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object saying what was done instead of text')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;init' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock, redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...]; or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port 2379 when left out) or etcds://...; or a PostgreSQL database, postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq''s URI form, its parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble, zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or zks://... (TLS; needs --tls-ca-cert). Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum of independent masters')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of the lock''s keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/..., on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node /CHROOT/PREFIX{NAME} (a ''/'' in the prefix makes folders)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password (Redis''s, the etcd or ZooKeeper user''s or PostgreSQL''s) from FILE (one trailing newline dropped); it wins over REDLOCK_PASSWORD and over a password in the URL')
            [CompletionResult]::new('--tls-ca-cert', '--tls-ca-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or require): trust the CA certificates in this PEM file instead of the system store (on postgres://, instead of ~/.postgresql/root.crt; the URL''s sslrootcert wins)')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'For rediss://, etcds:// and zks:// with mutual TLS: the client''s private key (PEM; needs --tls-cert)')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Diagnostics as text lines, or as one JSON object per line (stable event names)')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'TESTING ONLY: do not verify the server''s TLS certificate, so anyone on the network path can pose as the server. Warns on every use')
            [CompletionResult]::new('--print', '--print', [CompletionResultType]::ParameterName, 'Print the SQL instead of running it (nothing is connected to)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;completions' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;man' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;help' {
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run COMMAND while holding the lock NAME; release it when COMMAND ends')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show whether the lock NAME is free or held, by whom (each holder of a semaphore or shared lock), for how long, its fencing counter and its waiters')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the locks under a prefix, held ones with their holders and waiters (on Redis by SCAN, never KEYS)')
            [CompletionResult]::new('history', 'history', [CompletionResultType]::ParameterValue, 'Show the recent runs of the lock NAME, newest first: host, start, duration, how each ended (a holder that vanished too), fencing token')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'A dead man''s switch for monitoring: did a run of the lock NAME succeed, on any host, within --max-age? One line starting OK, WARNING, CRITICAL or UNKNOWN')
            [CompletionResult]::new('release', 'release', [CompletionResultType]::ParameterValue, 'Break-glass: delete the lock NAME whoever holds it (or one of its several holders), and advance its fencing counter')
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Make the tables a PostgreSQL database keeps its locks in (idempotent), or print the SQL that makes them for a DBA to apply (--print). Redis, etcd and ZooKeeper need none')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script to stdout (no server needed)')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page, redlock(1), to stdout as roff (no server needed)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'redlock;help;run' {
            break
        }
        'redlock;help;status' {
            break
        }
        'redlock;help;list' {
            break
        }
        'redlock;help;history' {
            break
        }
        'redlock;help;check' {
            break
        }
        'redlock;help;release' {
            break
        }
        'redlock;help;init' {
            break
        }
        'redlock;help;completions' {
            break
        }
        'redlock;help;man' {
            break
        }
        'redlock;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
