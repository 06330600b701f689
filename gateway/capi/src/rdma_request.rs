//! What makes a TX burst handle an RDMA request (`rdma_set_header`): the
//! operation and its work request id, kept on the handle (rdma.rs posts
//! and completes it).

use daqiri::{Error, Status};

/// DAQIRI's `RDMAOpCode`, by its numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum OpCode {
    /// Connection set-up (no request).
    Connect = 0,
    /// A SEND.
    Send = 1,
    /// A receive.
    Receive = 2,
    /// An RDMA WRITE.
    RdmaWrite = 3,
    /// An RDMA WRITE with immediate.
    RdmaWriteImm = 4,
    /// An RDMA READ.
    RdmaRead = 5,
    /// An RDMA READ with immediate.
    RdmaReadImm = 6,
    /// Not a request.
    Invalid = 7,
}

impl OpCode {
    pub(crate) fn from_c(op: i32) -> daqiri::Result<Self> {
        Ok(match op {
            1 => Self::Send,
            2 => Self::Receive,
            3..=6 => {
                return Err(Error::new(
                    Status::NotSupported,
                    format!(
                        "op_code {op} (an RDMA WRITE or READ): libdaqiri posts SEND and RECEIVE requests only; the engine's Rust API writes and reads the peer's memory by address (Burst::set_rdma_write, set_rdma_read)"
                    ),
                ));
            }
            _ => return Err(Error::invalid(format!("op_code {op} is not a request: SEND (1) or RECEIVE (2)"))),
        })
    }
}

/// What `rdma_set_header` made of a TX burst handle.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    pub(crate) op: OpCode,
    pub(crate) wr_id: u64,
    /// A RECEIVE request `get_tx_packet_burst` readied (it takes no buffer).
    pub(crate) armed: bool,
}

impl Request {
    pub(crate) fn is_receive(&self) -> bool {
        self.op == OpCode::Receive
    }
}
