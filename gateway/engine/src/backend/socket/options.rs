//! Socket options the application sets (DAQIRI's `socket_setsockopt`):
//! applied to the interface's live sockets at once, and kept, so a socket
//! the interface opens later (a TCP connection accepted or made again, a
//! UDP server's socket connected to its peer) gets them too.

use std::os::fd::BorrowedFd;
use std::sync::Mutex;

use super::sys;
use crate::error::{Error, Result, Status};

#[derive(Debug, Default)]
pub(super) struct SocketOptions {
    set: Mutex<Vec<(i32, i32, Vec<u8>)>>,
}

impl SocketOptions {
    /// Sets option (`level`, `name`) to `value` on each socket `live` gives
    /// (asked under the lock [`apply`](Self::apply) takes, so a socket is
    /// either live here or opened after and given it there); a socket that
    /// refuses it fails the call with the kernel's reason, and the option
    /// is not kept.
    pub(super) fn set(
        &self,
        live: impl FnOnce(&mut dyn FnMut(BorrowedFd<'_>) -> Result<()>) -> Result<()>,
        level: i32,
        name: i32,
        value: &[u8],
    ) -> Result<()> {
        let mut set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        live(&mut |socket| {
            sys::set_option(socket, level, name, value).map_err(|e| {
                Error::io(
                    Status::GenericFailure,
                    format!("setsockopt(level {level}, option {name}, {} bytes)", value.len()),
                    e,
                )
            })
        })?;
        set.retain(|&(l, n, _)| (l, n) != (level, name));
        set.push((level, name, value.to_vec()));
        Ok(())
    }

    /// Gives a socket just made live (where `set` finds it) every option set so far.
    pub(super) fn apply(&self, interface: &str, socket: BorrowedFd<'_>) {
        for (level, name, value) in self.set.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            if let Err(e) = sys::set_option(socket, *level, *name, value) {
                tracing::warn!(interface, level, name, "a socket option set earlier is refused by a new socket: {e}");
            }
        }
    }
}

/// Option (`level`, `name`) of `socket`, as the kernel holds it.
pub(super) fn read(socket: BorrowedFd<'_>, level: i32, name: i32) -> Result<Vec<u8>> {
    sys::get_option(socket, level, name)
        .map_err(|e| Error::io(Status::GenericFailure, format!("getsockopt(level {level}, option {name})"), e))
}
