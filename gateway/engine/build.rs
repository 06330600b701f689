//! Builds the AF_XDP engine's XDP program (`--features af_xdp`) from its C
//! source with clang's BPF target; the object is embedded in the crate.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    if std::env::var_os("CARGO_FEATURE_AF_XDP").is_none() {
        return;
    }
    let source = "src/backend/af_xdp/steer.bpf.c";
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("steer.bpf.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // The kernel's UAPI headers include <asm/types.h> from the host's multiarch directory.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets the target arch");
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-I", &multiarch, "-c", source, "-o"])
        .arg(&out)
        .status()
        .unwrap_or_else(|e| {
            panic!("the af_xdp feature builds its XDP program with {clang} (apt install clang libbpf-dev): {e}")
        });
    assert!(status.success(), "{clang} could not build {source}");
}
