#!/usr/bin/env bash
# Fuzzes the gateway's input parsers with AFL++ (cargo-afl, stable Rust):
#   config       the config parser and validator, and the serialise round trip
#   steering     the receive path's frame parser and flow steering
#   pcap_append  the capture writer's reader of existing pcap files
#   admin_api    HTTP requests through the admin API's router
#
#   tests/fuzz.sh [--seconds N] [--execs N] [--jobs N] [--fresh] [TARGET...]
#
# Each target runs until N seconds (default 60) or N executions pass, on
# --jobs cores at once (default all). A first run starts from the corpus
# fuzz/seeds.py writes; later runs resume what earlier ones kept
# (target/fuzz/<target>/out), and their counts add up; --fresh starts over.
# Prints one line per target with its
# executions, crashes and hangs; exits 1 when any target crashed or hung,
# naming the inputs (replay one: fuzz/target/release/TARGET < FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
execs=""
jobs=$(nproc)
fresh=0
targets=()
while (($#)); do
    case $1 in
        --seconds) seconds=$2; shift 2 ;;
        --execs) execs=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --fresh) fresh=1; shift ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
all=(config steering pcap_append admin_api)
((${#targets[@]})) || targets=("${all[@]}")
for t in "${targets[@]}"; do
    [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: no target $t (targets: ${all[*]})" >&2; exit 2; }
done

if ! cargo afl --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-afl (builds AFL++)" >&2
    cargo install --locked cargo-afl@0.18.2 >&2
fi
echo "fuzz: building the targets with AFL instrumentation" >&2
(cd fuzz && cargo afl build --release --locked --quiet)

runs=target/fuzz
seeds=$runs/seeds
rm -rf "$seeds"
python3 fuzz/seeds.py "$seeds"

# Non-interactive, and tolerant of hosts AFL would tune first (CPU governor,
# core dumps piped to a handler): it fuzzes, slower, instead of refusing.
export AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1

fuzz_one() {
    local target=$1 dir=$runs/$1
    ((fresh)) && rm -rf "$dir"
    mkdir -p "$dir"
    # A resumed run keeps its queue; a first run starts from the seeds.
    local input=$seeds/$target
    [[ -d $dir/out/default/queue ]] && input=-
    local limit=(-V "$seconds")
    [[ -n $execs ]] && limit+=(-E "$execs")
    # -t: an input running over 5 s is a hang (a config PUT restarts an engine: milliseconds).
    cargo afl fuzz -i "$input" -o "$dir/out" "${limit[@]}" -t 5000 -- "fuzz/target/release/$target" \
        >"$dir/afl.log" 2>&1 || true
}

running=0
for t in "${targets[@]}"; do
    fuzz_one "$t" &
    running=$((running + 1))
    if ((running >= jobs)); then
        wait -n
        running=$((running - 1))
    fi
done
wait

stat() { sed -n "s/^$1 *: *//p" "$2"; }
failed=0
printf '%-12s %14s %10s %8s %8s %6s %10s\n' target executions exec/s corpus crashes hangs stability
for t in "${targets[@]}"; do
    stats=$runs/$t/out/default/fuzzer_stats
    if [[ ! -f $stats ]]; then
        echo "$t: AFL did not start; its log:" >&2
        tail -20 "$runs/$t/afl.log" >&2
        failed=1
        continue
    fi
    crashes=$(stat saved_crashes "$stats")
    hangs=$(stat saved_hangs "$stats")
    printf '%-12s %14s %10s %8s %8s %6s %10s\n' "$t" "$(stat execs_done "$stats")" \
        "$(stat execs_per_sec "$stats")" "$(stat corpus_count "$stats")" "$crashes" "$hangs" "$(stat stability "$stats")"
    if ((crashes + hangs > 0)); then
        failed=1
        ls -1 "$runs/$t"/out/default/{crashes,hangs}/id:* 2>/dev/null | sed 's/^/  /'
    fi
done
exit "$failed"
