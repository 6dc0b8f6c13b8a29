#!/usr/bin/env python3
"""Whether one build is slower than another, beyond the noise of one benchmark run.

Usage: bench-compare.py NEW OLD [BASE]

NEW, OLD and BASE are each a comma-separated list of files, one per pass of the benchmark and
in the same order (the tools take turns within a pass), each file one sample per line
(hand-over gaps in ms, or the wall times of hyperfine's runs). The statistic is the ratio of
medians over all passes, NEW's over OLD's, or, given BASE (bare `true`'s times), of
overheads: (median NEW - median BASE) over (median OLD - median BASE). Prints
`RATIO LOW HIGH`: the ratio and its 95 % interval, by a two-level bootstrap (2000 resamples:
passes drawn with replacement, the same passes for every column, then samples drawn with
replacement within each; percentile method; a fixed seed, so that the same samples print the
same line). Drawing passes carries the drift between passes, which weighs on neighbouring
samples alike, into the interval: samples alone would make it too narrow.

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


def read(paths):
    passes = []
    for path in paths.split(","):
        with open(path, encoding="utf-8") as f:
            passes.append([float(line) for line in f if line.strip()])
    if not any(passes):
        sys.exit(f"bench-compare: {paths} holds no samples")
    return passes


def pooled(passes):
    return [sample for samples in passes for sample in samples]


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
    columns = [c for c in (new, old, base) if c is not None]
    if len({len(c) for c in columns}) != 1:
        sys.exit("bench-compare: the columns were measured in different numbers of passes")
    rng = random.Random(1)

    def resample(column, chosen):
        return [x for p in chosen for x in rng.choices(column[p], k=len(column[p]))]

    ratios = []
    for _ in range(RESAMPLES):
        chosen = rng.choices(range(len(new)), k=len(new))
        ratios.append(
            statistic(
                resample(new, chosen),
                resample(old, chosen),
                resample(base, chosen) if base else None,
            )
        )
    ratios.sort()
    low = ratios[int(RESAMPLES * 0.025)]
    high = ratios[int(RESAMPLES * 0.975) - 1]
    whole = statistic(pooled(new), pooled(old), pooled(base) if base else None)
    print(f"{whole:.3f} {low:.3f} {high:.3f}")


if __name__ == "__main__":
    main()
