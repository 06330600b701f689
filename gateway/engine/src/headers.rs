//! Ethernet/IPv4/UDP header fill helpers for TX packets, DAQIRI's
//! `set_*_header` family. Header encoding is etherparse's.

use std::net::Ipv4Addr;

use etherparse::{EtherType, Ethernet2Header, IpNumber, Ipv4Header, UdpHeader};

use crate::error::{Error, Result};

/// Ethernet header length.
pub const ETH_LEN: usize = Ethernet2Header::LEN;
/// IPv4 header length without options.
pub const IPV4_LEN: usize = Ipv4Header::MIN_LEN;
/// UDP header length.
pub const UDP_LEN: usize = UdpHeader::LEN;
/// Ethernet + IPv4 + UDP.
pub const UDP_FRAME_HEADERS: usize = ETH_LEN + IPV4_LEN + UDP_LEN;

/// The addresses of an Ethernet/IPv4/UDP frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrame {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    pub dst_ip: Ipv4Addr,
    /// Source UDP port.
    pub src_port: u16,
    /// Destination UDP port.
    pub dst_port: u16,
}

impl UdpFrame {
    /// Writes headers and payload into `buf`; returns the frame length.
    pub fn write(&self, buf: &mut [u8], payload: &[u8]) -> Result<usize> {
        let len = UDP_FRAME_HEADERS + payload.len();
        if len > buf.len() {
            return Err(Error::invalid(format!("a {len}-byte frame does not fit the {}-byte buffer", buf.len())));
        }
        let udp_len = u16::try_from(payload.len()).map_err(|_| Error::invalid("UDP payload over 65507 bytes"))?;
        write_eth(buf, self.src_mac, self.dst_mac)?;
        write_ipv4(buf, udp_len + UDP_LEN as u16, IpNumber::UDP.0, self.src_ip, self.dst_ip)?;
        write_udp(buf, udp_len, self.src_port, self.dst_port)?;
        write_udp_payload(buf, payload)?;
        Ok(len)
    }
}

fn region(buf: &mut [u8], at: usize, len: usize) -> Result<&mut [u8]> {
    let size = buf.len();
    buf.get_mut(at..at + len)
        .ok_or_else(|| Error::invalid(format!("header at byte {at}..{} is past the {size}-byte buffer", at + len)))
}

/// Writes an Ethernet II header with EtherType IPv4 at the start of `buf`.
pub fn write_eth(buf: &mut [u8], src_mac: [u8; 6], dst_mac: [u8; 6]) -> Result<()> {
    let header = Ethernet2Header { source: src_mac, destination: dst_mac, ether_type: EtherType::IPV4 };
    region(buf, 0, ETH_LEN)?.copy_from_slice(&header.to_bytes());
    Ok(())
}

/// Writes an IPv4 header (checksum included) after the Ethernet header.
pub fn write_ipv4(buf: &mut [u8], ip_payload_len: u16, protocol: u8, src: Ipv4Addr, dst: Ipv4Addr) -> Result<()> {
    let mut header = Ipv4Header::new(ip_payload_len, 64, IpNumber(protocol), src.octets(), dst.octets())
        .map_err(|e| Error::invalid(format!("IPv4 header: {e}")))?;
    header.dont_fragment = true;
    header.header_checksum = header.calc_header_checksum();
    region(buf, ETH_LEN, IPV4_LEN)?.copy_from_slice(&header.to_bytes());
    Ok(())
}

/// Writes a UDP header after the IPv4 header. The checksum is left 0, which
/// IPv4 allows, so payload bytes need not be read again.
pub fn write_udp(buf: &mut [u8], udp_payload_len: u16, src_port: u16, dst_port: u16) -> Result<()> {
    let header = UdpHeader {
        source_port: src_port,
        destination_port: dst_port,
        length: udp_payload_len + UDP_LEN as u16,
        checksum: 0,
    };
    region(buf, ETH_LEN + IPV4_LEN, UDP_LEN)?.copy_from_slice(&header.to_bytes());
    Ok(())
}

/// Copies the UDP payload after the headers.
pub fn write_udp_payload(buf: &mut [u8], payload: &[u8]) -> Result<()> {
    region(buf, UDP_FRAME_HEADERS, payload.len())?.copy_from_slice(payload);
    Ok(())
}

/// Builds a complete Ethernet/IPv4/UDP frame around a datagram's payload
/// (given in pieces) into `out`, for datagrams a socket received without
/// their headers. MACs are locally administered placeholders.
pub fn synthesize_udp_frame<'a>(
    out: &mut Vec<u8>,
    source: std::net::SocketAddrV4,
    destination: std::net::SocketAddrV4,
    payload: impl Iterator<Item = &'a [u8]>,
) -> Result<()> {
    out.clear();
    out.resize(UDP_FRAME_HEADERS, 0);
    for piece in payload {
        out.extend_from_slice(piece);
    }
    let payload_len = out.len() - UDP_FRAME_HEADERS;
    write_synthetic_headers(out, source, destination, payload_len)
}

/// The headers [`synthesize_udp_frame`] puts before a `payload_len`-byte
/// payload, alone in `out`: for a payload written from elsewhere (GPU memory).
pub fn synthesize_udp_headers(
    out: &mut Vec<u8>,
    source: std::net::SocketAddrV4,
    destination: std::net::SocketAddrV4,
    payload_len: usize,
) -> Result<()> {
    out.clear();
    out.resize(UDP_FRAME_HEADERS, 0);
    write_synthetic_headers(out, source, destination, payload_len)
}

