#!/usr/bin/env bash
# The appliance's image, built here from the Dockerfile users build with
# `docker build`, by buildah (no daemon). No registry serves the Dockerfile's
# base images here, so the recipe takes two build arguments:
#   RUNTIME_IMAGE  the runtime base: debian:bookworm-slim's equivalent, made
#                  by mmdebstrap from Debian's own packages (minbase, no docs)
#   BINARIES       prebuilt: daqiri-gateway and daqiri-operator built by
#                  cargo here, with the toolchain and Debian release the
#                  builder stage has, instead of that stage
# and everything else in the image is the Dockerfile's own runtime stage.
#
#   image.sh build VARIANT     builds the variant's image; prints its name
#   image.sh artifacts VARIANT...  only builds what the variants' images take
#                              from here (release binaries, wheel, DPDK), so
#                              a later build finds them kept
#   image.sh wheel             the consumer image's daqiri_gateway wheel (built
#                              unless kept); prints its path (tests/python/run.sh
#                              tests the wheel the image ships)
#   image.sh archive VARIANT FILE   the image as an OCI archive (for containerd)
#   image.sh tag VARIANT       prints the image's name without building it
# VARIANT: socket (sockets only) or bypass (dpdk,af_xdp,rdma), both
# localhost/daqiri-gateway; or consumer, the Python consumer image
# (gateway/python/Dockerfile: its base is Debian's Python 3.11, its wheel
# built here by maturin, WHEELS=prebuilt).
#
# Cached like the control plane: the base image by the hash of its recipe,
# the release binaries by the hash of the sources they are built from, both
# under the user cache ($XDG_CACHE_HOME or ~/.cache, daqiri-gateway/), so a
# clean clone of a commit built before rebuilds nothing. Needs root
# (buildah's storage, chroot).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/daqiri-gateway
log() { echo "image: $*" >&2; }
version=$(awk -F'"' '/^version = / {print $2; exit}' "$root/Cargo.toml")

features() {
    case $1 in
    socket) echo "" ;;
    bypass) echo "dpdk,af_xdp,rdma" ;;
    consumer) echo "python" ;;
    *) log "unknown variant $1 (socket, bypass or consumer)" && exit 2 ;;
    esac
}

tag() {
    case $1 in
    socket) echo "localhost/daqiri-gateway:$version" ;;
    bypass) echo "localhost/daqiri-gateway:$version-bypass" ;;
    consumer) echo "localhost/daqiri-consumer-python:$version" ;;
    *) log "unknown variant $1 (socket, bypass or consumer)" && exit 2 ;;
    esac
}

