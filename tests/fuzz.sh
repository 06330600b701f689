#!/usr/bin/env bash
# Fuzzes the gateway's input parsers with AFL++ (cargo-afl, stable Rust):
#   config       the config parser and validator, and the serialise round trip
#   steering     the receive path's frame parser and flow steering
#   pcap_append  the capture writer's reader of existing pcap files
#   admin_api    HTTP requests through the admin API's router
#   consumer_socket  a consumer's visits to the consumer socket (tokens,
#                hellos, scribbles over its ring) leave nothing held
#
#   tests/fuzz.sh [--seconds N] [--execs N] [--instances N] [--jobs N] [--fresh] [TARGET...]
#   tests/fuzz.sh --build-only     builds the targets and stops
#
# Each target runs for N seconds (default 60), or until N executions per
# instance, as --instances AFL++ instances sharing one corpus (default 1);
# at most --jobs instances run at once (default: the cores). A first run
# starts from the corpus fuzz/seeds.py writes; later runs resume what
# earlier ones kept (target/fuzz/<target>/out) and their counts add up;
# --fresh starts over. Prints one line per target with its executions,
# crashes and hangs, summed over its instances; exits 1 when a target
# crashed or hung, naming the inputs and replaying each once outside AFL
# (by hand: fuzz/target/release/TARGET < FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
execs=""
jobs=$(nproc)
fresh=0
build_only=0
instances=1
targets=()
while (($#)); do
    case $1 in
        --seconds) seconds=$2; shift 2 ;;
        --execs) execs=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --instances) instances=$2; shift 2 ;;
        --fresh) fresh=1; shift ;;
        --build-only) build_only=1; shift ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
all=(config steering pcap_append admin_api consumer_socket)
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
((build_only)) && exit 0

runs=target/fuzz
seeds=$runs/seeds
rm -rf "$seeds"
python3 fuzz/seeds.py "$seeds"

# Non-interactive, and tolerant of hosts AFL would tune first (CPU governor,
# core dumps piped to a handler): it fuzzes, slower, instead of refusing.
export AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1

# One AFL++ instance: the first of a target is its main (-M), others -S.
fuzz_one() {
    local target=$1 instance=$2 out=$runs/$1/out
    local role=(-M main)
    ((instance > 1)) && role=(-S "s$instance")
    local limit=(-V "$seconds")
    [[ -n $execs ]] && limit+=(-E "$execs")
    # The targets' scratch files (capture folders) stay in the run's folder, which --fresh clears.
    mkdir -p "$runs/$target/tmp"
    # -t: an input running over 5 s is a hang (a config PUT restarts an engine: milliseconds).
    TMPDIR=$PWD/$runs/$target/tmp cargo afl fuzz -i "$seeds/$target" -o "$out" "${role[@]}" "${limit[@]}" -t 5000 \
        -- "fuzz/target/release/$target" >"$runs/$target/afl-$instance.log" 2>&1 || true
}

for t in "${targets[@]}"; do
    ((fresh)) && rm -rf "${runs:?}/$t"
    mkdir -p "$runs/$t"
done
# An existing output directory is resumed, its counts carried on.
export AFL_AUTORESUME=1
running=0
for t in "${targets[@]}"; do
    for i in $(seq 1 "$instances"); do
        fuzz_one "$t" "$i" &
        running=$((running + 1))
        if ((running >= jobs)); then
            wait -n
            running=$((running - 1))
        fi
    done
done
wait

# Names a crashing or hanging input and runs it once more outside AFL, so
# that a log (CI's) says why: the panic's message, or that it passes alone.
replay() {
    local target=$1 input=$2 output rc=0
    echo "  $input"
    output=$(timeout 30 "fuzz/target/release/$target" <"$input" 2>&1) || rc=$?
    if ((rc == 0)); then
        echo "    replayed alone, it passes: it failed under AFL's load or timing"
    else
        echo "    replayed alone, it fails (exit $rc):"
        tail -n 15 <<<"$output" | sed 's/^/    /'
    fi
}

# Sums a fuzzer_stats field over a target's instances.
total() { awk -v k="$1" '$1 == k { n += $3 } END { printf "%d", n }' "$runs/$2"/out/*/fuzzer_stats; }
failed=0
printf '%-12s %9s %14s %10s %8s %8s %6s\n' target instances executions exec/s corpus crashes hangs
for t in "${targets[@]}"; do
    main=$runs/$t/out/main/fuzzer_stats
    if [[ ! -f $main ]]; then
        echo "$t: AFL did not start; its log:" >&2
        tail -20 "$runs/$t/afl-1.log" >&2
        failed=1
        continue
    fi
    crashes=$(total saved_crashes "$t")
    hangs=$(total saved_hangs "$t")
    printf '%-12s %9s %14s %10s %8s %8s %6s\n' "$t" "$(ls -d "$runs/$t"/out/*/ | wc -l)" "$(total execs_done "$t")" \
        "$(total execs_per_sec "$t")" "$(sed -n 's/^corpus_count *: *//p' "$main")" "$crashes" "$hangs"
    if ((crashes + hangs > 0)); then
        failed=1
        for input in "$runs/$t"/out/*/{crashes,hangs}/id:*; do
            [[ -e $input ]] && replay "$t" "$input"
        done
        # What the target said as it panicked under AFL (fuzzing::log_panics).
        if [[ -s $runs/$t/tmp/panics.log ]]; then
            echo "  its panics under AFL (the last; all in $runs/$t/tmp/panics.log):"
            tail -n 5 "$runs/$t/tmp/panics.log" | cut -c1-2000 | sed 's/^/    /'
        fi
    fi
done
exit "$failed"
