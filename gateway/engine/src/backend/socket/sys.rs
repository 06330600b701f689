//! Batched datagram syscalls (`recvmmsg`, `sendmmsg`) and the socket options
//! socket2 does not cover. All of the socket backend's unsafe lives here.
//!
//! Written against libc because no maintained crate batches into caller-owned
//! buffers without allocating per call: the batch arrays below are allocated
//! once per worker and only re-pointed each call.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Room for the `SO_RXQ_OVFL` control message of one datagram.
const CONTROL_LEN: usize = 64;

/// What the kernel said about one received datagram.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RecvMeta {
    /// Bytes placed in the buffer.
    pub(crate) len: usize,
    /// The datagram was larger than the buffer and was cut.
    pub(crate) truncated: bool,
    /// Sender address.
    pub(crate) peer: Option<SocketAddr>,
    /// The socket's cumulative kernel drop counter (`SO_RXQ_OVFL`), when reported.
    pub(crate) kernel_drops: Option<u32>,
}

/// Reusable `recvmmsg` state for up to `capacity` datagrams per call.
pub(crate) struct RecvBatch {
    headers: Vec<libc::mmsghdr>,
    iovecs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    controls: Vec<[u64; CONTROL_LEN / 8]>,
    meta: Vec<RecvMeta>,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch").field("capacity", &self.headers.len()).finish()
    }
}

impl RecvBatch {
    pub(crate) fn new(capacity: usize) -> Self {
        // SAFETY: mmsghdr, iovec and sockaddr_storage are plain C structs for
        // which all-zero bytes are a valid (empty) value.
        let (header, iovec, name) = unsafe { (zeroed::<libc::mmsghdr>(), zeroed::<libc::iovec>(), zeroed::<libc::sockaddr_storage>()) };
        Self {
            headers: vec![header; capacity],
            iovecs: vec![iovec; capacity],
            names: vec![name; capacity],
            controls: vec![[0; CONTROL_LEN / 8]; capacity],
            meta: vec![RecvMeta::default(); capacity],
        }
    }

    /// Receives up to one datagram per buffer, blocking (up to the socket's
    /// receive timeout) for the first only. Returns the datagrams' metadata in
    /// buffer order; `WouldBlock`/`TimedOut` when nothing arrived in time.
    pub(crate) fn recv<'a>(&mut self, socket: BorrowedFd<'_>, buffers: impl Iterator<Item = &'a mut [u8]>) -> io::Result<&[RecvMeta]> {
        let mut count = 0;
        for (i, buf) in buffers.take(self.headers.len()).enumerate() {
            self.iovecs[i] = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
            let header = &mut self.headers[i].msg_hdr;
            header.msg_name = (&raw mut self.names[i]).cast();
            header.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            header.msg_iov = &raw mut self.iovecs[i];
            header.msg_iovlen = 1;
            header.msg_control = self.controls[i].as_mut_ptr().cast();
            header.msg_controllen = CONTROL_LEN;
            header.msg_flags = 0;
            count = i + 1;
        }
        if count == 0 {
            return Ok(&[]);
        }
        // SAFETY: headers[..count] point at iovecs, names and control buffers
        // owned by self, and the iovecs at `buffers`, whose borrows ('a) outlive
        // this call; every length matches its buffer.
        let received = unsafe {
            libc::recvmmsg(socket.as_raw_fd(), self.headers.as_mut_ptr(), count as libc::c_uint, libc::MSG_WAITFORONE, std::ptr::null_mut())
        };
        if received < 0 {
            return Err(io::Error::last_os_error());
        }
        let received = received as usize;
        for i in 0..received {
            let header = &self.headers[i];
            self.meta[i] = RecvMeta {
                len: header.msg_len as usize,
                truncated: header.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                peer: sockaddr_to_std(&self.names[i]),
                kernel_drops: overflow_counter(&header.msg_hdr),
            };
        }
        Ok(&self.meta[..received])
    }
}

impl RecvBatch {
    /// Metadata of the first `count` datagrams of the last `recv`.
    pub(crate) fn last(&self, count: usize) -> &[RecvMeta] {
        &self.meta[..count]
    }
}

