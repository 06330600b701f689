//! A UDP server's RX queues as one `SO_REUSEPORT` group: a socket per
//! queue, bound in queue order, and a classic BPF program attached to the
//! group that picks each datagram's socket by the interface's flow rules,
//! so every queue receives on its own core.
//!
//! The program is built here from the [`FlowTable`]: first match wins, as
//! in software steering; a rule over several queues spreads by source
//! address and port (a flow keeps its queue, though not the one software
//! RSS's Toeplitz hash would pick); what no rule matches goes to queue 0,
//! whose worker drops it under flow isolation. A flow reload attaches a new
//! program; the kernel swaps it whole.
//!
//! Classic BPF, not eBPF: a reuseport program needs nothing an eBPF map
//! would give, and classic BPF needs no loader and no compiler in the build.
//! No crate assembles classic BPF, so the few opcodes used are spelled out.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;

use socket2::Socket;

use crate::flow::{FlowRule, FlowTable};

// linux/filter.h and linux/bpf_common.h: stable kernel ABI.
const BPF_LD: u16 = 0x00;
const BPF_LDX: u16 = 0x01;
const BPF_ST: u16 = 0x02;
const BPF_ALU: u16 = 0x04;
const BPF_JMP: u16 = 0x05;
const BPF_RET: u16 = 0x06;
const BPF_W: u16 = 0x00;
const BPF_H: u16 = 0x08;
const BPF_B: u16 = 0x10;
const BPF_ABS: u16 = 0x20;
const BPF_IND: u16 = 0x40;
const BPF_MEM: u16 = 0x60;
const BPF_MSH: u16 = 0xa0;
const BPF_K: u16 = 0x00;
const BPF_X: u16 = 0x08;
const BPF_XOR: u16 = 0xa0;
const BPF_MOD: u16 = 0x90;
const BPF_JEQ: u16 = 0x10;
const BPF_JGT: u16 = 0x20;
const BPF_JGE: u16 = 0x30;
/// Loads relative to the network (IPv4) header; the program otherwise sees
/// the datagram from its payload on.
const SKF_NET_OFF: i32 = -0x100000;
/// The longest program the kernel takes (`BPF_MAXINSNS`).
const MAX_INSTRUCTIONS: usize = 4096;

fn stmt(code: u16, k: i32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k: k as u32 }
}

/// A conditional jump whose targets are fixed up later.
fn jump(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code: BPF_JMP | code | BPF_K, jt: 0, jf: 0, k }
}

/// The program for `table` on a group of `queues` sockets: returns the
/// socket (queue) index for each datagram.
pub(super) fn program(table: &FlowTable, queues: usize) -> io::Result<Vec<libc::sock_filter>> {
    let mut out = Vec::new();
    for rule in &table.rules {
        rule_block(rule, &mut out)?;
    }
    // No rule matched: queue 0, the default queue.
    out.push(stmt(BPF_RET | BPF_K, 0));
    if let Some(rule) = table.rules.iter().find(|r| r.queues().iter().any(|&q| q >= queues)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("flow {} names a queue beyond the {queues} RX sockets", rule.flow_id),
        ));
    }
    if out.len() > MAX_INSTRUCTIONS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} flow rules need a {}-instruction program; the kernel takes {MAX_INSTRUCTIONS}",
                table.rules.len(),
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// One rule: its tests, each jumping past the block on a miss, then the
/// return of its queue (or of one of its queues, by flow hash).
fn rule_block(rule: &FlowRule, out: &mut Vec<libc::sock_filter>) -> io::Result<()> {
    let mut block = Vec::new();
    // Indices of jumps whose false branch, or true branch, leaves the block.
    let (mut misses, mut misses_if_true) = (Vec::new(), Vec::new());
    let m = rule.udp_ip();
    if let Some(len) = m.ipv4_len {
        block.push(stmt(BPF_LD | BPF_H | BPF_ABS, SKF_NET_OFF + 2));
        misses.push(block.len());
        block.push(jump(BPF_JEQ, u32::from(len)));
    }
    // The IPv4 source and destination (a word loads in host order).
    for (address, at) in [(m.ipv4_src, 12), (m.ipv4_dst, 16)] {
        let Some(address) = address else { continue };
        block.push(stmt(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + at));
        misses.push(block.len());
        block.push(jump(BPF_JEQ, u32::from_be_bytes(address)));
    }
    let (udp_src, udp_dst) = (m.udp_src, m.udp_dst);
    if udp_src.is_some() || udp_dst.is_some() {
        // X = the IPv4 header's length, so [x + NET] is the UDP header.
        block.push(stmt(BPF_LDX | BPF_B | BPF_MSH, SKF_NET_OFF));
    }
    for (ports, at) in [(udp_src, 0), (udp_dst, 2)] {
        let Some(ports) = ports else { continue };
        block.push(stmt(BPF_LD | BPF_H | BPF_IND, SKF_NET_OFF + at));
        // port >= first, else miss; port > last, a miss.
        misses.push(block.len());
        block.push(jump(BPF_JGE, u32::from(ports.first)));
        misses_if_true.push(block.len());
        block.push(jump(BPF_JGT, u32::from(ports.last)));
    }
    match rule.queues() {
        [queue] => block.push(stmt(BPF_RET | BPF_K, *queue as i32)),
        queues => {
            // A = (source address ^ source port) % queues: one flow, one queue.
            block.push(stmt(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + 12));
            block.push(stmt(BPF_ST, 0));
            block.push(stmt(BPF_LDX | BPF_B | BPF_MSH, SKF_NET_OFF));
            block.push(stmt(BPF_LD | BPF_H | BPF_IND, SKF_NET_OFF));
            block.push(stmt(BPF_LDX | BPF_W | BPF_MEM, 0));
            block.push(stmt(BPF_ALU | BPF_XOR | BPF_X, 0));
            block.push(stmt(BPF_ALU | BPF_MOD | BPF_K, queues.len() as i32));
            for (i, &queue) in queues.iter().enumerate() {
                // A == i: return queue; else on to the next.
                block.push(libc::sock_filter { code: BPF_JMP | BPF_JEQ | BPF_K, jt: 0, jf: 1, k: i as u32 });
                block.push(stmt(BPF_RET | BPF_K, queue as i32));
            }
            block.push(stmt(BPF_RET | BPF_K, queues[0] as i32));
        }
    }
    // Every miss jumps to the instruction after the block.
    let end = block.len();
    let past = |at: usize| {
        u8::try_from(end - at - 1).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "flow {} spreads over {} queues, more than a classic BPF jump spans",
                    rule.flow_id,
                    rule.queues().len()
                ),
            )
        })
    };
    for &at in &misses {
        block[at].jf = past(at)?;
    }
    for &at in &misses_if_true {
        block[at].jt = past(at)?;
    }
    out.extend(block);
    Ok(())
}

