#!/usr/bin/env python3
"""Interleaved runs of pmbench variants on the same generated workload.

    scripts/variants.py --runs 3 --common '--keys 1000000 --workload lookup,insert,delete' \\
        on='--index fastfair --opt node=4096,sentinel=on' \\
        off='--index fastfair --opt node=4096,sentinel=off'

Each VARIANT is LABEL='[BINARY] PMBENCH ARGS' (split as a shell splits
words; a first word ending in 'pmbench' names that variant's binary, e.g. a
build of another commit, instead of --pmbench); every
run is one fresh pmbench process (--repeat 1, --json) with the --common
arguments first, pinned to one CPU. The variants run in turn, R times
(A B C A B C ...), so the machine's drift spreads over all of them; the
seed is pmbench's default, so every variant loads and probes the same keys.
Printed per phase: each variant's median ns/op (wall time, min-max), its
lines flushed and fences per op, and the ratio of the first variant's
median to its own (> 1: faster than the first).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pmbench", default="build/release/bench/pmbench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--common", default="", help="pmbench arguments for every variant")
    ap.add_argument("--cpu", default="1", help="taskset -c CPU ('' for no pinning)")
    ap.add_argument("--pm-dir", default="/dev/shm")
    ap.add_argument("variants", nargs="+", help="LABEL='PMBENCH ARGS'")
    a = ap.parse_args()
    variants = []
    for v in a.variants:
        label, sep, args = v.partition("=")
        if not sep or not label:
            ap.error(f"variant {v!r} is not LABEL='ARGS'")
        variants.append((label, shlex.split(args)))
    # results[label][phase] = list of (ns/op, lines/op, fences/op)
    results = {label: {} for label, _ in variants}
    phases = []
    with tempfile.TemporaryDirectory(prefix="pmindex-variants-", dir=a.pm_dir) as tmp:
        for r in range(a.runs):
            for label, args in variants:
                out = os.path.join(tmp, "run.json")
                binary = a.pmbench
                if args and args[0].endswith("pmbench"):
                    binary, args = args[0], args[1:]
                cmd = ([] if not a.cpu else ["taskset", "-c", a.cpu]) + [binary] + shlex.split(a.common) + args
                cmd += ["--repeat", "1", "--json", out, "--pool", tmp]
                p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    print(f"{label}: pmbench failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}", file=sys.stderr)
                    return 1
                with open(out) as f:
                    doc = json.load(f)
                for run in doc["runs"]:
                    ph = run["phase"] if "phase_no" not in run else f"{run['phase_no']}:{run['phase']}"
                    if ph not in phases:
                        phases.append(ph)
                    ns = run["seconds"] * 1e9 / run["ops"] if run.get("ops") else float("nan")
                    po = run.get("per_op", {})
                    results[label].setdefault(ph, []).append((ns, po.get("lines_flushed", 0.0), po.get("fences", 0.0)))
            print(f"round {r + 1}/{a.runs} done", file=sys.stderr)
    first = variants[0][0]
    print(f"{a.runs} interleaved runs; common: {a.common}")
    print("| phase | variant | ns/op median (min-max) | lines / fences per op | ratio " + first + " / variant |")
    print("|---|---|---:|---|---:|")
    for ph in phases:
        base = statistics.median(x[0] for x in results[first][ph])
        for label, _ in variants:
            xs = results[label].get(ph, [])
            if not xs:
                continue
            ns = [x[0] for x in xs]
            med = statistics.median(ns)
            print(f"| {ph} | {label} | {med:.0f} ({min(ns):.0f}-{max(ns):.0f}) | "
                  f"{statistics.median(x[1] for x in xs):.2f} / {statistics.median(x[2] for x in xs):.2f} | "
                  f"{base / med:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
