//! Which way a queue moves packets: its own module because bursts, queues
//! and the GPU stagers all name it and must not name each other.

/// Which way a queue moves packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Receive.
    Rx,
    /// Transmit.
    Tx,
}

impl Direction {
    /// `rx` or `tx`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Direction::Rx => "rx",
            Direction::Tx => "tx",
        }
    }
}
