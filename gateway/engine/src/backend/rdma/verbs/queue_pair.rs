//! A queue pair brought up by hand, as an instrument's receiver: no
//! `rdma_cm` connection, the peer's queue pair number, first PSN and GID
//! come from config, and the queue pair goes to ready-to-receive (RTR).
//! A UC receiver stops there, as an FPGA's host side does; an RC one goes
//! on to ready-to-send so its acknowledgements flow.

use std::ffi::CStr;
use std::io;
use std::ptr::NonNull;

use rdma_sys as sys;

use super::{CmId, CompletionQueue, ProtectionDomain, last_error, post_receive_on, qp_to_error};

/// The device and port an id bound to our address found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DevicePort {
    context: NonNull<sys::ibv_context>,
    pub(crate) port_num: u8,
}

impl DevicePort {
    /// The device port of `id`, bound to a local address (`None` for a wildcard).
    pub(crate) fn of(id: &CmId) -> Option<Self> {
        Some(Self { context: id.verbs()?, port_num: id.port_num() })
    }

    /// The device's verbs context (opened by rdma_cm for the id).
    pub(crate) fn context(&self) -> NonNull<sys::ibv_context> {
        self.context
    }

    /// The device's name (`rxe0`, `mlx5_0`): its sysfs directory.
    pub(crate) fn device_name(&self) -> String {
        // SAFETY: the context is live (its id is held by the caller's
        // device) and names its device; the name is a C string it owns.
        unsafe { CStr::from_ptr(sys::ibv_get_device_name(self.context.as_ref().device)) }.to_string_lossy().into_owned()
    }
}

/// Where a hand-made queue pair receives from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rtr {
    /// `IBV_QPT_UC` or `IBV_QPT_RC`.
    pub(crate) qp_type: u32,
    pub(crate) port: DevicePort,
    /// Our GID's index in the port's table (the RoCE v2 entry of our address).
    pub(crate) gid_index: u8,
    pub(crate) peer_gid: [u8; 16],
    pub(crate) peer_qpn: u32,
    pub(crate) peer_psn: u32,
    /// Path MTU in bytes (256 to 4096).
    pub(crate) mtu: u32,
}

/// A queue pair not owned by an `rdma_cm` id, and where it receives from.
#[derive(Debug)]
pub(crate) struct QueuePair {
    qp: NonNull<sys::ibv_qp>,
    rtr: Rtr,
}

// SAFETY: as for the other verbs objects; one task posts on it.
unsafe impl Send for QueuePair {}
// SAFETY: as above.
unsafe impl Sync for QueuePair {}

impl QueuePair {
    /// A queue pair on `pd` whose completions go to `cq`, with `depth`
    /// receive slots, moved through INIT to RTR (RTS for RC) towards `rtr`.
    pub(crate) fn ready_to_receive(
        pd: &ProtectionDomain,
        cq: &CompletionQueue,
        depth: u32,
        rtr: &Rtr,
    ) -> io::Result<Self> {
        // SAFETY: all-zero is a valid init attribute block; the fields we need are set.
        let mut init: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = cq.0.as_ptr();
        init.recv_cq = cq.0.as_ptr();
        init.qp_type = rtr.qp_type;
        init.cap.max_send_wr = 1;
        init.cap.max_recv_wr = depth;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        // SAFETY: the domain and queue are live; the attributes are filled.
        let qp = NonNull::new(unsafe { sys::ibv_create_qp(pd.0.as_ptr(), &mut init) })
            .map(|qp| Self { qp, rtr: *rtr })
            .ok_or_else(|| last_error(&format!("ibv_create_qp with {depth} receive slots")))?;
        qp.bring_up()?;
        Ok(qp)
    }

    /// Through INIT to RTR, and on to RTS for RC.
    fn bring_up(&self) -> io::Result<()> {
        self.modify(sys::ibv_qp_state::IBV_QPS_INIT)?;
        self.modify(sys::ibv_qp_state::IBV_QPS_RTR)?;
        if self.rtr.qp_type == sys::ibv_qp_type::IBV_QPT_RC {
            self.modify(sys::ibv_qp_state::IBV_QPS_RTS)?;
        }
        Ok(())
    }

    /// Back from the error state as new: through RESET (which drops every
    /// receive still posted) and up again, expecting the peer's first PSN
    /// once more. Its number stays, so the sender needs no new programme.
    pub(crate) fn restart(&self) -> io::Result<()> {
        self.modify(sys::ibv_qp_state::IBV_QPS_RESET)?;
        self.bring_up()
    }