fn write_synthetic_headers(
    out: &mut [u8],
    source: std::net::SocketAddrV4,
    destination: std::net::SocketAddrV4,
    payload_len: usize,
) -> Result<()> {
    // The IPv4 total length (headers included) must fit its 16 bits.
    if payload_len + UDP_LEN + IPV4_LEN > usize::from(u16::MAX) {
        return Err(Error::invalid("datagram too long for IPv4 (over 65,507 payload bytes)"));
    }
    let udp_len = payload_len as u16;
    write_eth(out, SYNTHETIC_SOURCE_MAC, SYNTHETIC_DESTINATION_MAC)?;
    write_ipv4(out, udp_len + UDP_LEN as u16, IpNumber::UDP.0, *source.ip(), *destination.ip())?;
    write_udp(out, udp_len, source.port(), destination.port())
}

/// Source MAC of synthesised frames.
pub const SYNTHETIC_SOURCE_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// Destination MAC of synthesised frames.
pub const SYNTHETIC_DESTINATION_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

/// Header fields a flow rule can match, read from a raw Ethernet frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowKey {
    /// IPv4 source.
    pub src_ip: [u8; 4],
    /// IPv4 destination.
    pub dst_ip: [u8; 4],
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// IPv4 total length.
    pub ipv4_len: u16,
}

impl FlowKey {
    /// Reads the key from an Ethernet/IPv4/UDP frame (one VLAN tag allowed);
    /// `None` for anything else. The IPv4 total length is read, not trusted:
    /// a NIC's flow engine and our XDP program match the headers whatever
    /// that field says, and a sender may use it (DAQIRI's quantize benchmark
    /// writes its sequence numbers there), so a frame steers the same way
    /// on every backend.
    pub fn from_frame(frame: &[u8]) -> Option<Self> {
        let sliced = etherparse::LaxSlicedPacket::from_ethernet(frame).ok()?;
        let Some(etherparse::LaxNetSlice::Ipv4(ip)) = sliced.net else { return None };
        let Some(etherparse::TransportSlice::Udp(udp)) = sliced.transport else { return None };
        let header = ip.header();
        Some(FlowKey {
            src_ip: header.source(),
            dst_ip: header.destination(),
            src_port: udp.source_port(),
            dst_port: udp.destination_port(),
            ipv4_len: header.total_len(),
        })
    }
}

impl FlowKey {
    /// What RSS hashes: source and destination IPv4, source and destination port.
    pub(crate) fn rss_input(&self) -> [u8; 12] {
        let mut input = [0u8; 12];
        input[..4].copy_from_slice(&self.src_ip);
        input[4..8].copy_from_slice(&self.dst_ip);
        input[8..10].copy_from_slice(&self.src_port.to_be_bytes());
        input[10..].copy_from_slice(&self.dst_port.to_be_bytes());
        input
    }
}

/// A frame's Ethernet addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Macs {
    pub(crate) dst: [u8; 6],
    pub(crate) src: [u8; 6],
}

impl Macs {
    /// The addresses of any Ethernet frame; `None` for one shorter than its header.
    pub(crate) fn from_frame(frame: &[u8]) -> Option<Self> {
        let header = frame.get(..14)?;
        Some(Macs { dst: header[..6].try_into().ok()?, src: header[6..12].try_into().ok()? })
    }

    /// What RSS by MAC hashes: destination, then source, as on the wire.
    pub(crate) fn rss_input(&self) -> [u8; 12] {
        let mut input = [0u8; 12];
        input[..6].copy_from_slice(&self.dst);
        input[6..].copy_from_slice(&self.src);
        input
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame from 10.0.0.1 to 10.0.0.2 between these UDP ports.
    fn frame(src_port: u16, dst_port: u16) -> UdpFrame {
        UdpFrame {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 0, 2),
            src_port,
            dst_port,
        }
    }

    #[test]
    fn written_frame_parses_back() {
        let frame = frame(4096, 5000);
        let mut buf = [0u8; 128];
        let len = frame.write(&mut buf, b"hello").unwrap();
        assert_eq!(len, UDP_FRAME_HEADERS + 5);
        let key = FlowKey::from_frame(&buf[..len]).unwrap();
        assert_eq!((key.src_port, key.dst_port, key.ipv4_len), (4096, 5000, 33));
        let parsed = etherparse::SlicedPacket::from_ethernet(&buf[..len]).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = parsed.net else { panic!() };
        assert_eq!(ip.header().to_header().calc_header_checksum(), ip.header().header_checksum());
    }

    #[test]
    fn the_key_holds_whatever_the_ipv4_total_length_says() {
        let mut buf = [0u8; 128];
        let len = frame(5000, 5000).write(&mut buf, &[0; 64]).unwrap();
        // Past the frame (as DAQIRI's quantize benchmark leaves it, a sequence
        // number written over it), and shorter than the headers themselves.
        for total_len in [0xFFC5u16, 3] {
            buf[16..18].copy_from_slice(&total_len.to_be_bytes());
            let key = FlowKey::from_frame(&buf[..len]).expect("the headers are all there");
            assert_eq!((key.src_ip, key.src_port, key.dst_port), ([10, 0, 0, 1], 5000, 5000));
            assert_eq!(key.ipv4_len, total_len, "the field as written, which a flow's ipv4_len matches");
        }
        assert_eq!(FlowKey::from_frame(&buf[..14 + 20 + 4]), None, "a UDP header cut short has no ports");
        buf[23] = 6; // TCP
        assert_eq!(FlowKey::from_frame(&buf[..len]), None);
    }

    #[test]
    fn short_buffer_is_an_error() {
        let frame = UdpFrame {
            src_mac: [0; 6],
            dst_mac: [0; 6],
            src_ip: Ipv4Addr::LOCALHOST,
            dst_ip: Ipv4Addr::LOCALHOST,
            src_port: 1,
            dst_port: 2,
        };
        assert!(frame.write(&mut [0u8; 40], b"").is_err());
    }
}