/// Attaches `program` to the reuseport group of `socket`, replacing the
/// one it had.
pub(super) fn attach(socket: &Socket, program: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr().cast_mut() };
    // SAFETY: `fprog` points at `program`, which outlives the call; the
    // kernel copies the instructions.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&raw const fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(test)]
mod tests {
    use std::net::{SocketAddr, UdpSocket};

    use daqiri_config::model::{FlowMatch, PortMatch};
    use daqiri_config::testing::{TestConfig, rx};
    use socket2::{Domain, Protocol, Type};

    use super::*;

    /// Flow 1: UDP source ports 41000-41009 to queue 1; flow 2: IPv4 total
    /// length 128 (100-byte datagrams) spread over both queues.
    fn table() -> FlowTable {
        let spread = FlowMatch { ipv4_len: Some(128), ..FlowMatch::default() };
        let config = TestConfig::udp_server(5000)
            .region("mem", 64, 2048)
            .rx_queue(rx(0, "mem"))
            .rx_queue(rx(1, "mem"))
            .flow(1, &[1], FlowMatch { udp_src: Some(PortMatch { first: 41000, last: 41009 }), ..FlowMatch::default() })
            .flow(2, &[0, 1], spread);
        FlowTable::new(config.validate().expect("valid").config().interfaces[0].rx.as_ref().expect("rx"))
    }

    #[test]
    fn every_jump_lands_inside_the_program_and_it_ends_in_a_return() {
        let program = program(&table(), 2).unwrap();
        for (at, insn) in program.iter().enumerate() {
            if insn.code & 0x07 == BPF_JMP {
                assert!(at + 1 + usize::from(insn.jt.max(insn.jf)) < program.len(), "jump at {at} leaves the program");
            }
        }
        assert_eq!(program.last().unwrap().code, BPF_RET | BPF_K);
    }

    /// The program on a real group of two sockets on loopback: the kernel
    /// puts each datagram on the socket of the queue its rule names.
    #[test]
    fn the_kernel_puts_each_datagram_on_its_flows_socket() {
        let group: Vec<Socket> = (0..2)
            .map(|_| {
                let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
                s.set_reuse_port(true).unwrap();
                s
            })
            .collect();
        group[0].bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
        let port = group[0].local_addr().unwrap().as_socket().unwrap();
        group[1].bind(&port.into()).unwrap();
        attach(&group[0], &program(&table(), 2).unwrap()).unwrap();
        let arrives_on = |src: u16, len: usize| {
            let sender = UdpSocket::bind(("127.0.0.1", src)).unwrap();
            sender.send_to(&vec![7u8; len], port).unwrap();
            let mut ready: Vec<libc::pollfd> =
                group.iter().map(|s| libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
            // SAFETY: `ready` holds valid pollfds for the call.
            assert!(unsafe { libc::poll(ready.as_mut_ptr(), 2, 5000) } > 0, "the datagram arrives");
            let at = ready.iter().position(|p| p.revents & libc::POLLIN != 0).expect("a readable socket");
            let mut buf = [std::mem::MaybeUninit::new(0u8); 2048];
            group[at].recv(&mut buf).unwrap();
            at
        };
        assert_eq!(arrives_on(41003, 10), 1, "flow 1's source port goes to queue 1");
        assert_eq!(arrives_on(41020, 10), 0, "no rule matched: queue 0");
        // Flow 2 spreads by source: some source ports land on each queue,
        // and one flow always on the same one.
        let spread: Vec<usize> = (42000..42016).map(|src| arrives_on(src, 100)).collect();
        assert!(spread.contains(&0) && spread.contains(&1), "flow 2 spreads over both queues: {spread:?}");
        assert_eq!(arrives_on(42000, 100), spread[0], "a flow keeps its queue");
    }
}
