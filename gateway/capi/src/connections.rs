//! Ports and socket connections: `get_port_id`, `get_num_rx_queues`, the
//! traffic switches, and DAQIRI's socket connection ids.
//!
//! Each socket interface carries one connection (the engine accepts or
//! connects on its own, as its config says), so a connection id names an
//! interface: `socket_get_server_conn_id` finds the server interface bound
//! to an address, `socket_connect_to_server` the client interface aimed at
//! one, and bursts of that id are the interface's.

use std::ffi::{c_char, c_void};
use std::net::IpAddr;

use daqiri::{Engine, Error, Status};
use daqiri_config::SocketEndpoints;
use daqiri_config::model::SocketMode;

use crate::args::port_id;
use crate::lifecycle::{Running, text, with_engine};
use crate::status::{self, SUCCESS, status_of};

/// Connection ids carry this tag above the port, so a stray integer is not
/// taken for one.
const TAG: usize = 0xDA91_0000;

/// The connection id of socket interface `port`.
pub(crate) fn conn_of(port: u16) -> usize {
    TAG | (usize::from(port) + 1)
}

/// The port a connection id names; with `server`, it must be that side's.
pub(crate) fn port_of(engine: &Running, conn_id: usize, server: Option<bool>) -> daqiri::Result<u16> {
    let not_ours = || {
        Error::invalid(format!(
            "connection id {conn_id:#x} is not one of this engine's: take it from socket_get_server_conn_id or socket_connect_to_server"
        ))
    };
    if conn_id & !0xFFFF != TAG || conn_id & 0xFFFF == 0 {
        return Err(not_ours());
    }
    let port = (conn_id & 0xFFFF) as u16 - 1;
    let mode = engine.socket_mode(usize::from(port)).ok_or_else(not_ours)?;
    if let Some(server) = server
        && server != (mode == SocketMode::Server)
    {
        let side = if server { "server" } else { "client" };
        return Err(Error::invalid(format!(
            "connection {conn_id:#x} is interface {port}'s, a socket {mode:?}, not a {side}"
        )));
    }
    Ok(port)
}

pub(crate) fn ip(what: &str, pointer: *const c_char) -> daqiri::Result<IpAddr> {
    let text = text(what, pointer)?;
    text.parse().map_err(|_| Error::invalid(format!("{what} \"{text}\" is not an IP address")))
}

/// The socket interface whose endpoints `matches` accepts.
fn find_interface(engine: &Engine, matches: impl Fn(&SocketEndpoints) -> bool) -> Option<u16> {
    let config = engine.config();
    (0..engine.num_ports()).find(|&port| config.endpoints(port).as_ref().is_some_and(&matches)).map(|port| port as u16)
}

fn write_conn(call: &str, found: daqiri::Result<u16>, conn_id: *mut usize) -> i32 {
    match found {
        Ok(_) if conn_id.is_null() => status::fail(call, Error::new(Status::NullPtr, "conn_id is a null pointer")),
        Ok(port) => {
            // SAFETY: non-null, a writable uintptr_t* by the C contract.
            unsafe { *conn_id = conn_of(port) };
            SUCCESS
        }
        Err(e) => status::fail(call, e),
    }
}

/// The connection of the socket server bound to `server_addr:server_port`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_socket_get_server_conn_id(
    server_addr: *const c_char,
    server_port: u16,
    conn_id: *mut usize,
) -> i32 {
    let found = ip("server_addr", server_addr).and_then(|addr| {
        with_engine(|engine| {
            find_interface(engine, |e| {
                e.mode == SocketMode::Server
                    && e.local.is_some_and(|l| {
                        (l.ip == addr || l.ip.is_unspecified()) && l.port.is_none_or(|p| p == server_port)
                    })
            })
            .ok_or_else(|| {
                Error::invalid(format!(
                    "no socket server interface is bound to {addr}:{server_port} (socket_config.local_addr)"
                ))
            })
        })
    });
    write_conn("socket_get_server_conn_id", found, conn_id)
}

/// The connection of the socket client aimed at `server_addr:server_port`
/// (and bound to `client_addr`, when not null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_socket_connect_to_server(
    server_addr: *const c_char,
    server_port: u16,
    client_addr: *const c_char,
    conn_id: *mut usize,
) -> i32 {
    let client = if client_addr.is_null() { Ok(None) } else { ip("client_addr", client_addr).map(Some) };
    let found = client.and_then(|client| {
        let server = ip("server_addr", server_addr)?;
        with_engine(|engine| {
            find_interface(engine, |e| {
                e.mode == SocketMode::Client
                    && e.remote.is_some_and(|r| r.ip == server && r.port == Some(server_port))
                    && client.is_none_or(|c| e.local.is_none_or(|l| l.ip == c || l.ip.is_unspecified()))
            })
            .ok_or_else(|| {
                Error::new(
                    Status::ConnectFailure,
                    format!(
                        "no socket client interface is aimed at {server}:{server_port}{} (socket_config.remote_addr, local_addr)",
                        client.map_or(String::new(), |c| format!(" from {c}"))
                    ),
                )
            })
        })
    });
    write_conn("socket_connect_to_server", found, conn_id)
}

