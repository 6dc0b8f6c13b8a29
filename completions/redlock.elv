
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
            cand completions 'Print a shell completion script to stdout (no Redis needed)'
            cand man 'Print the man page, redlock(1), to stdout as roff (no Redis needed)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'redlock;run'= {
            cand --url 'Redis to lock on: redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock'
            cand --key 'Name of the lock (not read from the environment: REDLOCK_KEY is what the command sees)'
            cand --ttl 'Lease length; renewed every ttl/3 while the command runs'
            cand --wait 'How long to wait for a busy lock: 0 tries once, `forever` waits without limit'
            cand --conflict-exit-code 'Exit status when the lock was not acquired'
            cand --stop-signal 'Signal that asks the command to stop (lock lost, --max-runtime): a name or number'
            cand --kill-after 'Grace between a stop signal and SIGKILL [default: 5s, at most ttl/4]; at most ttl/2'
            cand --max-runtime 'Stop the command after this long and exit 124'
            cand --prefix 'Prefix of the Redis keys: the lock is PREFIX{NAME}'
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
            cand completions 'Print a shell completion script to stdout (no Redis needed)'
            cand man 'Print the man page, redlock(1), to stdout as roff (no Redis needed)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'redlock;help;run'= {
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
