//! A connected socket for a UDP server's stream source.
//!
//! An unconnected server socket makes the kernel look up a route and check
//! the source address for every datagram (`ip_route_input_slow`,
//! `fib_validate_source`). A socket connected to the sender is found by the
//! kernel's early demultiplexing before routing and reuses the route it
//! cached: on the benchmark's receiving core that alone lifted a plain
//! `recvmmsg` loop from about 485 to about 760 kpps at 64 B.
//!
//! So when a server hears its first peer, it binds a second socket to the
//! same address and connects it to that peer; the kernel then prefers it for
//! that peer's datagrams (an exact four-tuple match), and every other peer
//! still reaches the first socket. Binding twice to one port needs
//! `SO_REUSEADDR` on both sockets; it is set only for that bind and cleared
//! right after, so another program still cannot bind the gateway's port.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;

use socket2::{Domain, Protocol, Socket, Type};

use super::sys;

/// Opens a socket bound to `local` (where `server` is bound) and connected to `peer`.
pub(super) fn connect(server: &Socket, local: SocketAddr, peer: SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    super::udp::tune(&socket);
    let _ = sys::enable_gro(socket.as_fd());
    socket.set_reuse_address(true)?;
    server.set_reuse_address(true)?;
    let bound = socket.bind(&local.into());
    // Exclusive again, whatever the bind did.
    let restored = server.set_reuse_address(false).and(socket.set_reuse_address(false));
    bound?;
    restored?;
    socket.connect(&peer.into())?;
    socket.set_nonblocking(false)?;
    Ok(socket)
}
