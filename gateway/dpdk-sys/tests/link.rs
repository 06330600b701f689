//! The bindings link against the system DPDK and its drivers load: EAL
//! starts without hugepages or PCI and finds one `net_null` device.
#![allow(unsafe_code)]

use std::ffi::CString;

#[test]
fn eal_starts_and_finds_a_virtual_device() {
    let args = [
        "dpdk-sys-test",
        "--no-huge",
        "-m",
        "64",
        "--no-pci",
        "--vdev",
        "net_null0",
        "-l",
        "0",
        "--log-level",
        "error",
    ];
    let args: Vec<CString> = args.iter().map(|a| CString::new(*a).unwrap()).collect();
    let mut argv: Vec<*mut std::os::raw::c_char> = args.iter().map(|a| a.as_ptr().cast_mut()).collect();
    // SAFETY: argv holds argc valid C strings that outlive the call; EAL is initialised once in this process.
    let parsed = unsafe { dpdk_sys::rte_eal_init(argv.len() as i32, argv.as_mut_ptr()) };
    // SAFETY: a plain read of EAL's per-thread error number.
    assert!(parsed >= 0, "rte_eal_init failed: errno {}", unsafe { dpdk_sys::daqiri_errno() });
    // SAFETY: EAL is initialised.
    assert_eq!(unsafe { dpdk_sys::rte_eth_dev_count_avail() }, 1, "net_null0 is the one port");
    // SAFETY: EAL is initialised and nothing else uses it.
    unsafe { dpdk_sys::rte_eal_cleanup() };
}
