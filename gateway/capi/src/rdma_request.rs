//! What makes a TX burst handle an RDMA request (`rdma_set_header`): the
//! operation and its work request id, kept on the handle (rdma.rs posts
//! and completes it), and what C reads of it (`burst->transport_hdr`).

use std::ffi::{c_char, c_void};

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

/// The part of DAQIRI's `burst->transport_hdr` past the fields it shares
/// with `burst->hdr.hdr` (c_api.h lays the two over each other): what
/// `rdma_set_header` made of the burst, and how its completion went.
/// Zero for a burst that is no RDMA request.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TransportFields {
    /// 1 for an RDMA request or completion (this layout), 0 for any other burst.
    pub version: u8,
    /// The request is on a server's connection.
    pub server: bool,
    /// A SEND (the device reads the buffers), not a RECEIVE.
    pub tx: bool,
    /// [`OpCode`], by number.
    pub opcode: i32,
    /// `SUCCESS`, or `GENERIC_FAILURE` for a completion with a work request that failed.
    pub status: i32,
    /// The request's work request id.
    pub wr_id: u64,
    /// The connection id the request is for.
    pub conn_id: usize,
    /// The region the request sends from or receives into, NUL-terminated (cut to 31 bytes).
    pub local_mr_name: [c_char; 32],
    /// For RDMA WRITE and READ, which libdaqiri refuses: always empty.
    pub remote_mr_name: [c_char; 32],
    /// For RDMA WRITE and READ: always null.
    pub raddr: *mut c_void,
    /// For RDMA WRITE and READ: always 0.
    pub dst_key: u64,
    /// For requests with immediate data: always 0.
    pub imm: u32,
    /// Unused by SEND and RECEIVE: always 0.
    pub server_addr: u32,
    /// Unused by SEND and RECEIVE: always 0.
    pub server_port: u16,
}

impl TransportFields {
    pub(crate) const NONE: Self = Self {
        version: 0,
        server: false,
        tx: false,
        opcode: 0,
        status: 0,
        wr_id: 0,
        conn_id: 0,
        local_mr_name: [0; 32],
        remote_mr_name: [0; 32],
        raddr: std::ptr::null_mut(),
        dst_key: 0,
        imm: 0,
        server_addr: 0,
        server_port: 0,
    };

    /// What C reads of `request` on connection `conn_id`, sending from or
    /// receiving into `region`; its status `SUCCESS` until it completes.
    pub(crate) fn of(request: &Request, conn_id: usize, server: bool, region: &str) -> Self {
        let mut local_mr_name = [0; 32];
        for (to, &from) in local_mr_name.iter_mut().zip(&region.as_bytes()[..region.len().min(31)]) {
            *to = from as c_char;
        }
        Self {
            version: 1,
            server,
            tx: request.op == OpCode::Send,
            opcode: request.op as i32,
            status: crate::status::SUCCESS,
            wr_id: request.wr_id,
            conn_id,
            local_mr_name,
            ..Self::NONE
        }
    }
}
