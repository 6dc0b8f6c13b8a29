//! Prints the numbers docs/img/timeline.svg is drawn from (the default ttl and --kill-after put
//! through the run's own timing functions); `scripts/timeline.py` draws them:
//! `cargo run --quiet --example timeline-numbers | python3 scripts/timeline.py > docs/img/timeline.svg`

fn main() {
    print!("{}", redlock::cli::timeline::numbers());
}
