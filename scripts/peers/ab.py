#!/usr/bin/env python3
"""Interleaved A/B runs of pmbench variants on one set of key files.

    scripts/peers/ab.py --work-dir /tmp/keys10m --runs 5 \\
        new=build/release/bench/pmbench old=/tmp/old/build/release/bench/pmbench

Each VARIANT is LABEL=PMBENCH[,ARG[,ARG...]]: a pmbench binary (two builds,
e.g. two git worktrees, to compare two commits) and extra pmbench arguments
for that variant only, written with '=' (`--opt=node=62`,
`--index=absl-btree`, `--eadr`), or ENV=VALUE to set an environment
variable for that variant's runs. The key files are the ones
scripts/peers/compare.py writes into its --work-dir (load.keys, lookup.keys,
insert.keys, delete.keys); run compare.py once with --work-dir to make them.

The variants run in turn, R times (A B C A B C ...), each pinned to one CPU,
each a fresh process that bulk-loads the load keys at --fill and runs
lookup:M,insert:M,delete:M with the op-key files (M = the files' length).
Printed per variant and phase: the median wall ns/op over the runs, with
min and max. Interleaving spreads the machine's drift over all variants;
quote the medians and their ratios, not single runs.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

PHASES = ["lookup", "insert", "delete"]


def die(msg):
    print(f"ab.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_variant(spec):
    if "=" not in spec:
        die(f"variant '{spec}' is not LABEL=PMBENCH[,ARG...]")
    label, rest = spec.split("=", 1)
    parts = rest.split(",")
    binary, args, env = parts[0], [], {}
    for p in parts[1:]:
        if p.startswith("--"):
            args.append(p)
        elif "=" in p:
            k, v = p.split("=", 1)
            env[k] = v
        else:
            die(f"variant '{label}': '{p}' is neither --ARG nor ENV=VALUE")
    if not os.access(binary, os.X_OK):
        die(f"variant '{label}': no executable at {binary}")
    return label, binary, args, env


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", help="LABEL=PMBENCH[,ARG...]")
    ap.add_argument("--work-dir", required=True, help="key files written by compare.py --work-dir")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--index", default="lbtree")
    ap.add_argument("--opt", default="node=256", help="pmbench --opt for every variant ('' for none)")
    ap.add_argument("--fill", type=float, default=0.7)
    ap.add_argument("--cpu", default="1", help="taskset -c CPU")
    ap.add_argument("--pm-dir", default="/dev/shm")
    args = ap.parse_args()
    if args.runs < 1:
        die("--runs must be >= 1")
    files = {p: os.path.join(args.work_dir, f"{p}.keys") for p in ["load"] + PHASES}
    for p, f in files.items():
        if not os.path.exists(f):
            die(f"no {f} (run scripts/peers/compare.py --work-dir {args.work_dir} first)")
    nkeys = os.path.getsize(files["load"]) // 8
    ops = {p: os.path.getsize(files[p]) // 8 for p in PHASES}
    variants = [parse_variant(v) for v in args.variants]
    tmp = tempfile.mkdtemp(prefix="pmindex-ab-")
    pool = os.path.join(args.pm_dir, f"pmindex-ab-{os.getpid()}")
    res = {label: {p: [] for p in PHASES} for label, *_ in variants}
    try:
        for r in range(args.runs):
            for label, binary, extra, env in variants:
                index = args.index
                rest = []
                for a in extra:  # --index=X replaces the default index
                    if a.startswith("--index="):
                        index = a.split("=", 1)[1]
                    else:
                        rest.append(a)
                js = os.path.join(tmp, "run.json")
                cmd = ["taskset", "-c", args.cpu, binary, "--index", index, "--keys-file", files["load"],
                       "--keys", str(nkeys), "--fill", str(args.fill),
                       "--workload", ",".join(f"{p}:{ops[p]}" for p in PHASES),
                       "--op-keys", ",".join(f"{p}={files[p]}" for p in PHASES),
                       "--repeat", "1", "--pool", pool, "--json", js] + \
                      (["--opt", args.opt] if args.opt else []) + rest
                p = subprocess.run(cmd, env=dict(os.environ, **env), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    sys.stderr.write(p.stderr[-2000:])
                    die(f"variant '{label}' failed (exit {p.returncode}): {' '.join(cmd)}")
                for x in json.load(open(js))["runs"]:
                    if x["errors"] != 0:
                        die(f"variant '{label}': {x['errors']} wrong results in {x['phase']}: {x['first_error']}")
                    res[label][x["phase"]].append(1e9 / x["throughput_ops_s"])
            print(f"run {r + 1}/{args.runs} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(pool, ignore_errors=True)
    print(f"{args.index} {args.opt or '-'}: {nkeys} keys at fill {args.fill}, median wall ns/op of "
          f"{args.runs} interleaved runs (min-max), CPU {args.cpu}")
    print("variant".ljust(14) + "".join(f"{p:>22}" for p in PHASES))
    for label, *_ in variants:
        cells = []
        for p in PHASES:
            v = res[label][p]
            cells.append(f"{statistics.median(v):8.0f} ({min(v):5.0f}-{max(v):5.0f})")
        print(label.ljust(14) + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
