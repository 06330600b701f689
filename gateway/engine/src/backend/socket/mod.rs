//! The socket backend: Linux UDP and TCP sockets, client or server, from
//! `socket_config`.
//!
//! UDP: a server's RX queues each read a socket of their own, in an
//! `SO_REUSEPORT` group whose BPF program steers by the flow rules (see
//! [`reuseport`]); otherwise one RX worker per interface receives. Either
//! receives with `recvmmsg` straight into buffers of its queue's region,
//! steers each datagram by the flow rules (as a NIC would) and hands the
//! buffer, not the bytes, to the target queue. TX workers send bursts with `sendmmsg`, one datagram per
//! packet, segments gathered with iovecs.
//!
//! TCP: see [`tcp`] for how a byte stream maps onto bursts.

mod buffers;
mod kernel_drops;
mod options;
mod peer;
mod reuseport;
mod sys;
mod tcp;
mod udp;

pub(crate) use udp::reuseport_group;

use daqiri_config::{SocketEndpoints, Transport};

use super::driver::PortDriver;
use crate::error::{Error, Result, Status};
use crate::memory::RegionTable;
use crate::port::Port;

pub(super) fn open(endpoints: SocketEndpoints, port: &Port, regions: &RegionTable) -> Result<Box<dyn PortDriver>> {
    super::driver::prepare_cpu_landing(port, regions)?;
    match endpoints.transport {
        Transport::Udp => Ok(Box::new(udp::UdpDriver::open(endpoints, port)?)),
        Transport::Tcp => Ok(Box::new(tcp::TcpDriver::open(endpoints, port)?)),
        Transport::Roce => Err(Error::new(
            Status::NotSupported,
            format!("interface \"{}\" uses RoCE, which needs the rdma backend", port.name),
        )),
    }
}
