# daqiri-gateway and daqiri-operator in one image.
#   docker build -t daqiri-gateway:0.1.0 .
#   docker build --build-arg CARGO_FEATURES=dpdk,af_xdp,rdma --build-arg DPDK=dpdk-source -t daqiri-gateway:0.1.0-bypass .
# The test suite builds this same recipe with buildah (tests/k8s/image.sh), where no registry
# serves the base images: it passes a runtime base made from Debian's own packages
# (RUNTIME_IMAGE), binaries its own cargo built with the same toolchain for the same
# Debian release (BINARIES=prebuilt) and, for the bypass image, the DPDK that
# image/build-dpdk.sh built from the same release (DPDK=dpdk-prebuilt), so the runtime stage is
# the one users get.
ARG BUILDER_IMAGE=rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG BINARIES=builder
# DPDK for the dpdk feature, a stage below: dpdk-none (sockets only), dpdk-source (DPDK_VERSION
# built here) or dpdk-prebuilt.
ARG DPDK=dpdk-none
ARG DPDK_VERSION=25.11.2

# --- dpdk-source: DPDK LTS, the release DAQIRI builds on, from its tarball; installed for /opt/dpdk.
FROM ${BUILDER_IMAGE} AS dpdk-source
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends curl ca-certificates xz-utils meson ninja-build python3-pyelftools \
       pkg-config libnuma-dev libibverbs-dev libbpf-dev libxdp-dev \
    && rm -rf /var/lib/apt/lists/*
COPY image/build-dpdk.sh /usr/local/bin/
ARG DPDK_VERSION
RUN curl -fsSL "https://fast.dpdk.org/rel/dpdk-${DPDK_VERSION}.tar.xz" -o /tmp/dpdk.tar.xz \
    && build-dpdk.sh /tmp/dpdk.tar.xz /opt/dpdk /out && rm /tmp/dpdk.tar.xz

# --- dpdk-prebuilt: the same, built outside by image/build-dpdk.sh (DPDK=dpdk-prebuilt; never by default).
FROM scratch AS dpdk-prebuilt
COPY target/image/dpdk/ /out/

# --- dpdk-none: no DPDK (an image without the dpdk feature).
# hadolint ignore=DL3006
FROM ${RUNTIME_IMAGE} AS dpdk-none
RUN mkdir -p /out

# hadolint ignore=DL3006
FROM ${DPDK} AS dpdk

# --- builder: Rust, plus the DPDK stage's build and rdma-core's headers the hardware backends
# build against, and clang with libbpf's headers for the AF_XDP backend's XDP program.
FROM ${BUILDER_IMAGE} AS builder
# Debian bookworm's packages are versioned by the release; pinning them would break on every point release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends pkg-config libnuma-dev libibverbs-dev librdmacm-dev clang libbpf-dev \
       libxdp-dev \
    && rm -rf /var/lib/apt/lists/*
COPY --from=dpdk /out/ /
ENV PKG_CONFIG_PATH=/opt/dpdk/lib/pkgconfig LD_LIBRARY_PATH=/opt/dpdk/lib
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
# The shared libraries the built backends load, and no more: what DPDK's libraries and its
# mlx5, af_packet and af_xdp drivers need (DPDK itself comes from the dpdk stage, under
# /opt/dpdk) for dpdk, rdma-core's for rdma; a sockets-only image has none. image.rs checks
# every library of the binaries and of each DPDK driver is there.
# hadolint ignore=DL3008,SC2086
RUN packages="ca-certificates" \
    && case ",${CARGO_FEATURES}," in *,dpdk,*) packages="$packages libnuma1 libibverbs1 ibverbs-providers \
       libbpf1 libxdp1 libelf1 libfdt1 libbsd0" ;; esac \
    && case ",${CARGO_FEATURES}," in *,rdma,*) packages="$packages libibverbs1 ibverbs-providers librdmacm1" ;; esac \
    && apt-get update \
    && apt-get install -y --no-install-recommends $packages \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 65532 daqiri \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin daqiri
COPY --from=dpdk /out/ /
# DPDK's libraries where the loader finds them (nothing there in an image without it).
RUN if [ -d /opt/dpdk/lib ]; then echo /opt/dpdk/lib >/etc/ld.so.conf.d/dpdk.conf && ldconfig; fi
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
