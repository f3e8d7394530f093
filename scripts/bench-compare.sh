#!/usr/bin/env bash
# Compares the benchmarks of two commits in one run, as ratios: builds each commit's bench
# binaries (the base in a worktree of its own, with its own target directory), then runs
# the two builds of each bench alternately, ROUNDS times, and prints for every benchmark
# the median of its medians, base and head, and head / base.
#
#   scripts/bench-compare.sh BASE [HEAD] [bench ...]
#
# BASE and HEAD are commits (HEAD defaults to the work tree as it is). Benches are named
# package:bench (default: omni-conformance:decode omni-conformance:agent). Alternating the
# runs spreads the noise of a shared machine over both sides; a ratio within a few per
# cent of 1 is noise. Environment: ROUNDS (default 3), BENCH_DIR (default
# $TMPDIR/omni-bench), BASE_TARGET (the base build's target directory, default in BENCH_DIR).
set -euo pipefail

base=${1:?usage: scripts/bench-compare.sh BASE [HEAD] [package:bench ...]}
head=${2:-}
shift $(( $# >= 2 ? 2 : 1 ))
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(omni-conformance:decode omni-conformance:agent)
rounds=${ROUNDS:-3}
top=$(git rev-parse --show-toplevel)
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/omni-bench}
mkdir -p "$dir"

# Builds the benches of the tree at $2 (a directory) and copies their executables to $1/.
build() {
  local out=$1 tree=$2
  mkdir -p "$out"
  for spec in "${benches[@]}"; do
    local package=${spec%%:*} bench=${spec#*:}
    local exe
    exe=$(cd "$tree" && cargo bench -p "$package" --bench "$bench" --no-run --message-format=json 2>/dev/null \
      | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(m["executable"])' | tail -1)
    [ -n "$exe" ] || { echo "could not build $spec in $tree" >&2; exit 1; }
    cp "$exe" "$out/$package-$bench"
  done
}

worktree() {
  local name=$1 commit=$2
  local path="$dir/tree-$name"
  git -C "$top" worktree remove --force "$path" 2>/dev/null || true
  git -C "$top" worktree add --detach "$path" "$commit" >/dev/null
  echo "$path"
}

base_tree=$(worktree base "$base")
CARGO_TARGET_DIR="${BASE_TARGET:-$dir/target-base}" build "$dir/bin-base" "$base_tree"
if [ -n "$head" ]; then
  head_tree=$(worktree head "$head")
  build "$dir/bin-head" "$head_tree"
else
  build "$dir/bin-head" "$top"
fi

results="$dir/results.tsv"
: >"$results"
for round in $(seq "$rounds"); do
  for spec in "${benches[@]}"; do
    name=${spec//:/-}
    for side in base head; do
      "$dir/bin-$side/$name" --bench 2>/dev/null | python3 -c '
import re, sys
side, bench, round_ = sys.argv[1:4]
units = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}
path = []
for line in sys.stdin:
    if "│" not in line:
        continue
    cells = [c.strip() for c in line.split("│")]
    # A tree node: its indent ("│  " or "   " per level), then "├─ " or "╰─ " (none for
    # the header line of the bench), then its name and, for a leaf, the fastest time.
    # Other lines continue the node above (throughput, allocations).
    m = re.match(r"^((?:│  |   )*)(├─ |╰─ )?(\S+)(.*)$", line)
    if not m or (m.group(2) is None and line[0] in "│ "):
        continue
    depth = len(m.group(1)) // 3 + (1 if m.group(2) else 0)
    path = path[:depth] + [m.group(3)]
    if not cells[-4]:
        continue  # a group: no figures
    median = cells[-4].split()  # columns: fastest (after the name), slowest, median, mean, samples, iters
    if len(median) != 2 or median[1] not in units:
        continue
    name = bench + "/" + "/".join(path)
    print(f"{name}\t{side}\t{round_}\t{float(median[0]) * units[median[1]]}")
' "$side" "$name" "$round" >>"$results"
    done
  done
done

python3 - "$results" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    bench, side, _, seconds = line.rstrip("\n").split("\t")
    runs[bench][side].append(float(seconds))
print(f"{'benchmark':60} {'base':>12} {'head':>12} {'head/base':>10}")
for bench, sides in sorted(runs.items()):
    if "base" not in sides or "head" not in sides:
        continue
    b, h = statistics.median(sides["base"]), statistics.median(sides["head"])
    print(f"{bench:60} {b * 1e6:10.1f}µs {h * 1e6:10.1f}µs {h / b:10.3f}")
EOF
