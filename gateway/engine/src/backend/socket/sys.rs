//! Batched datagram syscalls (`recvmmsg`, `sendmmsg`) and the socket options
//! socket2 does not cover. All of the socket backend's unsafe lives here.
//!
//! Written against libc because no maintained crate batches into caller-owned
//! buffers without allocating per call: the batch arrays below are allocated
//! once per worker and only re-pointed each call.

#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// Room for the `UDP_GRO` and `SO_RXQ_OVFL` control messages of one datagram.
const CONTROL_LEN: usize = 64;

/// What the kernel said about one received message.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RecvMeta {
    /// Bytes received (all datagrams of a GRO message together).
    pub(crate) len: usize,
    /// With GRO: the size of each coalesced datagram but the last.
    pub(crate) gro_segment: Option<usize>,
    /// Pool buffers the message was spread over (the overflow area not counted).
    pub(crate) buffers: usize,
    /// The message was larger than all its buffers and was cut.
    pub(crate) truncated: bool,
    /// Sender address.
    pub(crate) peer: Option<SocketAddr>,
    /// The socket's drop counter when the message was queued (`SO_RXQ_OVFL`;
    /// the kernel leaves it out, and this is 0, before the first drop).
    pub(crate) drops: u32,
}

/// Reusable `recvmmsg` state: up to `messages` messages per call, each
/// spread over the pool buffers given for it and then an overflow area the
/// batch owns, so a message longer than its buffers is never cut.
pub(crate) struct RecvBatch {
    headers: Vec<libc::mmsghdr>,
    iovecs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    controls: Vec<[u64; CONTROL_LEN / 8]>,
    overflow: Vec<u8>,
    overflow_len: usize,
    buffers_per_message: usize,
    used: Vec<usize>,
    meta: Vec<RecvMeta>,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("messages", &self.headers.len())
            .field("buffers_per_message", &self.buffers_per_message)
            .finish()
    }
}

