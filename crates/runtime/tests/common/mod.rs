//! What the runtime's integration tests share.

/// This machine's address on the interface that leads elsewhere, if it has one that is not
/// loopback (no packet is sent: a UDP socket's connect only picks the route).
pub fn outward_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}
