//! Why a subscription could not be made, or went on no longer.

/// Why a subscription could not be made or went on no longer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket or the memory failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A system call failed.
    #[error("{0}")]
    Os(#[from] rustix::io::Errno),
    /// The gateway said no, and why.
    #[error("the gateway refused the subscription: {0}")]
    Refused(String),
    /// The gateway ended the subscription, and why (or closed the socket).
    #[error("the gateway ended the subscription: {0}")]
    Ended(String),
    /// The gateway said something this client does not understand.
    #[error("the gateway broke the protocol: {0}")]
    Protocol(String),
    /// The gateway's GPU memory cannot be mapped here, and why.
    #[error("{0}")]
    Gpu(String),
}
