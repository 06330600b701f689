//! The kernel buffers the gateway asks for on its sockets.

use std::os::fd::AsFd;

use socket2::Socket;

use super::sys;

/// Kernel receive and send buffers: big enough to absorb bursts while a
/// worker is descheduled.
pub(super) const SOCKET_BUFFER_BYTES: usize = 64 << 20;

/// Sets a UDP socket's buffers to [`SOCKET_BUFFER_BYTES`]: FORCE works for
/// privileged processes, the plain call is the fallback.
pub(super) fn tune(socket: &Socket) {
    if sys::force_receive_buffer(socket.as_fd(), SOCKET_BUFFER_BYTES).is_err() {
        let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
    }
    if sys::force_send_buffer(socket.as_fd(), SOCKET_BUFFER_BYTES).is_err() {
        let _ = socket.set_send_buffer_size(SOCKET_BUFFER_BYTES);
    }
}
