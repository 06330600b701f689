//! The engine's one error type. Each error carries the DAQIRI status it maps
//! to, so C++ users find the names they know (`NO_FREE_PACKET_BUFFERS`, ...).

use std::fmt;
use std::sync::Arc;

/// DAQIRI status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Burst or internal pointer not initialised / no data ready.
    NullPtr,
    /// Burst metadata pool exhausted (raise `rx_meta_buffers`/`tx_meta_buffers`).
    NoFreeBurstBuffers,
    /// Packet buffer pool exhausted (free bursts faster or raise `num_bufs`).
    NoFreePacketBuffers,
    /// The engine is not initialised, or a peer is not connected yet.
    NotReady,
    /// An argument is invalid.
    InvalidParameter,
    /// A ring or queue is full.
    NoSpaceAvailable,
    /// Not supported by this backend or build.
    NotSupported,
    /// Unspecified failure.
    GenericFailure,
    /// A connection could not be made.
    ConnectFailure,
    /// An internal error in a backend.
    InternalError,
}

impl Status {
    /// DAQIRI's spelling of the status.
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::NullPtr => "NULL_PTR",
            Status::NoFreeBurstBuffers => "NO_FREE_BURST_BUFFERS",
            Status::NoFreePacketBuffers => "NO_FREE_PACKET_BUFFERS",
            Status::NotReady => "NOT_READY",
            Status::InvalidParameter => "INVALID_PARAMETER",
            Status::NoSpaceAvailable => "NO_SPACE_AVAILABLE",
            Status::NotSupported => "NOT_SUPPORTED",
            Status::GenericFailure => "GENERIC_FAILURE",
            Status::ConnectFailure => "CONNECT_FAILURE",
            Status::InternalError => "INTERNAL_ERROR",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An engine error: a DAQIRI status, a message that says what to do, and
/// the system error behind it where there is one. The system error is part
/// of the message ([`detail`](Self::detail)), not a `source()`, so error
/// chains (`{:#}`) print it once.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status}: {}", self.detail())]
pub struct Error {
    /// The DAQIRI status.
    pub status: Status,
    /// What went wrong and how to fix it.
    pub message: String,
    /// The failed system call's error (shared, so the error stays `Clone`).
    os_error: Option<Arc<std::io::Error>>,
}

impl Error {
    /// An error with a status and message.
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        Self { status, message: message.into(), os_error: None }
    }

    /// The message with the system error behind it, for people to read.
    pub fn detail(&self) -> String {
        match &self.os_error {
            Some(os_error) => format!("{}: {os_error}", self.message),
            None => self.message.clone(),
        }
    }

    /// The system error behind this one, if any (to match on its kind).
    pub fn io_error(&self) -> Option<&std::io::Error> {
        self.os_error.as_deref()
    }

    /// An `INVALID_PARAMETER` error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Status::InvalidParameter, message)
    }

    pub(crate) fn io(status: Status, context: impl fmt::Display, err: std::io::Error) -> Self {
        Self { status, message: context.to_string(), os_error: Some(Arc::new(err)) }
    }
}

impl From<daqiri_config::Report> for Error {
    fn from(report: daqiri_config::Report) -> Self {
        if report.only_not_supported() {
            return Self::new(Status::NotSupported, format!("this build cannot honour the config:\n{report}"));
        }
        Self::new(Status::InvalidParameter, format!("invalid config:\n{report}"))
    }
}

/// Result with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