    fn modify(&self, state: sys::ibv_qp_state::Type) -> io::Result<()> {
        let rtr = &self.rtr;
        use sys::ibv_qp_attr_mask as mask;
        // SAFETY: all-zero attributes are valid; the masked fields are set below.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = state;
        let fields = match state {
            sys::ibv_qp_state::IBV_QPS_INIT => {
                attr.port_num = rtr.port.port_num;
                attr.pkey_index = 0;
                attr.qp_access_flags = sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
                mask::IBV_QP_STATE.0 | mask::IBV_QP_PKEY_INDEX.0 | mask::IBV_QP_PORT.0 | mask::IBV_QP_ACCESS_FLAGS.0
            }
            sys::ibv_qp_state::IBV_QPS_RESET => mask::IBV_QP_STATE.0,
            sys::ibv_qp_state::IBV_QPS_RTR => {
                attr.path_mtu = mtu_enum(rtr.mtu);
                attr.dest_qp_num = rtr.peer_qpn;
                attr.rq_psn = rtr.peer_psn;
                attr.ah_attr.is_global = 1;
                attr.ah_attr.port_num = rtr.port.port_num;
                attr.ah_attr.grh.dgid.raw = rtr.peer_gid;
                attr.ah_attr.grh.sgid_index = rtr.gid_index;
                attr.ah_attr.grh.hop_limit = 64;
                let common = mask::IBV_QP_STATE.0
                    | mask::IBV_QP_AV.0
                    | mask::IBV_QP_PATH_MTU.0
                    | mask::IBV_QP_DEST_QPN.0
                    | mask::IBV_QP_RQ_PSN.0;
                if rtr.qp_type == sys::ibv_qp_type::IBV_QPT_RC {
                    attr.max_dest_rd_atomic = 1;
                    attr.min_rnr_timer = 12;
                    common | mask::IBV_QP_MAX_DEST_RD_ATOMIC.0 | mask::IBV_QP_MIN_RNR_TIMER.0
                } else {
                    common
                }
            }
            _ => {
                attr.timeout = 14;
                attr.retry_cnt = 7;
                attr.rnr_retry = 7;
                attr.max_rd_atomic = 1;
                mask::IBV_QP_STATE.0
                    | mask::IBV_QP_TIMEOUT.0
                    | mask::IBV_QP_RETRY_CNT.0
                    | mask::IBV_QP_RNR_RETRY.0
                    | mask::IBV_QP_SQ_PSN.0
                    | mask::IBV_QP_MAX_QP_RD_ATOMIC.0
            }
        };
        // SAFETY: the queue pair is live; `fields` names what `attr` sets.
        let rc = unsafe { sys::ibv_modify_qp(self.qp.as_ptr(), &mut attr, fields as i32) };
        if rc != 0 {
            let e = io::Error::from_raw_os_error(rc);
            return Err(io::Error::new(e.kind(), format!("ibv_modify_qp to state {state}: {e}")));
        }
        Ok(())
    }

    /// The number a sender addresses its packets to.
    pub(crate) fn qpn(&self) -> u32 {
        // SAFETY: the queue pair is valid.
        unsafe { self.qp.as_ref().qp_num }
    }

    /// Posts one receive without a buffer, tagged `wr_id`: a WRITE with
    /// immediate consumes it for its completion only.
    pub(crate) fn post_empty_receive(&self, wr_id: u64) -> io::Result<()> {
        post_receive_on(self.qp.as_ptr(), wr_id, None)
    }

    /// To the error state: outstanding receives complete as flushed.
    pub(crate) fn to_error(&self) {
        qp_to_error(self.qp.as_ptr());
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: the queue pair is live; its queue and domain outlive it (owners' field order).
        unsafe { sys::ibv_destroy_qp(self.qp.as_ptr()) };
    }
}

/// `ibv_mtu` of a path MTU in bytes (validated: 256 to 4096, a power of two).
fn mtu_enum(bytes: u32) -> sys::ibv_mtu::Type {
    match bytes {
        256 => sys::ibv_mtu::IBV_MTU_256,
        512 => sys::ibv_mtu::IBV_MTU_512,
        2048 => sys::ibv_mtu::IBV_MTU_2048,
        4096 => sys::ibv_mtu::IBV_MTU_4096,
        _ => sys::ibv_mtu::IBV_MTU_1024,
    }
}
