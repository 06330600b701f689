//! A whole-body deadline: a request body must have arrived in full within
//! [`BODY_TIMEOUT`] of its header. tower-http's
//! body timeout restarts at every frame, so a body dripped a byte at a time
//! would hold its connection slot forever.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// Time a client has to send a request's body once its header arrived.
pub(crate) const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What a body past its deadline fails with; `error::json_errors` answers 408 on it.
pub(crate) const TIMED_OUT: &str = "the request body did not arrive in full within its deadline";

/// Gives `request`'s body the deadline, counted from now.
pub(crate) async fn with_deadline(request: Request) -> Request {
    request.map(|body| Body::new(Deadline { inner: body, until: Box::pin(tokio::time::sleep_until(deadline())) }))
}

fn deadline() -> Instant {
    Instant::now() + BODY_TIMEOUT
}

struct Deadline {
    inner: Body,
    until: Pin<Box<Sleep>>,
}

impl http_body::Body for Deadline {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if self.until.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(axum::Error::new(TIMED_OUT))));
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