// SAFETY: the raw pointers inside the headers point only into this value's
// own arrays or at buffers lent for the duration of one `recv` call; they are
// rewritten before every call, so moving the batch to another thread (a
// direct-mode poller moves with its port) leaves nothing dangling.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// `messages` messages per call of up to `buffers_per_message` pool
    /// buffers each, plus `overflow_len` bytes of overflow per message.
    pub(crate) fn new(messages: usize, buffers_per_message: usize, overflow_len: usize) -> Self {
        // SAFETY: mmsghdr, iovec and sockaddr_storage are plain C structs for
        // which all-zero bytes are a valid (empty) value.
        let (header, iovec, name) =
            unsafe { (zeroed::<libc::mmsghdr>(), zeroed::<libc::iovec>(), zeroed::<libc::sockaddr_storage>()) };
        Self {
            headers: vec![header; messages],
            iovecs: vec![iovec; messages * (buffers_per_message + 1)],
            names: vec![name; messages],
            controls: vec![[0; CONTROL_LEN / 8]; messages],
            overflow: vec![0; messages * overflow_len],
            overflow_len,
            buffers_per_message,
            used: vec![0; messages],
            meta: vec![RecvMeta::default(); messages],
        }
    }

    /// Pool buffers one call can use at most.
    /// Messages one call can receive.
    pub(crate) fn messages(&self) -> usize {
        self.headers.len()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.headers.len() * self.buffers_per_message
    }

    /// Overflow area of message `index` after a receive (bytes past its buffers).
    pub(crate) fn overflow(&self, index: usize) -> &[u8] {
        &self.overflow[index * self.overflow_len..(index + 1) * self.overflow_len]
    }

    /// Receives up to one message per group of `segment`-byte slices of the
    /// given buffers. With `wait`, blocks (up to the socket's receive
    /// timeout) for the first only; without, returns at once. Returns the
    /// messages' metadata in order; `WouldBlock`/`TimedOut` when nothing
    /// arrived in time.
    pub(crate) fn recv<'a>(
        &mut self,
        socket: BorrowedFd<'_>,
        buffers: impl Iterator<Item = &'a mut [u8]>,
        segment: usize,
        wait: bool,
    ) -> io::Result<&[RecvMeta]> {
        let mut buffers = buffers.peekable();
        let per = self.buffers_per_message + 1;
        let mut count = 0;
        while count < self.headers.len() && buffers.peek().is_some() {
            let first = count * per;
            let mut used = 0;
            while used < self.buffers_per_message {
                let Some(buf) = buffers.next() else { break };
                let len = segment.min(buf.len());
                self.iovecs[first + used] = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: len };
                used += 1;
            }
            let overflow = &mut self.overflow[count * self.overflow_len..(count + 1) * self.overflow_len];
            self.iovecs[first + used] = libc::iovec { iov_base: overflow.as_mut_ptr().cast(), iov_len: overflow.len() };
            self.used[count] = used;
            let header = &mut self.headers[count].msg_hdr;
            header.msg_name = (&raw mut self.names[count]).cast();
            header.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            header.msg_iov = &raw mut self.iovecs[first];
            header.msg_iovlen = used + 1;
            header.msg_control = self.controls[count].as_mut_ptr().cast();
            header.msg_controllen = CONTROL_LEN;
            header.msg_flags = 0;
            count += 1;
        }
        if count == 0 {
            return Ok(&[]);
        }
        // SAFETY: headers[..count] point at iovecs, names, control and overflow
        // buffers owned by self, and the iovecs at `buffers`, whose borrows ('a)
        // outlive this call; every length is within its buffer.
        let received = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.headers.as_mut_ptr(),
                count as libc::c_uint,
                if wait { libc::MSG_WAITFORONE } else { libc::MSG_DONTWAIT },
                std::ptr::null_mut(),
            )
        };
        if received < 0 {
            return Err(io::Error::last_os_error());
        }
        let received = received as usize;
        for i in 0..received {
            let header = &self.headers[i];
            let (gro_segment, drops) = control_messages(&header.msg_hdr);
            self.meta[i] = RecvMeta {
                len: header.msg_len as usize,
                gro_segment,
                drops,
                buffers: self.used[i],
                truncated: header.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                peer: sockaddr_to_std(&self.names[i]),
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

/// Most segments the kernel accepts in one UDP GSO send (`UDP_MAX_SEGMENTS`).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes one GSO send may carry (an IPv4 datagram's limit, with headroom).
const GSO_MAX_BYTES: usize = 65_000;
/// Room for one `UDP_SEGMENT` control message.
const GSO_CONTROL_LEN: usize = 32;

/// Reusable `sendmmsg` state. With GSO on, runs of equal-size datagrams go
/// out as one message with a `UDP_SEGMENT` size, which the kernel (or NIC)
/// cuts back into datagrams: one trip through the stack per run instead of
/// per datagram.
pub(crate) struct SendBatch {
    headers: Vec<libc::mmsghdr>,
    iovecs: Vec<libc::iovec>,
    controls: Vec<[u64; GSO_CONTROL_LEN / 8]>,
    datagrams_in: Vec<usize>,
    gso: bool,
    /// Largest datagram GSO may carry: a segment must fit the path MTU.
    gso_max_segment: usize,
}

// SAFETY: as for RecvBatch: every pointer in the headers is rewritten by
// each `send` and points at this value's arrays or at the burst being sent
// during that call only; a TX task moves to its worker thread with it.
unsafe impl Send for SendBatch {}

impl std::fmt::Debug for SendBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendBatch").field("messages", &self.headers.len()).field("gso", &self.gso).finish()
    }
}

/// One message being built: a run of datagrams of `segment` bytes.
#[derive(Clone, Copy)]
struct Run {
    first_iovec: usize,
    iovecs: usize,
    datagrams: usize,
    bytes: usize,
    segment: usize,
    closed: bool,
}

