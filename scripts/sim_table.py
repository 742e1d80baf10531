#!/usr/bin/env python3
"""Markdown rows for docs/evaluation.md from berth-sim --json files.

usage: sim_table.py LABEL=FILE.json [LABEL=FILE.json ...]
Each FILE is what `berth-sim ... --json FILE` wrote; LABEL names the trace
(and GPUs) in the first column. A FILE name ending in "@SUFFIX.json" adds
SUFFIX to each scheduler's name (e.g. "(max runtime 1.5x)").
The last column is ETA accuracy: of the jobs given a known estimated start,
the share that started within 25% of the wait it promised ("—": none given).
"""
import json
import sys


def main() -> None:
    print("| trace | GPUs | scheduler | JCT mean | JCT p99 | wait mean | wait p99 | allocation "
          "| evictions | lost GPU-h | rho mean | rho>1 | ETA ±25% |")
    print("| --- " * 13 + "|")
    for arg in sys.argv[1:]:
        label, _, path = arg.partition("=")
        suffix = ""
        if "@" in label:
            label, _, suffix = label.partition("@")
        for s in json.load(open(path)):
            name = s["scheduler"] + (f" ({suffix})" if suffix else "")
            a = s["all"]
            f = s["fairness"]
            etas = s.get("etas", 0)
            eta = f"{100 * s['eta_within_25']:.0f}% of {etas}" if etas else "—"
            print(f"| {label} | {s['cluster_gpus']} | {name} | {a['jct']['mean_s']:.0f} "
                  f"| {a['jct']['p99_s']:.0f} | {a['wait']['mean_s']:.0f} | {a['wait']['p99_s']:.0f} "
                  f"| {100 * s['mean_allocation']:.1f}% | {s['evictions']} "
                  f"| {s['lost_gpu_hours']:.0f} | {f['mean_rho']:.2f} | {100 * f['share_rho_over_1']:.0f}% "
                  f"| {eta} |")


if __name__ == "__main__":
    main()
