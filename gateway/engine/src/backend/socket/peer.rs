//! A connected socket for a UDP server's stream source.
//!
//! An unconnected server socket makes the kernel look up a route and check
//! the source address for every datagram (`ip_route_input_slow`,
//! `fib_validate_source`). A socket connected to the sender is found by the
//! kernel's early demultiplexing before routing and reuses the route it
//! cached: in the receive benchmark's setup a plain `recvmmsg` loop offered
//! 800 kpps of 64 B datagrams delivered 60% unconnected and 95% connected.
//!
//! So when a server hears its first peer, it binds a second socket to the
//! same address and connects it to that peer; the kernel then prefers it for
//! that peer's datagrams (an exact four-tuple match), and every other peer
//! still reaches the first socket. Binding twice to one port needs
//! `SO_REUSEADDR` on both sockets; it is set only for that bind and cleared
//! right after, so another program still cannot bind the gateway's port.
//!
//! Between that bind and the connect the new socket must not take anyone's
//! datagram, or that datagram could be delivered out of order. So it binds
//! the wildcard address: the kernel prefers the server's socket, bound to
//! the specific address, for every datagram until the connect, which fixes
//! the new socket's local address too; from then on its exact match wins for
//! the peer's datagrams. A server bound to the wildcard address itself, or a
//! peer the kernel would answer from another local address, gets no peer
//! socket: the server socket alone receives, as before.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;

use socket2::{Domain, Protocol, Socket, Type};

use super::sys;

/// Opens a socket on `local`'s port (where `server` is bound) connected to `peer`.
pub(super) fn connect(server: &Socket, local: SocketAddr, peer: SocketAddr) -> io::Result<Socket> {
    if local.ip().is_unspecified() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the server is bound to the wildcard address, which a connected twin cannot outrank safely",
        ));
    }
    let socket = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    super::buffers::tune(&socket);
    sys::prepare_receive(socket.as_fd());
    socket.set_reuse_address(true)?;
    server.set_reuse_address(true)?;
    let wildcard = SocketAddr::new(unspecified(local.ip()), local.port());
    let bound = socket.bind(&wildcard.into());
    // Exclusive again, whatever the bind did.
    let restored = server.set_reuse_address(false).and(socket.set_reuse_address(false));
    bound?;
    restored?;
    socket.connect(&peer.into())?;
    let answered_from = socket.local_addr()?.as_socket().map(|a| a.ip());
    if answered_from != Some(local.ip()) {
        return Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!("the kernel answers {peer} from {answered_from:?}, not from {}", local.ip()),
        ));
    }
    Ok(socket)
}

fn unspecified(like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    }
}
