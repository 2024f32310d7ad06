//! The resync step: an agent restarted while it holds its mirrors, until it
//! has its DesiredSet again.

use std::time::{Duration, Instant};

use jobrelay_e2e::controlplane::seconds;
use jobrelay_e2e::relay::Relay;
use jobrelay_e2e::wait::{self, Seen};

/// Restarts the agent of `worker` while it holds its mirrors; returns how
/// long until it had its DesiredSet again, and how many mirrors it held.
pub(super) async fn resync(relay: &Relay, worker: &str) -> anyhow::Result<(Duration, usize)> {
    let marker = "desired set received";
    let before = relay.agent_log(worker).matches(marker).count();
    relay.kill_agent(worker);
    let started = Instant::now();
    relay.start_agent(worker)?;
    wait::try_until(
        format!("agent {worker} resynced"),
        Duration::from_secs(600),
        || {
            let seen = relay.agent_log(worker).matches(marker).count();
            async move {
                if seen > before {
                    Seen::Ready(())
                } else {
                    Seen::Waiting("no DesiredSet yet".into())
                }
            }
        },
    )
    .await?;
    let took = started.elapsed();
    let log = relay.agent_log(worker);
    let held = log
        .lines()
        .rev()
        .find(|l| l.contains("session open"))
        .and_then(|l| l.split("inventory=").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    crate::log(&format!(
        "agent {worker} resynced {held} mirrors in {}",
        seconds(took)
    ));
    Ok((took, held))
}
