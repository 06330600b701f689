//! A region shared with another process: its read-only descriptor maps the
//! very pages packets land in, at the offsets `Packet::segment_location`
//! gives, and refuses a writable mapping.

use std::os::fd::AsRawFd;

use daqiri::Engine;
use daqiri_config::testing::{TestConfig, rx, tx};

/// Maps `len` bytes of `fd` shared with `prot`; the address, or the error.
fn map(fd: &std::os::fd::OwnedFd, len: usize, prot: libc::c_int) -> std::io::Result<*mut u8> {
    // SAFETY: a fresh mapping of a descriptor we hold; the result is checked.
    let at = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
    if at == libc::MAP_FAILED { Err(std::io::Error::last_os_error()) } else { Ok(at.cast()) }
}

#[test]
fn a_shared_region_maps_read_only_with_every_packet_where_its_location_says() {
    let config = TestConfig::loopback()
        .region("tx", 16, 2048)
        .region("rx", 16, 2048)
        .tx_queue(tx(0, "tx").batch(4))
        .rx_queue(rx(0, "rx").batch(4));
    let engine = Engine::from_yaml(&config.yaml()).unwrap();
    let shared = engine.share_region(1).unwrap();
    assert_eq!((shared.name.as_str(), shared.buf_size, shared.num_bufs), ("rx", 2048, 16));
    assert!(shared.len >= 16 * 2048);
    let view = map(&shared.fd, shared.len, libc::PROT_READ).unwrap();
    let err = map(&shared.fd, shared.len, libc::PROT_READ | libc::PROT_WRITE).expect_err("read-only");
    assert_eq!(err.raw_os_error(), Some(libc::EACCES), "{err}");
    let payloads: Vec<Vec<u8>> = (0..4u8).map(|k| vec![k; 100 + usize::from(k)]).collect();
    let mut burst = engine.get_tx_packet_burst(0, 0, payloads.len()).unwrap();
    for (i, payload) in payloads.iter().enumerate() {
        burst.packet_mut(i).write(payload).unwrap();
    }
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    let mut seen = 0;
    while seen < payloads.len() {
        let Some(burst) = engine.get_rx_burst(0, 0).unwrap() else { continue };
        for packet in burst.packets() {
            let at = packet.segment_location(0).expect("a segment");
            assert_eq!(at.region, 1);
            // SAFETY: the location lies inside the mapping of the region's `len` bytes.
            let bytes = unsafe { std::slice::from_raw_parts(view.add(at.offset as usize), at.len as usize) };
            assert_eq!(bytes, packet.data(), "the other mapping sees the packet's own bytes");
            assert_eq!(bytes, &payloads[seen][..]);
            seen += 1;
        }
    }
    // SAFETY: unmaps the view made above; nothing reads it after.
    unsafe { libc::munmap(view.cast(), shared.len) };
    assert!(engine.share_region(2).is_err(), "no region 2");
}
