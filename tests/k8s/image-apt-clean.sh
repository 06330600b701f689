#!/bin/sh
# mmdebstrap customize hook for the runtime base (tests/k8s/image.sh): apt in
# the image keeps neither downloaded packages nor its binary caches, as in
# Debian's own container images, so each install layer holds only what it
# installed. $1 is the new root.
set -e
cat >"$1/etc/apt/apt.conf.d/docker-clean" <<'CONF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CONF
rm -f "$1"/var/cache/apt/*.bin "$1"/var/cache/apt/archives/*.deb
