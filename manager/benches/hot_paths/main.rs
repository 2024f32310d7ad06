//! Micro-benchmarks of the manager's hot pure paths, one file per path:
//! turning a manager Job into the ApplyMirror payload (`mirror`), turning a
//! worker's JobStatus bytes into the status patch body (`status`), and the
//! fleet's work on a reconnect and on a wave of new Jobs (`fleet`), and
//! anti-entropy's scan of what every cluster should hold (`wanted`).
//!
//! Run with `cargo bench -p jobrelay-manager --bench hot_paths`.

mod fleet;
mod mirror;
mod status;
mod wanted;

fn main() {
    divan::main();
}