# debian:bookworm-slim's equivalent: minbase with /usr merged as Debian's
# images are (without the hook, usrmerge and a whole perl come along: 127 MB
# instead of 78), leaving out the documentation the slim image leaves out.
# With packages ($1, comma-separated), python:3.11-slim-bookworm's equivalent
# from Debian's python3 and python3-pip.
runtime_base() {
    local recipe key name tarball family=bookworm-slim
    [[ -n ${1:-} ]] && family=bookworm-${1//,/-}
    recipe="mmdebstrap --variant=minbase${1:+ --include=$1} --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --format=tar"
    recipe+=" --dpkgopt=path-exclude=/usr/share/man/*"
    recipe+=" --dpkgopt=path-exclude=/usr/share/doc/* --dpkgopt=path-include=/usr/share/doc/*/copyright"
    recipe+=" --dpkgopt=path-exclude=/usr/share/locale/* --dpkgopt=path-exclude=/usr/share/info/*"
    # As Debian's images: apt keeps no package cache, so an image's apt-get
    # install layer holds the packages and not 80 MB of their .debs and indexes.
    recipe+=" --customize-hook=$root/tests/k8s/image-apt-clean.sh bookworm"
    # Keyed by what the recipe does, not where this clone lies.
    key=$( (echo "${recipe//$root/}" && cat "$root/tests/k8s/image-apt-clean.sh") | sha256sum | cut -c1-16)
    name=localhost/daqiri-runtime-base:$family-$key
    if ! buildah inspect --type image "$name" >/dev/null 2>&1; then
        tarball=$cache/images/runtime-base-$family-$key.tar
        if [[ ! -s $tarball ]]; then
            log "making the runtime base with mmdebstrap (once; about a minute)"
            mkdir -p "$cache/images"
            # The bases an earlier recipe made go: only this one is used now.
            rm -f "$cache/images/runtime-base-$family-"*.tar
            buildah images --format '{{.Name}}:{{.Tag}}' | grep "^localhost/daqiri-runtime-base:$family-" |
                xargs -r buildah rmi >/dev/null 2>&1 || true
            # shellcheck disable=SC2086 # the recipe is words
            $recipe "$tarball.partial" >&2
            mv "$tarball.partial" "$tarball"
        fi
        local ctr
        ctr=$(buildah from scratch)
        buildah add --quiet "$ctr" "$tarball" / >/dev/null
        buildah config --cmd /bin/bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
        buildah commit --quiet --rm "$ctr" "$name" >/dev/null
    fi
    echo "$name"
}

# The bypass image's DPDK: the release DAQIRI builds on (the reference
# build's checked tarball), built by image/build-dpdk.sh as the Dockerfile's
# dpdk-source stage builds it, for /opt/dpdk. Cached by the script and the
# tarball; sets `dpdk_stage` to the folder holding opt/dpdk (not printed:
# see kept_artifacts).
image_dpdk() {
    local tarball key started=$SECONDS
    tarball=$("$root/tests/reference/build.sh" tarball dpdk)
    key=$(cat "$root/image/build-dpdk.sh" "$tarball" | sha256sum | cut -c1-16)
    dpdk_stage=$cache/image-dpdk/$key
    if [[ ! -d $dpdk_stage ]]; then
        local missing=() package
        for package in meson ninja-build python3-pyelftools libnuma-dev libibverbs-dev libbpf-dev libxdp-dev; do
            dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
        done
        ((${#missing[@]} == 0)) || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
        log "building the bypass image's DPDK ($(basename "$tarball"); once, minutes)"
        rm -rf "$cache/image-dpdk" && mkdir -p "$cache/image-dpdk"
        PATH=/usr/bin:$PATH "$root/image/build-dpdk.sh" "$tarball" /opt/dpdk "$dpdk_stage.partial"
        mv "$dpdk_stage.partial" "$dpdk_stage"
        log "DPDK built in $((SECONDS - started)) s"
    fi
}

# The environment a build against the image's DPDK runs in: its pkg-config
# files, their paths under the stage, and the linker finding its libraries'
# siblings there.
dpdk_build_env() {
    echo PKG_CONFIG_PATH="$dpdk_stage/opt/dpdk/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dpdk_stage" \
        LD_LIBRARY_PATH="$dpdk_stage/opt/dpdk/lib"
}

# The folders of the workspace members PACKAGES compile: them and, by
# cargo's resolve with every feature on (the bypass variant's DPDK bindings
# among them), the members they depend on to build. A change to another
# member (libdaqiri, the in-process Python module) rebuilds no image.
member_dirs() { # package...
    (cd "$root" && cargo metadata --format-version 1 --all-features --locked) | python3 -c '
import json, sys
meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
packages = {p["id"]: p for p in meta["packages"]}
deps = {n["id"]: n["deps"] for n in meta["resolve"]["nodes"]}
todo = [i for i in members if packages[i]["name"] in sys.argv[1:]]
assert len(todo) == len(sys.argv) - 1, "a package named is not a workspace member"
seen = set()
while todo:
    member = todo.pop()
    if member not in seen:
        seen.add(member)
        todo += [d["pkg"] for d in deps[member]
                 if d["pkg"] in members and any(k["kind"] in (None, "build") for k in d["dep_kinds"])]
root = meta["workspace_root"] + "/"
print("\n".join(sorted(packages[m]["manifest_path"][len(root):].rsplit("/", 1)[0] for m in seen)))
' "$@"
}

# What a variant's artifacts are made from: the toolchain, the features, the
# lock file and every source file of the members they compile (not their
# tests, benches or docs), by content, so a clean clone of the same commit
# finds them.
source_key() {
    local variant=$1 packages=(daqiri-gateway daqiri-operator) dirs
    [[ $variant == consumer ]] && packages=(daqiri-gateway-python)
    dirs=$(member_dirs "${packages[@]}")
    {
        rustc -vV
        echo "features: $(features "$variant")"
        [[ $variant == bypass ]] && echo "dpdk: $dpdk_stage"
        cd "$root"
        # shellcheck disable=SC2086 # one folder per line, no spaces
        git ls-files -co --exclude-standard -- Cargo.toml Cargo.lock configs/default.yaml $dirs |
            grep -Ev '/(tests|benches|examples)/|\.md$' | sort | xargs -d '\n' sha256sum
    } | sha256sum | cut -c1-16
}

# Runs BUILD ARGS... OUT (a release build writing the variant's artifacts into
# OUT) unless they were built before from these sources; sets `kept` to where
# they are (not printed: a failing build inside $(...) would not stop the script).
# A release build takes minutes here and cargo cannot reuse one made in
# another clone (its fingerprints hold paths and mtimes), so they are kept
# by source_key, the newest of each variant only.
kept_artifacts() {
    local variant=$1 key started=$SECONDS
    shift
    key=$(source_key "$variant")
    kept=$cache/image-binaries/$variant-$key
    if [[ ! -d $kept ]]; then
        log "building the $variant image's artifacts (release)"
        rm -rf "$cache/image-binaries/$variant-"*
        mkdir -p "$kept.partial"
        "$@" "$kept.partial"
        mv "$kept.partial" "$kept"
        log "built in $((SECONDS - started)) s"
    else
        log "the $variant image's artifacts: built before from these sources ($key)"
    fi
}

# daqiri-gateway and daqiri-operator with the variant's features, stripped as
# the builder stage installs them (a panic's message keeps its file and line).
build_binaries() {
    local variant=$1 out=$2 target=$cache/image-target dpdk_env=()
    # shellcheck disable=SC2207 # words without spaces
    [[ $variant == bypass ]] && dpdk_env=($(dpdk_build_env))
    (cd "$root" && env "${dpdk_env[@]}" CARGO_TARGET_DIR=$target cargo build --release --locked --quiet \
        --bin daqiri-gateway --bin daqiri-operator --features "$(features "$variant")")
    install -m 0755 --strip "$target/release/daqiri-gateway" "$target/release/daqiri-operator" -t "$out"
}

# The daqiri_gateway wheel, by the maturin the Dockerfile's builder pins.
build_wheel() {
    local out=$1 venv=$cache/maturin-venv maturin
    maturin=$(grep -o 'maturin==[0-9.]*' "$root/gateway/python/Dockerfile")
    [[ -x $venv/bin/maturin ]] && [[ $("$venv/bin/maturin" --version) == "maturin ${maturin#*==}" ]] ||
        { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet --disable-pip-version-check "$maturin"; }
    (cd "$root" && CARGO_TARGET_DIR=$cache/image-target "$venv/bin/maturin" build --quiet --release --locked \
        --manifest-path gateway/python/Cargo.toml --out "$out" >&2)
}

# Builds the variant's artifacts unless kept; sets `kept` (and, for bypass,
# `dpdk_stage`) to where they are.
artifacts() {
    local variant=$1
    if [[ $variant == consumer ]]; then
        kept_artifacts consumer build_wheel
    else
        [[ $variant == bypass ]] && image_dpdk
        kept_artifacts "$variant" build_binaries "$variant"
    fi
}

# The variant's artifacts where its Dockerfile's prebuilt stage takes them.
prebuilt() {
    local variant=$1 kept
    artifacts "$variant"
    if [[ $variant == consumer ]]; then
        rm -rf "$root/target/image/wheels"
        install -D -m 0644 "$kept"/*.whl -t "$root/target/image/wheels"
    else
        rm -rf "$root/target/image/prebuilt" "$root/target/image/dpdk"
        install -D -m 0755 "$kept/daqiri-gateway" "$kept/daqiri-operator" -t "$root/target/image/prebuilt"
        if [[ $variant == bypass ]]; then
            # The runtime's DPDK: its libraries and drivers, not its headers.
            mkdir -p "$root/target/image/dpdk/opt/dpdk"
            cp -a "$dpdk_stage/opt/dpdk/lib" "$root/target/image/dpdk/opt/dpdk/"
            rm -rf "$root/target/image/dpdk/opt/dpdk/lib/pkgconfig"
        fi
    fi
}

build() {
    local variant=$1 base name started
    # Earlier builds' untagged images (a replaced tag, old layers) go first,
    # so repeated runs do not fill the disk; the runtime base stays tagged.
    buildah rmi --prune >/dev/null 2>&1 || true
    name=$(tag "$variant")
    prebuilt "$variant"
    if [[ $variant == consumer ]]; then
        base=$(runtime_base python3,python3-pip)
        # pip reaches PyPI through whatever this host trusts: its CA bundle,
        # mounted for the build's RUN steps only.
        set -- --build-arg WHEELS=prebuilt -f "$root/gateway/python/Dockerfile" \
            --volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro
    else
        base=$(runtime_base)
        set -- --build-arg BINARIES=prebuilt --build-arg CARGO_FEATURES="$(features "$variant")" -f "$root/Dockerfile"
        # Named even where it is the Dockerfile's default: buildah builds only
        # the stages it sees used, and reads a FROM's argument without defaults.
        local dpdk=dpdk-none
        [[ $variant == bypass ]] && dpdk=dpdk-prebuilt
        set -- "$@" --build-arg DPDK=$dpdk
    fi
    started=$SECONDS
    # chroot isolation and the host's network for the runtime stage's apt-get
    # or pip; --layers keeps that stage's package layer between builds.
    buildah bud --quiet --isolation chroot --network host --layers \
        --build-arg RUNTIME_IMAGE="$base" "$@" -t "$name" "$root" >/dev/null
    rm -rf "$root/target/image/prebuilt" "$root/target/image/wheels" "$root/target/image/dpdk"
    log "$name built in $((SECONDS - started)) s"
    echo "$name"
}

case ${1:-} in
build) build "${2:?variant}" ;;
artifacts)
    shift
    for variant in "${@:?variant}"; do artifacts "$variant"; done
    ;;
archive)
    name=$(tag "${2:?variant}")
    rm -f "${3:?file}"
    buildah push --quiet "$name" "oci-archive:$3:$name" >/dev/null
    ;;
wheel)
    artifacts consumer
    wheels=("$kept"/*.whl)
    echo "${wheels[0]}"
    ;;
tag) tag "${2:?variant}" ;;
*)
    echo "usage: $0 build VARIANT | artifacts VARIANT... | wheel | archive VARIANT FILE | tag VARIANT" >&2
    exit 2
    ;;
esac
