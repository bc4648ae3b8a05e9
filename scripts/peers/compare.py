#!/usr/bin/env python3
"""Side by side: a public original tree and pmindex's pmbench on identical keys.

    scripts/peers/compare.py --tree lbtree --peer-checkout ~/src/lbtree \
        --keys 1000000 --ops 100000 --repeat 3

For one original (lbtree: the LB+-Tree authors' code, fptree: sfu-dis
FPTree, fastfair: DICL FAST_FAIR's single-threaded tree, tlbtree:
ypluo/TLBtree's single-threaded variant, roart: madsys-dev/ROART,
pactree: cosmoss-jigu/pactree on one NUMA node), this

 1. builds it outside the pmindex tree (scripts/peers/<tree>.sh, unless
    --no-build), into --peer-build (default /tmp/pmindex-peers/<tree>),
    after scripts/peers/deps.sh installs the Debian packages it needs
    if they are missing (root or sudo then);
 2. writes one key-file set into --work-dir with `pmbench --write-keys`
    (distinct random keys in [1, 2^63), raw little-endian uint64): N load
    keys, M lookup keys drawn from the loaded ones, M fresh insert keys, M
    delete keys drawn from the loaded ones (distinct; they may overlap the
    lookup keys, which run first);
 3. runs, R times and interleaved (original, pmindex, original, ...), each
    process pinned to one CPU (taskset -c --cpu), PM files in --pm-dir:
      the original's driver: load the N keys (lbtree: its bulkload of the
        sorted keys at --fill; fptree, fastfair, tlbtree, pactree: inserts
        in file order, as they have no bulk load from keys), then `lookup M`,
        `insert M`, `del M` of the key files;
      pmbench --keys-file (the same N keys, bulk-loaded at --fill)
        --workload lookup:M,insert:M,delete:M --op-keys lookup=,insert=,delete=
        --repeat 1; for tlbtree and pactree, whose originals are built by
        inserts, pmbench
        loads by inserts too: --keys 0 --workload
        insert:N,lookup:M,insert:M,delete:M --op-keys insert=<the N load keys
        followed by the M fresh ones>,lookup=,delete=, and the table gains
        a "load" row (ns per inserted key of the build); roart likewise,
        and with a "scan" phase after the lookups on both sides (ops/10
        scans of --scan-len pairs from the lookup keys; ns per scan);
 4. runs the original once more, untimed, to count cache lines flushed and
    fences per operation: lbtree's own NVMFLUSH_STAT build, fastfair's own
    clflush_cnt counter, fptree with shim/pmem_count.c LD_PRELOADed (counts
    what libpmem is asked to flush and drain);
 5. prints one table: per phase the median ns/op of each side with min and
    max, the ratio original/pmindex (above 1: pmindex is faster), and
    lines / fences per op; for the originals run by pmindex's drivers
    (fptree, fastfair, tlbtree, pactree), a second table of CPU time per op (the
    original's whole process, background threads included, against
    pmbench's ops/cpu-s), the figure to trust on a CPU shared with other
    work.

Nothing is fetched from the network: --peer-checkout is a local checkout
(docs/benchmarking.md, "Side by side with the originals").
"""
import argparse
import glob
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from array import array

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

TREES = {
    # name: (pmbench index, its default options)
    "lbtree": ("lbtree", "node=256"),
    "fptree": ("fptree", "node=1024"),
    # FAST_FAIR's 512-byte pages hold 30 records and have no sentinels.
    "fastfair": ("fastfair", "node=512,sentinel=off"),
    # TLBtree: pmindex's tlbtree at its defaults.
    "tlbtree": ("tlbtree", ""),
    # ROART: pmindex's roart at its defaults (leaf arrays of 64, as theirs).
    "roart": ("roart", ""),
    # PACTree: pmindex's pactree at its defaults (64-slot data nodes, as
    # theirs, and the search-layer updater thread).
    "pactree": ("pactree", ""),
}
# Originals built by inserts, whose pmindex side is built by inserts too
# (and timed: the "load" row).
LOAD_BY_INSERTS = {"tlbtree", "roart", "pactree"}
PHASES = ["lookup", "insert", "delete"]
# Originals whose driver also scans: a "scan" phase after the lookups,
# ops/10 scans of --scan-len pairs from the lookup keys (ns per scan).
SCANS = {"roart", "pactree"}


