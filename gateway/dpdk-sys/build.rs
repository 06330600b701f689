//! Finds DPDK with pkg-config (Debian's, or another through PKG_CONFIG_PATH),
//! compiles the shim against it and generates bindings for the functions and
//! types the engine uses.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/wrapper.h");
    println!("cargo:rerun-if-changed=src/shim.h");
    println!("cargo:rerun-if-changed=src/shim.c");
    let dpdk = pkg_config::Config::new().atleast_version("22.11").probe("libdpdk").unwrap_or_else(|e| {
        panic!("DPDK (libdpdk-dev, 22.11 or later) is needed for the dpdk feature: {e}; tests/setup.sh installs it")
    });
    // DPDK's cflags also carry `-include rte_config.h` and `-march`, which
    // the headers need; the pkg-config crate keeps only the include paths.
    let extra: Vec<String> = std::process::Command::new("pkg-config")
        .args(["--cflags-only-other", "libdpdk"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();

    let mut shim = cc::Build::new();
    shim.file("src/shim.c").includes(&dpdk.include_paths).warnings(false);
    for flag in &extra {
        shim.flag(flag);
    }
    shim.compile("daqiri_dpdk_shim");

    let mut bindings = bindgen::Builder::default()
        .header("src/wrapper.h")
        .clang_args(dpdk.include_paths.iter().map(|p| format!("-I{}", p.display())))
        .clang_args(&extra)
        .allowlist_function("rte_.*|daqiri_.*")
        .allowlist_type("rte_.*")
        .allowlist_var("RTE_.*")
        // Packed and aligned together, which Rust cannot express; not used.
        .opaque_type("rte_arp_hdr|rte_arp_ipv4|rte_l2tpv2_combined_msg_hdr|rte_gtp_psc_generic_hdr")
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for function in ["rte_.*_inline", "rte_.*_v2[0-9]"] {
        bindings = bindings.blocklist_function(function);
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let bindings = bindings.generate().expect("bindgen could not read DPDK's headers");
    bindings.write_to_file(out.join("bindings.rs")).expect("writing the bindings");
    // DPDK 24.11 wrapped the mbuf's rearm and descriptor fields in anonymous
    // unions (its markers went for MSVC), which bindgen names per layout:
    // the accessors in lib.rs read whichever this DPDK has. No version number
    // says so as surely as the header itself.
    println!("cargo::rustc-check-cfg=cfg(dpdk_mbuf_unions)");
    let text = bindings.to_string();
    let mbuf = text.split("pub struct rte_mbuf {").nth(1).and_then(|rest| rest.split('}').next()).unwrap_or("");
    if !mbuf.contains("pub data_off:") {
        println!("cargo:rustc-cfg=dpdk_mbuf_unions");
    }
}
