//! Loopback ports for the servers the tests start (etcd, API servers, Kueue,
//! managers, agents).
//!
//! A port picked by binding port 0 comes from the kernel's ephemeral range,
//! the same range every outgoing connection on the machine takes its source
//! port from; between the pick and the server's own bind, any client (the
//! tests' many Kubernetes clients, another test process) can take it, and the
//! server then fails with "address already in use". So ports are picked
//! outside that range, from a process-wide cursor that starts at a random
//! place (test processes running side by side start apart) and hands each
//! port out once; a port is only handed out if it can be bound right now.

use std::net::TcpListener;
use std::ops::Range;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Where the kernel says its ephemeral ports are.
const EPHEMERAL_RANGE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// The lowest port ever handed out: below it live well-known services.
const LOWEST: u16 = 10_000;

/// The fewest ports a side of the ephemeral range must offer to be used.
const ENOUGH: u16 = 2_000;

/// A free loopback port outside the ephemeral range, not handed out before
/// by this process.
pub fn free_port() -> std::io::Result<u16> {
    static RANGE: OnceLock<Range<u16>> = OnceLock::new();
    static CURSOR: OnceLock<AtomicU32> = OnceLock::new();
    let range = RANGE.get_or_init(|| {
        let ephemeral = std::fs::read_to_string(EPHEMERAL_RANGE).unwrap_or_default();
        outside_ephemeral(&ephemeral)
    });
    let cursor = CURSOR.get_or_init(|| AtomicU32::new(random_start()));
    let span = u32::from(range.end - range.start);
    for _ in 0..span {
        let offset = cursor.fetch_add(1, Ordering::Relaxed) % span;
        let port = range.start + u16::try_from(offset).expect("offset below a u16 span");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("no free loopback port in {range:?}"),
    ))
}

/// The ports to pick from, given the text of [`EPHEMERAL_RANGE`] ("low high"):
/// below the ephemeral range if it leaves enough room there, else above it;
/// every non-privileged port if the range cannot be read.
fn outside_ephemeral(text: &str) -> Range<u16> {
    let mut bounds = text.split_whitespace().map(str::parse::<u16>);
    let (Some(Ok(low)), Some(Ok(high))) = (bounds.next(), bounds.next()) else {
        return LOWEST..u16::MAX;
    };
    if low >= LOWEST.saturating_add(ENOUGH) {
        LOWEST..low
    } else if high <= u16::MAX - ENOUGH {
        high + 1..u16::MAX
    } else {
        LOWEST..u16::MAX
    }
}

/// A start for the cursor that differs between processes started together.
fn random_start() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    // Only the low bits matter: the cursor wraps within the span.
    hasher.finish() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_picked_below_the_usual_ephemeral_range() {
        assert_eq!(outside_ephemeral("32768\t60999\n"), 10_000..32_768);
    }

    #[test]
    fn a_range_that_starts_low_leaves_the_ports_above_it() {
        assert_eq!(outside_ephemeral("1024 50000"), 50_001..u16::MAX);
    }

    #[test]
    fn a_range_with_no_room_on_either_side_or_unreadable_leaves_every_unprivileged_port() {
        assert_eq!(outside_ephemeral("1024 65000"), 10_000..u16::MAX);
        assert_eq!(outside_ephemeral(""), 10_000..u16::MAX);
        assert_eq!(outside_ephemeral("many"), 10_000..u16::MAX);
    }

    #[test]
    fn a_process_never_hands_out_a_port_twice() {
        let first = free_port().expect("a port");
        let second = free_port().expect("another port");
        assert_ne!(first, second);
    }
}
