//! The subscription for async code (tokio): the same bursts, awaited
//! rather than waited for on a thread.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::client::{Burst, Options, Subscription};
use crate::error::Error;
use crate::protocol::Target;

/// A [`Subscription`] whose bursts are awaited.
#[derive(Debug)]
pub struct AsyncSubscription {
    inner: Subscription,
    /// Copies of the doorbell and the socket, registered with the runtime.
    doorbell: AsyncFd<OwnedFd>,
    socket: AsyncFd<OwnedFd>,
}

impl AsyncSubscription {
    /// Subscribes as [`Subscription::connect`] does, off the runtime's threads.
    pub async fn connect(path: impl Into<PathBuf>, target: Target, options: Options) -> Result<Self, Error> {
        let path = path.into();
        let inner = tokio::task::spawn_blocking(move || Subscription::connect(path, target, options))
            .await
            .map_err(|e| Error::Io(std::io::Error::other(e)))??;
        let (doorbell, socket) = inner.wake_fds();
        let register = |fd: OwnedFd| {
            // SAFETY: an owned descriptor, open and the same for as long as the AsyncFd holds it.
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| Error::Io(e.into()))
        };
        let (doorbell, socket) = (register(doorbell.try_clone()?)?, register(socket.try_clone()?)?);
        Ok(Self { inner, doorbell, socket })
    }

    /// The subscription's id.
    pub fn id(&self) -> u64 {
        self.inner.id()
    }

    /// The next burst. Ends with [`Error::Ended`] once the gateway ended the
    /// subscription and every burst delivered before was taken.
    pub async fn next(&self) -> Result<Burst<'_>, Error> {
        loop {
            if let Some(burst) = self.inner.try_next() {
                return Ok(burst);
            }
            if !self.inner.going_to_sleep() {
                continue;
            }
            tokio::select! {
                rang = self.doorbell.readable() => {
                    rang?.clear_ready();
                    self.inner.clear_doorbell();
                }
                spoke = self.socket.readable() => {
                    let mut guard = spoke?;
                    if self.inner.try_next_is_none() {
                        guard.clear_ready();
                        return Err(self.inner.why_ended());
                    }
                }
            }
        }
    }
}

impl AsFd for AsyncSubscription {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.as_fd()
    }
}
