//! One message over a `SOCK_SEQPACKET` Unix socket, with descriptors
//! passed alongside (`SCM_RIGHTS`), for both ends of the consumer socket.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};

use crate::protocol::MAX_MESSAGE;

/// The most descriptors one message carries.
pub const MAX_DESCRIPTORS: usize = 64;

/// Sends `message` with `fds`.
pub fn send(socket: impl AsFd, message: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_DESCRIPTORS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other(format!("{} descriptors are more than one message carries", fds.len())));
    }
    rustix::net::sendmsg(socket, &[IoSlice::new(message)], &mut control, SendFlags::NOSIGNAL)?;
    Ok(())
}

/// Receives one message and the descriptors it carried; `None` once the
/// other end closed. A message longer than [`MAX_MESSAGE`] is an error.
pub fn receive(socket: impl AsFd) -> std::io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut buffer = vec![0u8; MAX_MESSAGE];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_DESCRIPTORS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut buffer)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::TRUNC,
    )?;
    let fds: Vec<OwnedFd> = control
        .drain()
        .flat_map(|message| match message {
            RecvAncillaryMessage::ScmRights(fds) => fds.collect::<Vec<_>>(),
            _ => Vec::new(),
        })
        .collect();
    if received.bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    if received.bytes > MAX_MESSAGE || received.flags.contains(rustix::net::ReturnFlags::CTRUNC) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "a message longer than the protocol allows"));
    }
    buffer.truncate(received.bytes);
    Ok(Some((buffer, fds)))
}