impl SendBatch {
    /// Room for `messages` messages per call, each up to 64 datagrams of
    /// `max_pieces` pieces when `gso` is on.
    pub(crate) fn new(messages: usize, max_pieces: usize, gso_max_segment: Option<usize>) -> Self {
        let gso = gso_max_segment.is_some();
        // SAFETY: all-zero bytes are a valid mmsghdr and iovec.
        let (header, iovec) = unsafe { (zeroed::<libc::mmsghdr>(), zeroed::<libc::iovec>()) };
        let per_message = if gso { GSO_MAX_SEGMENTS } else { 1 } * max_pieces;
        Self {
            headers: vec![header; messages],
            iovecs: vec![iovec; messages * per_message],
            controls: vec![[0; GSO_CONTROL_LEN / 8]; messages],
            datagrams_in: vec![0; messages],
            gso,
            gso_max_segment: gso_max_segment.unwrap_or(0),
        }
    }

    /// Whether GSO is in use.
    pub(crate) fn gso(&self) -> bool {
        self.gso
    }

    /// Turns GSO off (the kernel refused it).
    pub(crate) fn disable_gso(&mut self) {
        self.gso = false;
    }

    /// Sends datagrams (each a list of pieces sent back to back) on a
    /// connected socket, or to `dest`. Returns how many datagrams the kernel
    /// took, which may be fewer than given; call again with the rest.
    pub(crate) fn send<'a, D>(
        &mut self,
        socket: BorrowedFd<'_>,
        dest: Option<&socket2::SockAddr>,
        datagrams: impl Iterator<Item = D>,
    ) -> io::Result<usize>
    where
        D: Iterator<Item = &'a [u8]>,
    {
        let max_pieces = self.iovecs.len() / self.headers.len() / if self.gso { GSO_MAX_SEGMENTS } else { 1 };
        let mut runs = 0;
        let mut current: Option<Run> = None;
        let mut next_iovec = 0;
        for pieces in datagrams {
            if next_iovec + max_pieces > self.iovecs.len() {
                break;
            }
            let first = next_iovec;
            let mut len = 0;
            for piece in pieces.take(max_pieces) {
                self.iovecs[next_iovec] =
                    libc::iovec { iov_base: piece.as_ptr().cast_mut().cast(), iov_len: piece.len() };
                next_iovec += 1;
                len += piece.len();
            }
            let joins = current.is_some_and(|r| {
                self.gso
                    && !r.closed
                    && r.segment <= self.gso_max_segment
                    && len > 0
                    && len <= r.segment
                    && r.datagrams < GSO_MAX_SEGMENTS
                    && r.bytes + len <= GSO_MAX_BYTES
            });
            if joins {
                let r = current.as_mut().expect("checked");
                r.iovecs += next_iovec - first;
                r.datagrams += 1;
                r.bytes += len;
                r.closed = len < r.segment;
                continue;
            }
            if let Some(run) = current.take() {
                if runs == self.headers.len() {
                    // No message slot left for this datagram: it goes in the next call.
                    current = Some(run);
                    break;
                }
                self.finish(runs, run, dest);
                runs += 1;
            }
            if runs == self.headers.len() {
                break;
            }
            current = Some(Run {
                first_iovec: first,
                iovecs: next_iovec - first,
                datagrams: 1,
                bytes: len,
                segment: len,
                closed: false,
            });
        }
        if let Some(run) = current
            && runs < self.headers.len()
        {
            self.finish(runs, run, dest);
            runs += 1;
        }
        if runs == 0 {
            return Ok(0);
        }
        // SAFETY: headers[..runs] point at iovecs and control buffers owned by
        // self, the iovecs at the `'a` slices (alive for this call), and
        // msg_name at `dest` (borrowed for this call); the kernel only reads them.
        let sent = unsafe { libc::sendmmsg(socket.as_raw_fd(), self.headers.as_mut_ptr(), runs as libc::c_uint, 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(self.datagrams_in[..sent as usize].iter().sum())
    }

    fn finish(&mut self, slot: usize, run: Run, dest: Option<&socket2::SockAddr>) {
        self.datagrams_in[slot] = run.datagrams;
        let header = &mut self.headers[slot].msg_hdr;
        header.msg_iov = &raw mut self.iovecs[run.first_iovec];
        header.msg_iovlen = run.iovecs;
        header.msg_name = dest.map_or(std::ptr::null_mut(), |d| d.as_ptr().cast_mut().cast());
        header.msg_namelen = dest.map_or(0, |d| d.len());
        if run.datagrams > 1 {
            header.msg_control = self.controls[slot].as_mut_ptr().cast();
            header.msg_controllen = GSO_CONTROL_LEN;
            // SAFETY: msg_control points at GSO_CONTROL_LEN bytes owned by self,
            // enough for one cmsg carrying a u16 (CMSG_SPACE(2) = 24).
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(header);
                (*cmsg).cmsg_level = libc::SOL_UDP;
                (*cmsg).cmsg_type = libc::UDP_SEGMENT;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), run.segment as u16);
                header.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as usize;
            }
        } else {
            header.msg_control = std::ptr::null_mut();
            header.msg_controllen = 0;
        }
    }
}