def die(msg):
    print(f"compare.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def run(cmd, env=None, what=""):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        die(f"{what or cmd[0]} failed (exit {p.returncode}): {' '.join(cmd)}")
    return p.stdout


ORIGINAL_TRIES = 3


def run_original(cmd, env, what, pm_file):
    """run() for an original's driver, which may crash on its own: a run
    killed by a signal (cosmoss-jigu/pactree segfaults now and then, in
    its background threads) is retried on a fresh PM file, up to
    ORIGINAL_TRIES times, each crash reported on stderr. None if every try
    crashed."""
    for t in range(1, ORIGINAL_TRIES + 1):
        remove_pm(pm_file)
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        remove_pm(pm_file)
        if p.returncode == 0:
            return p.stdout
        if p.returncode > 0:  # an error the driver reported: not worth a retry
            sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
            die(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}")
        print(f"warning: {what} crashed (signal {-p.returncode}), try {t} of {ORIGINAL_TRIES}: "
              f"{' '.join(cmd)}", file=sys.stderr, flush=True)
    return None


def write_keys(path, keys):
    with open(path, "wb") as f:
        keys.tofile(f)


def make_keys(args, work):
    """The key-file set; returns a dict of paths."""
    files = {k: os.path.join(work, f"{k}.keys") for k in
             ("all", "load", "load-sorted", "lookup", "insert", "delete")}
    stamp = os.path.join(work, "keys.json")
    want = {"keys": args.keys, "ops": args.ops, "seed": args.seed}
    if os.path.exists(stamp) and json.load(open(stamp)) == want and all(map(os.path.exists, files.values())):
        return files
    n, m = args.keys, args.ops
    if m > n:
        die("--ops must not exceed --keys (lookups and deletes draw from the loaded keys)")
    run([args.pmbench, "--write-keys", files["all"], "--keys", str(n + m), "--seed", str(args.seed)],
        what="pmbench --write-keys")
    allk = array("Q")
    with open(files["all"], "rb") as f:
        allk.frombytes(f.read())
    if len(allk) != n + m:
        die("pmbench --write-keys wrote the wrong number of keys")
    load = allk[:n]
    write_keys(files["load"], load)
    write_keys(files["load-sorted"], array("Q", sorted(load)))
    write_keys(files["insert"], allk[n:])
    rng = random.Random(args.seed)
    idx = list(range(n))
    write_keys(files["lookup"], array("Q", (load[i] for i in rng.sample(idx, m))))
    write_keys(files["delete"], array("Q", (load[i] for i in rng.sample(idx, m))))
    json.dump(want, open(stamp, "w"))
    return files


def scan_count(args):
    return max(1, args.ops // 10)


def peer_cmd(args, files, binary, pm_file):
    n, m = str(args.keys), str(args.ops)
    ops = ["lookup", m, files["lookup"], "insert", m, files["insert"], "del", m, files["delete"]]
    if args.tree in SCANS:
        ops[3:3] = ["scan", str(scan_count(args)), files["lookup"], str(args.scan_len)]
    if args.tree == "lbtree":
        # Leaves (NVM pool) and inner nodes (DRAM pool), in MB, with room:
        # 256-byte leaves of 14 slots at the fill, plus splits of inserts.
        leaves = args.keys / (14 * min(args.fill, 1.0)) + args.ops / 7 + 1000
        nvm_mb = int(leaves * 256 * 2 / 2**20) + 64
        mem_mb = max(64, nvm_mb // 4)
        return [binary, "thread", "1", "mempool", str(mem_mb), "nvmpool", pm_file, str(nvm_mb),
                "bulkload", n, files["load-sorted"], str(args.fill)] + ops
    if args.tree == "fptree":
        # FPTree leaves are ~1.2 KB for 64 slots, at least half full.
        pool_mb = int((args.keys + args.ops) / 32 * 2048 / 2**20) + 128
        return [binary, "pool", pm_file, str(pool_mb), "load", n, files["load"], "fill"] + ops
    if args.tree == "tlbtree":
        # 256-byte nodes of 14 slots, at least half full after splits, plus
        # the top layer and PMDK's own overhead.
        pool_mb = int((args.keys + args.ops) / 7 * 256 * 2 / 2**20) + 256
        return [binary, "pool", pm_file, str(pool_mb), "load", n, files["load"]] + ops
    if args.tree == "roart":
        # Their PM file is pm_file + ".part.data", sparse, removed by the driver.
        return [binary, "pool", pm_file, "load", n, files["load"]] + ops
    if args.tree == "pactree":
        # A new directory for the six 1-GiB PMDK pools their initPT creates
        # (the size argument is ignored).
        return [binary, "pool", pm_file, "0", "load", n, files["load"]] + ops
    return [binary, "load", n, files["load"]] + ops


def remove_pm(path):
    """Removes a run's PM file, or the pool directory of an original that makes
    several (pactree), and the files an original derives from that name
    (roart's PATH.part.data): an original that crashes leaves them behind."""
    for p in [path] + glob.glob(glob.escape(path) + ".*"):
        if os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        elif os.path.lexists(p):
            os.remove(p)


def parse_peer(out):
    """{phase: ns} from the drivers' '-- <phase> ...' / 'elapsed ...' lines, plus extras."""
    res, counts, cur = {}, {}, None
    cpu = {}
    names = {"lookup": "lookup", "insert": "insert", "del": "delete", "load": "load", "scan": "scan"}
    for line in out.splitlines():
        mm = re.match(r"^-- (\w+) (\d+) ", line)
        if mm:
            cur = names.get(mm.group(1))
            continue
        if cur is None:
            continue
        mm = re.match(r"^elapsed ns:(\d+)", line)
        if mm:
            res[cur] = int(mm.group(1))
            continue
        mm = re.match(r"^cpu ns:(\d+)", line)  # our drivers
        if mm:
            cpu[cur] = int(mm.group(1))
            continue
        mm = re.match(r"^elapsed time:(\d+) us", line)
        if mm and cur not in res:
            res[cur] = int(mm.group(1)) * 1000
            continue
        mm = re.match(r"^num_clwb=(\d+), num_sfence=(\d+)", line)  # LB+-Tree NVMFLUSH_STAT
        if mm:
            counts[cur] = (int(mm.group(1)), int(mm.group(2)))
            continue
        mm = re.match(r"^lines_flushed (\d+)(?: fences (\d+))?", line)  # our drivers
        if mm:
            counts[cur] = (int(mm.group(1)), None if mm.group(2) is None else int(mm.group(2)))
            continue
        mm = re.match(r"^ok (\d+) of (\d+)", line)
        if mm and mm.group(1) != mm.group(2):
            print(f"warning: original's {cur}: only {mm.group(1)} of {mm.group(2)} operations succeeded",
                  file=sys.stderr)
    fill = re.search(r"^leaf fill ([0-9.]+)", out, re.M)
    return res, counts, (float(fill.group(1)) if fill else None), cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", choices=sorted(TREES), default="lbtree")
    ap.add_argument("--peer-checkout", required=True, help="local checkout of the original")
    ap.add_argument("--peer-build", help="build dir of the original (default /tmp/pmindex-peers/TREE)")
    ap.add_argument("--no-build", action="store_true", help="use the original's existing build")
    ap.add_argument("--pmbench", default=None, help="pmbench binary (default: build/release/bench/pmbench)")
    ap.add_argument("--index", help="pmbench index (default: the tree's own: lbtree, fptree, fastfair, tlbtree, pactree)")
    ap.add_argument("--index-options", help="pmbench --opt for the index (default: lbtree node=256, fptree node=1024)")
    ap.add_argument("--keys", type=int, default=1000000, help="keys loaded before the phases")
    ap.add_argument("--ops", type=int, default=100000, help="operations per phase")
    ap.add_argument("--fill", type=float, default=0.7, help="bulk-load fill (lbtree and pmbench; fptree and "
                    "fastfair load by inserts)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scan-len", type=int, default=100, help="pairs per scan (originals whose driver scans: roart, pactree)")
    ap.add_argument("--cpu", default="1", help="taskset -c CPU for every run")
    ap.add_argument("--pm-dir", default="/dev/shm", help="PM files of both sides (a huge=always tmpfs "
                    "or hugetlbfs mount for 2 MiB pages)")
    ap.add_argument("--work-dir", help="key files (default: a temp dir, removed at exit)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--no-count", action="store_true", help="skip the original's counting run")
    ap.add_argument("--pmbench-args", default="", help="extra pmbench arguments (e.g. '--no-check')")
    ap.add_argument("--json", help="write the medians and raw samples here")
    args = ap.parse_args()

    if args.keys < 1 or args.ops < 1 or args.repeat < 1:
        die("--keys, --ops and --repeat must be >= 1")
    if not 0 < args.fill <= 1:
        die("--fill must be in (0, 1]")
    args.pmbench = os.path.abspath(args.pmbench or os.path.join(ROOT, "build/release/bench/pmbench"))
    if not os.access(args.pmbench, os.X_OK):
        die(f"no pmbench at {args.pmbench} (build it, or pass --pmbench)")
    if shutil.which("taskset") is None:
        die("taskset (util-linux) is missing")
    if not os.path.isdir(args.pm_dir):
        die(f"--pm-dir {args.pm_dir} is not a directory")
    index, default_opts = TREES[args.tree]
    index = args.index or index
    opts = args.index_options if args.index_options is not None else (default_opts if not args.index else "")
    build = args.peer_build or os.path.join(os.environ.get("PMINDEX_PEERS_BUILD", "/tmp/pmindex-peers"), args.tree)
    if not args.no_build:
        # The originals' build needs PMDK, TBB, ... (installs what is missing;
        # nothing when all is there).
        subprocess.run([os.path.join(HERE, "deps.sh")], check=True)
        subprocess.run([os.path.join(HERE, f"{args.tree}.sh"), args.peer_checkout, build], check=True)
    binary = os.path.join(build, args.tree)
    if not os.access(binary, os.X_OK):
        die(f"no build of {args.tree} at {binary}")

    # Every run's PM files: the original's (removed after each run, crashed or
    # not, by run_original) and pmbench's pool directory; both removed again
    # when compare.py ends, whatever ends it (an error of pmbench, Ctrl-C).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` runs
    pm_file = os.path.join(args.pm_dir, f"pmindex-peer-{args.tree}-{os.getpid()}.pm")
    pool_dir = os.path.join(args.pm_dir, f"pmindex-peer-pmbench-{os.getpid()}")
    tmp = None
    work = args.work_dir
    if not work:
        tmp = tempfile.mkdtemp(prefix="pmindex-peers-keys-")
        work = tmp
    os.makedirs(work, exist_ok=True)
    work = os.path.abspath(work)
    try:
        files = make_keys(args, work)
        env = dict(os.environ, PMEM_IS_PMEM_FORCE="1")
        pin = ["taskset", "-c", args.cpu]
        m = args.ops
        by_inserts = args.tree in LOAD_BY_INSERTS
        scans = args.tree in SCANS
        phases = PHASES[:1] + (["scan"] if scans else []) + PHASES[1:]
        per_phase = {p: (scan_count(args) if p == "scan" else m) for p in phases}
        scan_wl = f"scan:{scan_count(args)}," if scans else ""
        scan_keys = f",scan={files['lookup']}" if scans else ""
        if by_inserts:
            # The insert phases take the "all" file in order: the N load keys,
            # then the M fresh ones (make_keys splits it so).
            ours_cmd = [args.pmbench, "--index", index, "--keys", "0",
                        "--workload", f"insert:{args.keys},lookup:{m},{scan_wl}insert:{m},delete:{m}",
                        "--op-keys", f"insert={files['all']},lookup={files['lookup']},delete={files['delete']}"
                        + scan_keys] + (["--scan-len", str(args.scan_len)] if scans else [])
        else:
            ours_cmd = [args.pmbench, "--index", index, "--keys-file", files["load"], "--keys", str(args.keys),
                        "--fill", str(args.fill), "--workload", f"lookup:{m},insert:{m},delete:{m}",
                        "--op-keys", f"lookup={files['lookup']},insert={files['insert']},delete={files['delete']}"]
        ours_cmd += ["--repeat", "1", "--pool", pool_dir] + (["--opt", opts] if opts else []) + args.pmbench_args.split()
        table = (["load"] if by_inserts else []) + phases
        peer = {p: [] for p in phases + ["load"]}
        ours = {p: [] for p in table}
        ours_counts = {p: [] for p in table}
        # CPU time per op (our drivers: the process's; pmbench: 1 / ops_per_cpu_s of
        # its worker): on a CPU shared with other work, wall time counts the others'
        # slices, CPU time does not.
        peer_cpu = {p: [] for p in phases + ["load"]}
        ours_cpu = {p: [] for p in table}
        fills = []
        for r in range(1, args.repeat + 1):
            out = run_original(pin + peer_cmd(args, files, binary, pm_file), env,
                               f"original {args.tree}", pm_file)
            if out is None:
                die(f"the original {args.tree} crashed {ORIGINAL_TRIES} times in a row")
            res, _, fill, cpu = parse_peer(out)
            if fill is not None:
                fills.append(fill)
            for p in phases + ["load"]:
                if p in res:
                    peer[p].append(res[p] / (args.keys if p == "load" else per_phase[p]))
                if p in cpu:
                    peer_cpu[p].append(cpu[p] / (args.keys if p == "load" else per_phase[p]))
            missing = [p for p in phases if p not in res]
            if missing:
                die(f"no time for {missing} in the original's output:\n{out[-2000:]}")
            js = os.path.join(work, f"pmbench-r{r}.json")
            run(pin + ours_cmd + ["--json", js], env=env, what="pmbench")
            runs = sorted(json.load(open(js))["runs"], key=lambda x: x["phase_no"])
            runs = dict(zip(table, runs))
            for p in table:
                x = runs[p]
                ours[p].append(1e9 / x["throughput_ops_s"])
                ours_cpu[p].append(1e9 / x["ops_per_cpu_s"])
                ours_counts[p].append((x["per_op"]["lines_flushed"], x["per_op"]["fences"]))
            print(f"repeat {r}: original " + " ".join(f"{p} {peer[p][-1]:.0f}" for p in table) +
                  " | pmindex " + " ".join(f"{p} {ours[p][-1]:.0f}" for p in table) + " ns/op" +
                  (" (cpu: original " + " ".join(f"{p} {peer_cpu[p][-1]:.0f}" for p in table) +
                   " | pmindex " + " ".join(f"{p} {ours_cpu[p][-1]:.0f}" for p in table) + ")"
                   if all(peer_cpu[p] for p in table) else ""), flush=True)
        shutil.rmtree(pool_dir, ignore_errors=True)

        peer_counts = {}
        # A counting build (<binary>-count: the original's own flush and fence
        # helpers count), the libpmem counting shim (fptree: the timed binary
        # itself, which persists only through PMDK), or both (roart, pactree:
        # their own write-backs plus libpmemobj's).
        count_bin, count_env = binary + "-count", env
        preload = os.path.join(build, "libpmemcount.so")
        if os.access(preload, os.R_OK):
            count_env = dict(env, LD_PRELOAD=preload)
            if not os.access(count_bin, os.X_OK):
                count_bin = binary
        if not args.no_count and os.access(count_bin, os.X_OK):
            out = run_original(peer_cmd(args, files, count_bin, pm_file), count_env,
                               f"original {args.tree} (counting)", pm_file)
            if out is None:
                print(f"warning: no counts for the original: its counting run crashed "
                      f"{ORIGINAL_TRIES} times", file=sys.stderr)
            _, counts, _, _ = parse_peer(out or "")
            for p, (lines, fences) in counts.items():
                per = args.keys if p == "load" else per_phase.get(p, m)
                peer_counts[p] = (lines / per, None if fences is None else fences / per)

        def fmt_counts(c):
            if c is None:
                return "-"
            lines, fences = c
            return f"{lines:.2f} / " + ("-" if fences is None else f"{fences:.2f}")

        print()
        print(f"{args.tree} (original, {binary}) vs pmindex {index}"
              f"{' ' + opts if opts else ''}: {args.keys} keys" +
              (" (pmindex and original: built by inserts" if by_inserts else f" (pmindex fill {args.fill}") +
              ("" if by_inserts else f", original: bulkload at fill {args.fill}" if args.tree == "lbtree" else
               ", original: loaded by inserts" + (f", leaf fill {statistics.median(fills):.3f}" if fills else "")) +
              f"), {m} ops per phase" + (f" ({scan_count(args)} scans of {args.scan_len})" if scans else "") +
              f", median of {args.repeat}, CPU {args.cpu}, PM in {args.pm_dir}")
        hdr = (f"{'phase':8} {'original ns/op':>15} {'(min-max)':>13} {'pmindex ns/op':>14} {'(min-max)':>13} "
               f"{'orig/pmindex':>12}  {'pmindex lines/fences':>20}  {'original lines/fences':>21}")
        print(hdr)
        summary = {"tree": args.tree, "index": index, "options": opts, "keys": args.keys, "ops": m,
                   "fill": args.fill, "repeat": args.repeat, "pm_dir": args.pm_dir,
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "command": "scripts/peers/compare.py " + " ".join(sys.argv[1:]),
                   "scans": scan_count(args) if scans else 0, "scan_len": args.scan_len if scans else 0,
                   "phases": {}}
        for p in table:
            a, b = peer[p], ours[p]
            ma, mb = statistics.median(a), statistics.median(b)
            oc = tuple(statistics.median(c[i] for c in ours_counts[p]) for i in range(2))
            print(f"{p:8} {ma:15.0f} {f'({min(a):.0f}-{max(a):.0f})':>13} {mb:14.0f} "
                  f"{f'({min(b):.0f}-{max(b):.0f})':>13} {ma / mb:12.2f}  {fmt_counts(oc):>20}  "
                  f"{fmt_counts(peer_counts.get(p)):>21}")
            summary["phases"][p] = {"original_ns": a, "pmindex_ns": b, "original_median": ma,
                                    "pmindex_median": mb, "ratio": ma / mb, "pmindex_lines_fences": oc,
                                    "original_lines_fences": peer_counts.get(p)}
        if all(peer_cpu[p] for p in table):
            print(f"CPU time per op (the original's process, background threads included; pmbench's worker):")
            print(f"{'phase':8} {'original cpu ns':>15} {'(min-max)':>13} {'pmindex cpu ns':>14} {'(min-max)':>13} "
                  f"{'orig/pmindex':>12}")
            for p in table:
                a, b = peer_cpu[p], ours_cpu[p]
                ma, mb = statistics.median(a), statistics.median(b)
                print(f"{p:8} {ma:15.0f} {f'({min(a):.0f}-{max(a):.0f})':>13} {mb:14.0f} "
                      f"{f'({min(b):.0f}-{max(b):.0f})':>13} {ma / mb:12.2f}")
                summary["phases"][p].update({"original_cpu_ns": a, "pmindex_cpu_ns": b, "cpu_ratio": ma / mb})
        if peer["load"] and not by_inserts:
            print(f"(original's load by inserts: {statistics.median(peer['load']):.0f} ns per key)")
        if args.json:
            json.dump(summary, open(args.json, "w"), indent=1)
    finally:
        remove_pm(pm_file)
        shutil.rmtree(pool_dir, ignore_errors=True)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
