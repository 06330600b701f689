//! `libdaqiri`: DAQIRI's API over the daqiri engine, for C and C++.
//!
//! The library exports a C ABI (`daqiri_gw_*`, declared in
//! `include/daqiri/c_api.h`); `include/daqiri/daqiri.h` puts DAQIRI's C++
//! API (namespace `daqiri`, `BurstParams`, `Status`, the overloads) on top
//! of it as inline functions, so a DAQIRI program compiles unchanged and
//! links against this library alone. `package.sh` installs both with a
//! pkg-config file and a CMake package, under DAQIRI's names.
//!
//! The engine runs in the calling process, as DAQIRI's does: `daqiri_init`
//! starts its workers, bursts are handles into its pools, `shutdown` stops
//! it. What differs from DAQIRI is listed in docs/coming-from-daqiri.md.

// Every exported function takes C's pointers under the contract c_api.h
// states once for all: handles are checked (handle.rs), other pointers are
// as DAQIRI documents them.
#![allow(clippy::missing_safety_doc)]
#![warn(missing_docs)]

mod args;
mod bursts;
mod config_tree;
mod connections;
mod file_writes;
mod flows;
mod free;
#[cfg(feature = "cuda")]
mod gpu_kernels;
mod handle;
mod lifecycle;
mod logging;
mod rdma;
mod rdma_request;
mod reorder_stream;
mod s3_writes;
mod stats_text;
mod status;
mod tx;
mod writers;

// The C ABI is callable from Rust as well: the Python module `daqiri`
// (gateway/python-daqiri) is a second face of the same functions.
pub use bursts::*;
pub use config_tree::*;
pub use connections::*;
pub use flows::*;
pub use free::*;
#[cfg(feature = "cuda")]
pub use gpu_kernels::*;
pub use handle::{BurstFields, BurstHeader, BurstParams};
pub use lifecycle::*;
pub use rdma::{
    OpCode as RdmaOpCode, daqiri_gw_rdma_connect_to_server, daqiri_gw_rdma_get_opcode, daqiri_gw_rdma_get_port_queue,
    daqiri_gw_rdma_get_server_conn_id, daqiri_gw_rdma_get_wr_id, daqiri_gw_rdma_set_header,
};
pub use reorder_stream::*;
pub use s3_writes::*;
pub use status::{daqiri_gw_fail, daqiri_gw_last_error, daqiri_gw_status_name};
pub use tx::*;
pub use writers::*;

use std::ffi::c_char;

/// This library's version ("0.1.0"), as a C string.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

include!(concat!(env!("OUT_DIR"), "/abi_version.rs"));

/// The C ABI's version (version.h's `DAQIRI_ABI_VERSION`), also the shared
/// library's soname suffix (`libdaqiri.so.1`).
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_abi_version() -> i32 {
    ABI_VERSION
}
