//! One Pod's log as a stream of several Pods carries it: whole lines, each
//! prefixed `[pod/<name>/<container>] `, so lines of Pods read at once never
//! mix. A stream of one Pod carries its bytes as they come.

use super::window::CHUNK_BYTES;

/// A line longer than this is cut into lines of this many bytes, each
/// prefixed: the agent holds at most this much of an unfinished line.
pub const LINE_BYTES: usize = CHUNK_BYTES;

/// The bytes read of one Pod's container, turned into what the stream
/// carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lines {
    /// None: the bytes pass as they come.
    prefix: Option<Vec<u8>>,
    /// The unfinished line.
    partial: Vec<u8>,
}

impl Lines {
    /// The log of the only Pod a stream reads: as it comes.
    pub fn raw() -> Lines {
        Lines {
            prefix: None,
            partial: Vec::new(),
        }
    }

    /// The log of one of several Pods: each line prefixed.
    pub fn prefixed(pod: &str, container: &str) -> Lines {
        Lines {
            prefix: Some(format!("[pod/{pod}/{container}] ").into_bytes()),
            partial: Vec::new(),
        }
    }

    /// The bytes `read` finish, to send; what is left of an unfinished
    /// line waits for the next read.
    pub fn push(&mut self, read: &[u8]) -> Vec<u8> {
        let Some(prefix) = &self.prefix else {
            return read.to_vec();
        };
        let mut out = Vec::new();
        let mut rest = read;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            out.extend_from_slice(prefix);
            out.append(&mut self.partial);
            out.extend_from_slice(&rest[..=end]);
            rest = &rest[end + 1..];
        }
        self.partial.extend_from_slice(rest);
        while self.partial.len() >= LINE_BYTES {
            out.extend_from_slice(prefix);
            out.extend(self.partial.drain(..LINE_BYTES));
            out.push(b'\n');
        }
        out
    }

    /// The unfinished line at the end of the log, prefixed and ended, so
    /// the next Pod's line starts on its own.
    pub fn finish(&mut self) -> Vec<u8> {
        let Some(prefix) = &self.prefix else {
            return Vec::new();
        };
        if self.partial.is_empty() {
            return Vec::new();
        }
        let mut out = prefix.clone();
        out.append(&mut self.partial);
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).expect("UTF-8")
    }

    #[test]
    fn one_pods_log_passes_as_it_comes() {
        let mut lines = Lines::raw();
        assert_eq!(text(lines.push(b"half a li")), "half a li");
        assert_eq!(text(lines.push(b"ne\nnext")), "ne\nnext");
        assert_eq!(text(lines.finish()), "");
    }

    #[test]
    fn each_line_is_prefixed_with_its_pod_and_container() {
        let mut lines = Lines::prefixed("train-0", "main");
        assert_eq!(
            text(lines.push(b"epoch 1\nepoch 2\n")),
            "[pod/train-0/main] epoch 1\n[pod/train-0/main] epoch 2\n"
        );
        assert_eq!(
            text(lines.push(b"\n")),
            "[pod/train-0/main] \n",
            "an empty line too"
        );
    }

    #[test]
    fn a_line_split_over_reads_is_sent_once_whole() {
        let mut lines = Lines::prefixed("p", "c");
        assert_eq!(text(lines.push(b"los")), "");
        assert_eq!(text(lines.push(b"s 0.1")), "");
        assert_eq!(text(lines.push(b"2\nlos")), "[pod/p/c] loss 0.12\n");
        assert_eq!(text(lines.push(b"s 0.09\n")), "[pod/p/c] loss 0.09\n");
    }

    #[test]
    fn an_unfinished_last_line_is_sent_at_the_end_on_a_line_of_its_own() {
        let mut lines = Lines::prefixed("p", "c");
        assert_eq!(text(lines.push(b"done\nexit")), "[pod/p/c] done\n");
        assert_eq!(text(lines.finish()), "[pod/p/c] exit\n");
        assert_eq!(text(lines.finish()), "", "sent once");
        let mut ended = Lines::prefixed("p", "c");
        ended.push(b"done\n");
        assert_eq!(text(ended.finish()), "", "nothing unfinished");
    }

    #[test]
    fn a_line_longer_than_a_chunk_is_cut_into_prefixed_lines() {
        let mut lines = Lines::prefixed("p", "c");
        let long = vec![b'x'; 2 * LINE_BYTES + 5];
        let out = lines.push(&long);
        let cut: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
        assert_eq!(cut.len(), 3, "two whole lines, then nothing yet");
        for line in &cut[..2] {
            assert!(line.starts_with(b"[pod/p/c] "));
            assert_eq!(line.len(), "[pod/p/c] ".len() + LINE_BYTES);
        }
        assert!(cut[2].is_empty());
        assert_eq!(text(lines.finish()), "[pod/p/c] xxxxx\n");
    }
}
