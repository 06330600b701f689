//! The errors a RoCE port fails to open with, naming what it asked for.

use crate::error::{Error, Status};
use crate::port::Port;

/// What this build of the backend does not do.
pub(super) fn refused(message: String) -> Error {
    Error::new(Status::NotSupported, message)
}

/// What the host could not do for RoCE interface `port`, and why.
pub(super) fn invalid(port: &Port, why: impl std::fmt::Display) -> Error {
    Error::new(Status::InvalidParameter, format!("RoCE interface \"{}\": {why}", port.name))
}