/// Reusable `sendmmsg` state: up to `capacity` datagrams of up to
/// `max_segments` pieces each per call.
pub(crate) struct SendBatch {
    headers: Vec<libc::mmsghdr>,
    iovecs: Vec<libc::iovec>,
    max_segments: usize,
}

impl std::fmt::Debug for SendBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendBatch").field("capacity", &self.headers.len()).finish()
    }
}

impl SendBatch {
    pub(crate) fn new(capacity: usize, max_segments: usize) -> Self {
        // SAFETY: all-zero bytes are a valid mmsghdr and iovec.
        let (header, iovec) = unsafe { (zeroed::<libc::mmsghdr>(), zeroed::<libc::iovec>()) };
        Self { headers: vec![header; capacity], iovecs: vec![iovec; capacity * max_segments], max_segments }
    }

    /// Sends one datagram per item of `datagrams` (each a list of pieces sent
    /// back to back) on a connected socket, or to `dest`. Returns how many the
    /// kernel took, which may be fewer than given.
    pub(crate) fn send<'a, D>(&mut self, socket: BorrowedFd<'_>, dest: Option<&socket2::SockAddr>, datagrams: impl Iterator<Item = D>) -> io::Result<usize>
    where
        D: Iterator<Item = &'a [u8]>,
    {
        let mut count = 0;
        for (i, pieces) in datagrams.take(self.headers.len()).enumerate() {
            let first = i * self.max_segments;
            let mut used = 0;
            for piece in pieces.take(self.max_segments) {
                self.iovecs[first + used] = libc::iovec { iov_base: piece.as_ptr().cast_mut().cast(), iov_len: piece.len() };
                used += 1;
            }
            let header = &mut self.headers[i].msg_hdr;
            header.msg_iov = &raw mut self.iovecs[first];
            header.msg_iovlen = used;
            header.msg_name = dest.map_or(std::ptr::null_mut(), |d| d.as_ptr().cast_mut().cast());
            header.msg_namelen = dest.map_or(0, |d| d.len());
            header.msg_control = std::ptr::null_mut();
            header.msg_controllen = 0;
            count = i + 1;
        }
        if count == 0 {
            return Ok(0);
        }
        // SAFETY: headers[..count] point at iovecs owned by self, which point at
        // the `'a` slices (alive for this call) and at `dest` (borrowed for this
        // call); the kernel only reads them.
        let sent = unsafe { libc::sendmmsg(socket.as_raw_fd(), self.headers.as_mut_ptr(), count as libc::c_uint, 0) };
        if sent < 0 { Err(io::Error::last_os_error()) } else { Ok(sent as usize) }
    }
}

fn overflow_counter(header: &libc::msghdr) -> Option<u32> {
    if header.msg_controllen == 0 || header.msg_control.is_null() {
        return None;
    }
    // SAFETY: the kernel filled msg_control with msg_controllen bytes of cmsgs;
    // the CMSG_* macros walk exactly that range.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(header);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SO_RXQ_OVFL {
                return Some(std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<u32>()));
            }
            cmsg = libc::CMSG_NXTHDR(header, cmsg);
        }
    }
    None
}

fn sockaddr_to_std(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which fits in it.
            let v4 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr)), u16::from_be(v4.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6, which fits in it.
            let v6 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(v6.sin6_addr.s6_addr), u16::from_be(v6.sin6_port), v6.sin6_flowinfo, v6.sin6_scope_id)))
        }
        _ => None,
    }
}

fn set_int_option(socket: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int with its exact size.
    let rc = unsafe { libc::setsockopt(socket.as_raw_fd(), level, name, (&raw const value).cast(), size_of::<libc::c_int>() as libc::socklen_t) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Asks the kernel to report its per-socket drop counter with each datagram.
pub(crate) fn enable_drop_counter(socket: BorrowedFd<'_>) -> io::Result<()> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)
}

/// Raises the receive buffer past `net.core.rmem_max` where privileges allow.
pub(crate) fn force_receive_buffer(socket: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes.min(i32::MAX as usize) as libc::c_int)
}

/// Raises the send buffer past `net.core.wmem_max` where privileges allow.
pub(crate) fn force_send_buffer(socket: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, bytes.min(i32::MAX as usize) as libc::c_int)
}
