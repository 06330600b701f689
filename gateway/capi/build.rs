//! The C ABI's version comes from include/daqiri/version.h (its one
//! definition): the shared library's soname carries it, so a program linked
//! against `libdaqiri.so.1` never loads an incompatible one, and
//! `daqiri_gw_abi_version()` reports it.

use std::path::PathBuf;

fn main() {
    let header = "include/daqiri/version.h";
    println!("cargo:rerun-if-changed={header}");
    let text = std::fs::read_to_string(header).expect("include/daqiri/version.h is readable");
    let abi: u32 = text
        .lines()
        .find_map(|line| line.strip_prefix("#define DAQIRI_ABI_VERSION "))
        .and_then(|value| value.trim().parse().ok())
        .expect("version.h defines DAQIRI_ABI_VERSION as a number");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdaqiri.so.{abi}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("abi_version.rs"), format!("const ABI_VERSION: i32 = {abi};\n"))
        .expect("OUT_DIR is writable");
}
