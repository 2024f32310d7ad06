//! Micro-benchmarks of the manager's hot pure paths, one file per path:
//! turning a manager Job into the ApplyMirror payload (`mirror`), turning a
//! worker's JobStatus bytes into the status patch body (`status`), and the
//! fleet's work on a reconnect and on a wave of new Jobs (`fleet`).
//!
//! Run with `cargo bench -p jobrelay-manager --bench hot_paths`.

mod fleet;
mod mirror;
mod status;

fn main() {
    divan::main();
}
