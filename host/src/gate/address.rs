//! Which addresses a plugin's request may connect to.
//!
//! The check runs on the address the host is about to connect to, after it
//! resolved the name itself, so a name that resolves (or re-resolves, as in
//! DNS rebinding) to an internal address is caught where it matters.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Why an address is not public, or `None` for a public one.
pub fn internal_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => {
            // Forms that carry an IPv4 address reach that address.
            if let Some(v4) = v6.to_ipv4_mapped() {
                return v4_kind(v4);
            }
            let s = v6.segments();
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                // NAT64 (64:ff9b::/96)
                return v4_kind(Ipv4Addr::new(
                    (s[6] >> 8) as u8,
                    s[6] as u8,
                    (s[7] >> 8) as u8,
                    s[7] as u8,
                ));
            }
            if s[0] == 0x2002 {
                // 6to4 (2002::/16) carries an IPv4 address in its prefix.
                return v4_kind(Ipv4Addr::new(
                    (s[1] >> 8) as u8,
                    s[1] as u8,
                    (s[2] >> 8) as u8,
                    s[2] as u8,
                ));
            }
            v6_kind(v6)
        }
    }
}

fn v4_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(if ip.is_unspecified() || a == 0 {
        "unspecified"
    } else if ip.is_loopback() {
        "loopback"
    } else if ip.is_private() {
        "private"
    } else if ip.is_link_local() {
        // 169.254.0.0/16, where cloud metadata services answer
        "link-local"
    } else if a == 100 && (64..128).contains(&b) {
        "shared (carrier-grade NAT)"
    } else if a == 192 && b == 0 && ip.octets()[2] == 0 {
        "IETF protocol assignment"
    } else if a == 198 && (b == 18 || b == 19) {
        "benchmarking"
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        "multicast, broadcast or reserved"
    } else if ip.is_documentation() {
        "documentation"
    } else {
        return None;
    })
}

fn v6_kind(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    Some(if ip.is_unspecified() {
        "unspecified"
    } else if ip.is_loopback() {
        "loopback"
    } else if first & 0xfe00 == 0xfc00 {
        "unique-local"
    } else if first & 0xffc0 == 0xfe80 {
        "link-local"
    } else if first & 0xffc0 == 0xfec0 {
        "site-local"
    } else if first == 0x0064 && ip.segments()[1] == 0xff9b {
        // 64:ff9b:1::/48, local-use NAT64
        "NAT64 (local use)"
    } else if ip.segments()[..4] == [0x0100, 0, 0, 0] {
        "discard-only"
    } else if ip.is_multicast() {
        "multicast"
    } else if first == 0x2001 && ip.segments()[1] == 0x0db8 {
        "documentation"
    } else if ip.segments()[..6] == [0, 0, 0, 0, 0, 0] {
        // IPv4-compatible (deprecated) forms
        "IPv4-compatible"
    } else {
        return None;
    })
}

/// Whether `ip` may be connected to: public, or inside a range the
/// allow-list entry names explicitly. The error says why not.
pub fn check(ip: IpAddr, explicit: &[IpNet]) -> Result<(), String> {
    let Some(kind) = internal_kind(ip) else {
        return Ok(());
    };
    let canonical = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    if explicit
        .iter()
        .any(|net| net.contains(&ip) || net.contains(&canonical))
    {
        return Ok(());
    }
    Err(format!(
        "{ip} is a {kind} address, which the allow-list entry does not name"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_refused_unless_named() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
            "fec0::1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(check(ip, &[]).is_err(), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(check(ip, &[]).is_ok(), "{ip}");
        }
        let loopback: IpNet = "127.0.0.0/8".parse().unwrap();
        assert!(check("127.0.0.1".parse().unwrap(), &[loopback]).is_ok());
        assert!(check("::ffff:127.0.0.1".parse().unwrap(), &[loopback]).is_ok());
        assert!(check("169.254.169.254".parse().unwrap(), &[loopback]).is_err());
    }
}