/// Reads `UDP_GRO` (the segment size of a coalesced run) and
/// `SO_RXQ_OVFL` (the drop counter as the message was queued; 0 when absent).
fn control_messages(header: &libc::msghdr) -> (Option<usize>, u32) {
    let (mut segment, mut drops) = (None, 0);
    if header.msg_controllen == 0 || header.msg_control.is_null() {
        return (segment, drops);
    }
    // SAFETY: the kernel filled msg_control with msg_controllen bytes of cmsgs;
    // the CMSG_* macros walk exactly that range, and each payload read matches
    // the type the kernel documents for that cmsg.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(header);
        while !cmsg.is_null() {
            match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                (libc::SOL_UDP, libc::UDP_GRO) => {
                    segment = Some(std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>()) as usize);
                }
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                    drops = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<u32>());
                }
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(header, cmsg);
        }
    }
    (segment, drops)
}

fn sockaddr_to_std(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which fits in it.
            let v4 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr)),
                u16::from_be(v4.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6, which fits in it.
            let v6 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(v6.sin6_addr.s6_addr),
                u16::from_be(v6.sin6_port),
                v6.sin6_flowinfo,
                v6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn set_int_option(socket: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int with its exact size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Sets any option from its bytes, as `setsockopt(2)` takes them.
pub(crate) fn set_option(
    socket: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &[u8],
) -> io::Result<()> {
    let len = libc::socklen_t::try_from(value.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: passes a live buffer with its exact length; the kernel copies it.
    let rc = unsafe { libc::setsockopt(socket.as_raw_fd(), level, name, value.as_ptr().cast(), len) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Reads any option's bytes (at most 256), as `getsockopt(2)` gives them.
pub(crate) fn get_option(socket: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int) -> io::Result<Vec<u8>> {
    let mut value = vec![0u8; 256];
    let mut len = value.len() as libc::socklen_t;
    // SAFETY: a live buffer of `len` bytes and a live length the kernel updates.
    let rc = unsafe { libc::getsockopt(socket.as_raw_fd(), level, name, value.as_mut_ptr().cast(), &raw mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    value.truncate(len as usize);
    Ok(value)
}

/// The path MTU of a connected socket (`IP_MTU` / `IPV6_MTU`).
pub(crate) fn path_mtu(socket: BorrowedFd<'_>, ipv6: bool) -> io::Result<usize> {
    let (level, name) = if ipv6 { (libc::IPPROTO_IPV6, libc::IPV6_MTU) } else { (libc::IPPROTO_IP, libc::IP_MTU) };
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value and len are live locals of the sizes passed.
    let rc = unsafe { libc::getsockopt(socket.as_raw_fd(), level, name, (&raw mut value).cast(), &raw mut len) };
    if rc == 0 { Ok(value as usize) } else { Err(io::Error::last_os_error()) }
}

/// A socket's receive-side memory, from `SO_MEMINFO`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SocketMemory {
    /// Bytes queued for reading.
    pub(crate) rx_backlog: u32,
    /// The receive buffer's size.
    pub(crate) rx_buffer: u32,
    /// Cumulative datagrams dropped on a full receive buffer.
    pub(crate) drops: u32,
}

/// Reads `SO_MEMINFO`: one call per poll costs less than the `SO_RXQ_OVFL`
/// control message on every datagram.
pub(crate) fn socket_memory(socket: BorrowedFd<'_>) -> io::Result<SocketMemory> {
    let mut info = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
    let mut len = size_of_val(&info) as libc::socklen_t;
    // SAFETY: info and len are live locals; the kernel writes at most len bytes.
    let rc = unsafe {
        libc::getsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_MEMINFO, info.as_mut_ptr().cast(), &raw mut len)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(SocketMemory {
        rx_backlog: info[libc::SK_MEMINFO_RMEM_ALLOC as usize],
        rx_buffer: info[libc::SK_MEMINFO_RCVBUF as usize],
        drops: info[libc::SK_MEMINFO_DROPS as usize],
    })
}

/// What a receiving socket asks of the kernel: each message stamped with
/// the socket's drop counter as it was queued (`SO_RXQ_OVFL`, which says
/// where in the stream the kernel dropped; without it drops are still
/// counted from the counter, less precisely), and coalesced runs (UDP GRO),
/// where the kernel has them: whether it does.
pub(crate) fn prepare_receive(socket: BorrowedFd<'_>) -> bool {
    let _ = set_int_option(socket, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1);
    set_int_option(socket, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok()
}

/// Raises the receive buffer past `net.core.rmem_max` where privileges allow.
pub(crate) fn force_receive_buffer(socket: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes.min(i32::MAX as usize) as libc::c_int)
}

/// Raises the send buffer past `net.core.wmem_max` where privileges allow.
pub(crate) fn force_send_buffer(socket: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, bytes.min(i32::MAX as usize) as libc::c_int)
}

/// Reads what a stream socket has, without blocking (`MSG_DONTWAIT`), into
/// initialised bytes (socket2's `recv` takes uninitialised ones).
pub(crate) fn recv_nowait(socket: BorrowedFd<'_>, into: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the kernel writes at most into.len() bytes into the live slice.
    let rc = unsafe { libc::recv(socket.as_raw_fd(), into.as_mut_ptr().cast(), into.len(), libc::MSG_DONTWAIT) };
    if rc >= 0 { Ok(rc as usize) } else { Err(io::Error::last_os_error()) }
}

/// Waits until `socket` is readable (or has a connection to accept), at
/// most `timeout`; whether it is.
pub(crate) fn wait_readable(socket: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    let mut entry = libc::pollfd { fd: socket.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // ppoll, not poll: timeouts are often under a millisecond.
    let limit = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos().into() };
    // SAFETY: one live pollfd (the count passed is one), a live timespec, no signal mask.
    let rc = unsafe { libc::ppoll(&raw mut entry, 1, &raw const limit, std::ptr::null()) };
    match rc {
        0 => Ok(false),
        n if n > 0 => Ok(true),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    /// A socket whose small buffer overflowed hands over the messages it
    /// kept, each stamped with the drops queued before it.
    #[test]
    fn received_messages_carry_the_drops_before_them() {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        prepare_receive(receiver.as_fd());
        set_int_option(receiver.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 4096).unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..200 {
            sender.send_to(&[7u8; 1000], receiver.local_addr().unwrap()).unwrap();
        }
        let dropped = socket_memory(receiver.as_fd()).unwrap().drops;
        assert!(dropped > 0, "the buffer overflowed");
        let mut batch = RecvBatch::new(64, 1, 0);
        let mut buffers = vec![[0u8; 2048]; 64];
        let got = batch.recv(receiver.as_fd(), buffers.iter_mut().map(|b| &mut b[..]), 2048, false).unwrap();
        assert!(!got.is_empty());
        // Everything kept was queued before the first drop (the buffer was
        // never read), so no message carries a stamp yet...
        assert!(got.iter().all(|m| m.drops == 0), "{:?}", got.iter().map(|m| m.drops).collect::<Vec<_>>());
        // ...and one sent after the drops carries all of them.
        sender.send_to(&[8u8; 1000], receiver.local_addr().unwrap()).unwrap();
        let got = batch.recv(receiver.as_fd(), buffers.iter_mut().map(|b| &mut b[..]), 2048, true).unwrap();
        assert_eq!(got.last().map(|m| m.drops), Some(dropped), "the stamp is the counter as it was queued");
    }
}