/// The port and queue a connection's TX bursts go to (its interface's first TX queue).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_socket_get_port_queue(conn_id: usize, port: *mut u16, queue: *mut u16) -> i32 {
    const CALL: &str = "socket_get_port_queue";
    if port.is_null() || queue.is_null() {
        return status::fail(CALL, Error::new(Status::NullPtr, "port or queue is a null pointer"));
    }
    let found = with_engine(|engine| {
        let p = port_of(engine, conn_id, None)?;
        let config = engine.config();
        let interface = &config.config().interfaces[usize::from(p)];
        let first = |queues: Option<&Vec<daqiri_config::model::Queue>>| queues.and_then(|q| q.first()).map(|q| q.id);
        let q = first(interface.tx.as_ref().map(|t| &t.queues))
            .or_else(|| first(interface.rx.as_ref().map(|r| &r.queues)))
            .unwrap_or(0);
        Ok((p, q))
    });
    write_port_queue(CALL, found, port, queue)
}

/// Writes what a `*_get_port_queue` call found, or fails it.
pub(crate) fn write_port_queue(call: &str, found: daqiri::Result<(u16, u16)>, port: *mut u16, queue: *mut u16) -> i32 {
    match found {
        Ok((p, q)) => {
            // SAFETY: both checked non-null by the caller, writable uint16_t* by the C contract.
            unsafe { (*port, *queue) = (p, q) };
            SUCCESS
        }
        Err(e) => status::fail(call, e),
    }
}

/// Sets a socket option on connection `conn_id`'s sockets (DAQIRI's
/// `socket_setsockopt`): `optval` holds `optlen` bytes as `setsockopt(2)`
/// takes them. The option is kept for the sockets the interface opens later
/// (a TCP reconnect, a UDP server's peer socket); a TCP interface between
/// connections keeps it for the next, where DAQIRI answers `CONNECT_FAILURE`.
///
/// # Safety
/// `optval` points to `optlen` readable bytes (or is null with `optlen` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_socket_setsockopt(
    conn_id: usize,
    level: i32,
    optname: i32,
    optval: *const c_void,
    optlen: usize,
) -> i32 {
    if optval.is_null() && optlen != 0 {
        return status::fail("socket_setsockopt", Error::new(Status::NullPtr, "optval is null and optlen is not 0"));
    }
    let value: &[u8] = if optlen == 0 {
        &[]
    } else {
        // SAFETY: non-null, `optlen` readable bytes by the C contract.
        unsafe { std::slice::from_raw_parts(optval.cast::<u8>(), optlen) }
    };
    let set = with_engine(|engine| engine.set_socket_option(port_of(engine, conn_id, None)?, level, optname, value));
    status_of("socket_setsockopt", set)
}

/// The port of an interface name or address; -1 when none has it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_get_port_id(key: *const c_char) -> i32 {
    let found = text("the interface name or address", key).and_then(|key| {
        with_engine(|engine| {
            engine
                .get_port_id(key)
                .ok_or_else(|| Error::invalid(format!("no interface is named or addressed \"{key}\"")))
        })
    });
    match found {
        Ok(port) => i32::from(port),
        Err(e) => {
            status::fail("get_port_id", e);
            -1
        }
    }
}

/// The port's RX queues; -1 for a port that does not exist.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_get_num_rx_queues(port: i32) -> i32 {
    let found = with_engine(|engine| {
        let p = port_id(port)?;
        let config = engine.config();
        let interface = config.config().interfaces.get(usize::from(p)).ok_or_else(|| {
            Error::invalid(format!("port {port} does not exist; the engine has {}", engine.num_ports()))
        })?;
        Ok(interface.rx.as_ref().map_or(0, |rx| rx.queues.len() as i32))
    });
    found.unwrap_or_else(|e| {
        status::fail("get_num_rx_queues", e);
        -1
    })
}

/// Drops everything the port receives until `allow_all_traffic`.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_drop_all_traffic(port: i32) -> i32 {
    status_of("drop_all_traffic", with_engine(|engine| engine.drop_all_traffic(port_id(port)?)))
}

/// Ends `drop_all_traffic`.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_allow_all_traffic(port: i32) -> i32 {
    status_of("allow_all_traffic", with_engine(|engine| engine.allow_all_traffic(port_id(port)?)))
}

/// Discards the bursts waiting in an RX queue; the packets discarded, or -1.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_flush_port_queue(port: i32, queue: i32) -> i64 {
    let flushed = with_engine(|engine| engine.flush_port_queue(port_id(port)?, crate::args::queue_id(queue)?));
    flushed.map_or_else(
        |e| {
            status::fail("flush_port_queue", e);
            -1
        },
        |n| n as i64,
    )
}

/// Parses `xx:xx:xx:xx:xx:xx` into six bytes; zeroes them and answers
/// `INVALID_PARAMETER` when the text is not a MAC address.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_format_eth_addr(dst: *mut u8, addr: *const c_char) -> i32 {
    const CALL: &str = "format_eth_addr";
    if dst.is_null() {
        return status::fail(CALL, Error::new(Status::NullPtr, "dst is a null pointer"));
    }
    let parsed = text("addr", addr).and_then(|text| {
        let bytes: Option<Vec<u8>> =
            text.split(':').map(|b| u8::from_str_radix(b, 16).ok().filter(|_| b.len() == 2)).collect();
        bytes
            .and_then(|bytes| <[u8; 6]>::try_from(bytes).ok())
            .ok_or_else(|| Error::invalid(format!("\"{text}\" is not a MAC address (xx:xx:xx:xx:xx:xx)")))
    });
    let (mac, code) = match parsed {
        Ok(mac) => (mac, SUCCESS),
        Err(e) => ([0; 6], status::fail(CALL, e)),
    };
    // SAFETY: non-null, six writable bytes by the C contract.
    unsafe { std::ptr::copy_nonoverlapping(mac.as_ptr(), dst, 6) };
    code
}
