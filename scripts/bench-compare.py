#!/usr/bin/env python3
"""Whether one build is slower than another, beyond the noise of one benchmark run.

Usage: bench-compare.py NEW OLD [BASE]

NEW, OLD and BASE are files of samples, one number per line (hand-over gaps in ms, or the
wall times of hyperfine's runs). The statistic is the ratio of medians, NEW's over OLD's, or,
given BASE (bare `true`'s times), of overheads: (median NEW - median BASE) over
(median OLD - median BASE). Prints `RATIO LOW HIGH`: the ratio and its 95 % bootstrap
interval (percentile method, 2000 resamples of each file with replacement, a fixed seed so
that the same samples print the same line).

scripts/bench.sh holds a build to "no worse than 0.3.0" with it: a ratio whose interval
reaches 1.00 or below shows no slowdown that the run can tell from its noise, one whose
interval lies wholly above 1.00 does. Two copies of one build, measured so, scatter a few
per cent either side of 1.00 from run to run (docs/performance.md), so a bare ratio above
1.00 would fail about every other run on noise alone; the interval says which it is.
"""

import random
import statistics
import sys

RESAMPLES = 2000


def read(path):
    with open(path, encoding="utf-8") as f:
        samples = [float(line) for line in f if line.strip()]
    if not samples:
        sys.exit(f"bench-compare: {path} holds no samples")
    return samples


def statistic(new, old, base):
    floor = statistics.median(base) if base else 0.0
    denominator = statistics.median(old) - floor
    if denominator <= 0:
        return float("inf")
    return (statistics.median(new) - floor) / denominator


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[2])
    new, old = read(sys.argv[1]), read(sys.argv[2])
    base = read(sys.argv[3]) if len(sys.argv) == 4 else None
    rng = random.Random(1)

    def resample(samples):
        return rng.choices(samples, k=len(samples)) if samples else samples

    ratios = sorted(
        statistic(resample(new), resample(old), resample(base)) for _ in range(RESAMPLES)
    )
    low = ratios[int(RESAMPLES * 0.025)]
    high = ratios[int(RESAMPLES * 0.975) - 1]
    print(f"{statistic(new, old, base):.3f} {low:.3f} {high:.3f}")


if __name__ == "__main__":
    main()
