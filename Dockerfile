# daqiri-gateway and daqiri-operator in one image.
#   docker build -t daqiri-gateway:0.1.0 .
#   docker build --build-arg CARGO_FEATURES=dpdk,af_xdp,rdma -t daqiri-gateway:0.1.0-bypass .
# The test suite builds this same recipe with buildah (tests/k8s/image.sh), where no registry
# serves the base images: it passes a runtime base made from Debian's own packages
# (RUNTIME_IMAGE) and binaries its own cargo built with the same toolchain for the same
# Debian release (BINARIES=prebuilt), so the runtime stage is the one users get.
ARG BUILDER_IMAGE=rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG BINARIES=builder

# --- builder: Rust, plus the DPDK and rdma-core headers the hardware backends build against,
# and clang with libbpf's headers for the AF_XDP backend's XDP program.
FROM ${BUILDER_IMAGE} AS builder
# Debian bookworm's packages are versioned by the release; pinning them would break on every point release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends pkg-config libdpdk-dev libibverbs-dev librdmacm-dev clang libbpf-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock rustfmt.toml ./
COPY gateway gateway
COPY operator operator
COPY configs configs
ARG CARGO_FEATURES=""
RUN cargo build --release --locked --bin daqiri-gateway --bin daqiri-operator --features "${CARGO_FEATURES}" \
    && install -D -m 0755 --strip target/release/daqiri-gateway target/release/daqiri-operator -t /out/bin

# --- prebuilt: the same two binaries, built outside (BINARIES=prebuilt; never by default).
FROM scratch AS prebuilt
COPY target/image/prebuilt/ /out/bin/

# --- the binaries the runtime takes: the builder's, or the prebuilt ones.
# hadolint ignore=DL3006
FROM ${BINARIES} AS binaries

# --- runtime: the binaries and the shared libraries they load, nothing else.
# hadolint ignore=DL3006
FROM ${RUNTIME_IMAGE}
ARG CARGO_FEATURES=""
# The shared libraries the built backends load, and no more: DPDK's (with the mlx5,
# af_packet and af_xdp PMDs) for dpdk, rdma-core's for rdma; a sockets-only image has none.
# hadolint ignore=DL3008,SC2086
RUN packages="ca-certificates" \
    && case ",${CARGO_FEATURES}," in *,dpdk,*) packages="$packages librte-eal23 librte-ethdev23 librte-mbuf23 \
       librte-mempool23 librte-net-mlx5-23 librte-net-af-packet23 librte-net-af-xdp23" ;; esac \
    && case ",${CARGO_FEATURES}," in *,rdma,*) packages="$packages libibverbs1 ibverbs-providers librdmacm1" ;; esac \
    && apt-get update \
    && apt-get install -y --no-install-recommends $packages \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 65532 daqiri \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin daqiri
COPY --from=binaries /out/bin/ /usr/local/bin/
COPY configs /etc/daqiri/examples
LABEL org.opencontainers.image.title="daqiri-gateway" \
      org.opencontainers.image.description="Packet acquisition gateway and its Kubernetes operator" \
      org.opencontainers.image.source="https://github.com/daqiri-gateway/daqiri-gateway" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
# Socket backend and the operator run unprivileged; DPDK/RDMA/AF_XDP pods run as root (see the chart).
USER 65532:65532
EXPOSE 9464 8080
ENTRYPOINT ["daqiri-gateway"]
CMD ["run", "--admin-addr", "0.0.0.0:9464"]
