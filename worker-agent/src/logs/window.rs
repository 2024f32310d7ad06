//! How much of a log stream may go to the manager now: the bytes sent that
//! it has not credited stay within the stream's window, and each message
//! carries at most [`CHUNK_BYTES`].

/// Bytes of data one LogData carries at most.
pub const CHUNK_BYTES: usize = 32 * 1024;
/// The window of a LogOpen that names none.
pub const DEFAULT_WINDOW: u64 = 256 * 1024;
/// The largest window taken; a larger one asked for is cut to it, so the
/// session queues at most this much of each stream's logs.
pub const MAX_WINDOW: u64 = 1024 * 1024;

/// The bytes of one stream sent and not yet credited, within its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    size: u64,
    uncredited: u64,
    /// Every byte the manager credited, as [`Window::credited_in_all`]
    /// last heard.
    credited: u64,
}

impl Window {
    /// The window a LogOpen asks for: [`DEFAULT_WINDOW`] for none (0), at
    /// most [`MAX_WINDOW`].
    pub fn asked(window: u64) -> Window {
        let size = match window {
            0 => DEFAULT_WINDOW,
            asked => asked.min(MAX_WINDOW),
        };
        Window {
            size,
            uncredited: 0,
            credited: 0,
        }
    }

    /// Bytes that may be sent before the next credit.
    pub fn room(&self) -> u64 {
        self.size.saturating_sub(self.uncredited)
    }

    pub fn sent(&mut self, bytes: usize) {
        self.uncredited = self.uncredited.saturating_add(bytes as u64);
    }

    /// The manager took `bytes` more; credit beyond what was sent is
    /// ignored, so a peer cannot open the window past its size.
    fn credit(&mut self, bytes: u64) {
        self.uncredited = self.uncredited.saturating_sub(bytes);
    }

    /// The manager credited `total` bytes since the stream opened: what is
    /// new of it since the last call is credited.
    pub fn credited_in_all(&mut self, total: u64) {
        let new = total.saturating_sub(self.credited);
        self.credited = self.credited.max(total);
        self.credit(new);
    }
}

/// The bytes of `pending` the next message carries with `room` left in the
/// window: as many as fit, at most [`CHUNK_BYTES`].
pub fn chunk_len(pending: usize, room: u64) -> usize {
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    pending.min(room).min(CHUNK_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_asked_for_is_taken_a_default_for_none_and_cut_at_the_largest() {
        let cases = [
            (0, DEFAULT_WINDOW),
            (1, 1),
            (64 * 1024, 64 * 1024),
            (MAX_WINDOW, MAX_WINDOW),
            (MAX_WINDOW + 1, MAX_WINDOW),
            (u64::MAX, MAX_WINDOW),
        ];
        for (asked, room) in cases {
            assert_eq!(Window::asked(asked).room(), room, "asked {asked}");
        }
    }

    #[test]
    fn bytes_sent_close_the_window_and_credits_open_it_again() {
        let mut window = Window::asked(100);
        window.sent(60);
        assert_eq!(window.room(), 40);
        window.sent(40);
        assert_eq!(window.room(), 0, "full: the stream waits for credit");
        window.credit(30);
        assert_eq!(window.room(), 30);
        window.credit(70);
        assert_eq!(window.room(), 100);
    }

    #[test]
    fn credit_beyond_what_was_sent_opens_the_window_no_further() {
        let mut window = Window::asked(100);
        window.sent(10);
        window.credit(1_000);
        assert_eq!(window.room(), 100);
        window.sent(100);
        assert_eq!(window.room(), 0, "the excess credit was not kept");
        window.credit(u64::MAX);
        assert_eq!(window.room(), 100);
    }

    #[test]
    fn credits_summed_count_once_whenever_they_are_looked_at() {
        let mut window = Window::asked(100);
        window.sent(100);
        window.credited_in_all(30);
        assert_eq!(window.room(), 30);
        window.credited_in_all(30);
        assert_eq!(window.room(), 30, "the same sum again is no new credit");
        window.sent(30);
        // Two credits came while the stream was sending; looked at once.
        window.credited_in_all(90);
        assert_eq!(window.room(), 60);
        window.credited_in_all(50);
        assert_eq!(window.room(), 60, "a smaller sum takes nothing back");
    }

    #[test]
    fn a_message_carries_what_is_pending_within_the_room_and_at_most_a_chunk() {
        // (pending, room, carried)
        let cases = [
            (10, 1_000, 10),
            (1_000, 10, 10),
            (100_000, 1_000_000, CHUNK_BYTES),
            (CHUNK_BYTES + 1, u64::MAX, CHUNK_BYTES),
            (0, 1_000, 0),
            (1_000, 0, 0),
        ];
        for (pending, room, carried) in cases {
            assert_eq!(chunk_len(pending, room), carried, "{pending} in {room}");
        }
    }
}
