//! Socket and RoCE endpoints: `udp://ip:port`, `tcp://ip:port`, `roce://ip[:port]`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use serde::Serialize;

/// Transport of an endpoint URI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Kernel UDP socket.
    Udp,
    /// Kernel TCP socket.
    Tcp,
    /// RDMA over Converged Ethernet (`roce://`, legacy `rdma://`).
    Roce,
}

impl Transport {
    /// The URI scheme.
    pub const fn scheme(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Roce => "roce",
        }
    }
}

/// A parsed endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Endpoint {
    /// Transport from the scheme.
    pub transport: Transport,
    /// IP address.
    pub ip: IpAddr,
    /// Port; optional only for RoCE clients, where RDMA CM picks it.
    pub port: Option<u16>,
}

impl Endpoint {
    /// The socket address, with port 0 when none was given.
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.port.unwrap_or(0))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}://{}", self.transport.scheme(), SocketAddr::new(self.ip, port)),
            None => write!(f, "{}://{}", self.transport.scheme(), self.ip),
        }
    }
}

impl FromStr for Endpoint {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        const HINT: &str = "write udp://IP:PORT, tcp://IP:PORT or roce://IP[:PORT]";
        let (scheme, rest) = text.split_once("://").ok_or_else(|| format!("\"{text}\" has no scheme; {HINT}"))?;
        let transport = match scheme {
            "udp" => Transport::Udp,
            "tcp" => Transport::Tcp,
            "roce" | "rdma" => Transport::Roce,
            other => return Err(format!("unknown scheme \"{other}\" in \"{text}\"; {HINT}")),
        };
        // Drop a query such as `?engine=ibverbs`; it only repeats the default engine.
        let rest = rest.split_once('?').map_or(rest, |(address, _)| address);
        if let Ok(addr) = rest.parse::<SocketAddr>() {
            return Ok(Endpoint { transport, ip: addr.ip(), port: Some(addr.port()) });
        }
        let ip = rest
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .map_err(|_| format!("\"{rest}\" in \"{text}\" is not an IP address with an optional port; {HINT}"))?;
        Ok(Endpoint { transport, ip, port: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_scheme() {
        let e: Endpoint = "udp://127.0.0.1:5001".parse().unwrap();
        assert_eq!((e.transport, e.port), (Transport::Udp, Some(5001)));
        let e: Endpoint = "rdma://10.0.0.1".parse().unwrap();
        assert_eq!((e.transport, e.port), (Transport::Roce, None));
        let e: Endpoint = "roce://10.0.0.1:4096?engine=ibverbs".parse().unwrap();
        assert_eq!(e.to_string(), "roce://10.0.0.1:4096");
        let e: Endpoint = "tcp://[::1]:80".parse().unwrap();
        assert_eq!(e.transport, Transport::Tcp);
    }

    #[test]
    fn rejects_bad_uris_with_a_hint() {
        assert!("127.0.0.1:5".parse::<Endpoint>().unwrap_err().contains("no scheme"));
        assert!("http://1.2.3.4:5".parse::<Endpoint>().unwrap_err().contains("unknown scheme"));
        assert!("udp://host:5".parse::<Endpoint>().unwrap_err().contains("not an IP"));
    }
}
