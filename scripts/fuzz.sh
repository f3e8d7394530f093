#!/usr/bin/env bash
# Coverage-guided fuzzing of every stream decoder, the framing decoders and every request
# builder (fuzz/, cargo-fuzz on libFuzzer), seeded from the project's fixtures.
#
#   scripts/fuzz.sh                      every target for 180 s each, one after the other
#   scripts/fuzz.sh 60 decode_ollama_chat request     the named targets, 60 s each
#   scripts/fuzz.sh list                 the targets
#
# Run by hand: it needs the nightly toolchain and cargo-fuzz (`rustup toolchain install
# nightly`, `cargo install cargo-fuzz`), which a fresh CI machine may lack, so .ci/run never
# calls it. One target runs at a time (one libFuzzer job). The corpus grows in fuzz/corpus/
# (seeds are copied in again each run), findings land in fuzz/artifacts/<target>/ and each
# run's output in fuzz/artifacts/<target>.log; the last line per target sums it up.
# Reproduce a finding: cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FIXTURES=$ROOT/conformance/fixtures
DIALECTS=(anthropic_messages openai_completions openai_responses google_gemini ollama_chat)
TARGETS=()
for d in "${DIALECTS[@]}"; do TARGETS+=("decode_$d"); done
TARGETS+=(framing request)

if [[ ${1:-} == list ]]; then
  printf '%s\n' "${TARGETS[@]}"
  exit 0
fi
SECONDS_EACH=${1:-180}
shift || true
[[ $SECONDS_EACH =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh [seconds per target] [target ...]" >&2; exit 2; }
if (($# > 0)); then TARGETS=("$@"); fi

rustup toolchain list | grep -q '^nightly' || { echo "fuzz.sh needs nightly: rustup toolchain install nightly" >&2; exit 2; }
cargo +nightly fuzz --version >/dev/null 2>&1 || { echo "fuzz.sh needs cargo-fuzz: cargo install cargo-fuzz" >&2; exit 2; }

# Copies each seed file under its content hash, so seeding again adds nothing twice.
seed() {
  local dir=$1
  shift
  mkdir -p "$dir"
  for file in "$@"; do
    [[ -f $file ]] && cp "$file" "$dir/seed-$(sha1sum "$file" | cut -c1-16)"
  done
  return 0
}

cd "$ROOT/fuzz"
mkdir -p artifacts
for target in "${TARGETS[@]}"; do
  case $target in
    decode_*) seed "corpus/$target" "$FIXTURES/${target#decode_}"/*/body.* ;;
    framing) seed "corpus/$target" "$FIXTURES"/*/*/body.* ;;
    request) seed "corpus/$target" "$FIXTURES"/*/requests/*/input.json ;;
    *) echo "unknown target $target (scripts/fuzz.sh list)" >&2; exit 2 ;;
  esac
  mkdir -p "artifacts/$target"
  echo "== $target: ${SECONDS_EACH}s, $(ls "corpus/$target" | wc -l) inputs in its corpus"
  status=0
  # Fixture bodies reach 40 KB: -max_len keeps them whole. A deep recursion shows as a
  # crash here too (the main thread's 8 MiB stack); the unit tests use 256 KiB stacks.
  cargo +nightly fuzz run "$target" "corpus/$target" -- \
    -max_total_time="$SECONDS_EACH" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="artifacts/$target/" -print_final_stats=1 >"artifacts/$target.log" 2>&1 || status=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "artifacts/$target.log" | grep -o '[0-9]*$' || echo '?')
  found=$(find "artifacts/$target" -type f | wc -l)
  echo "   $target: $runs executions, corpus $(ls "corpus/$target" | wc -l), findings $found, exit $status"
done
