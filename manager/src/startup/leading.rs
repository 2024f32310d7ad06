//! Leadership: with election, a Lease keeper claims or follows the Lease
//! (its writes outside the fence are what opens it); without, this replica
//! leads from the start. A follower keeps its caches warm and waits.

use std::sync::Arc;

use jobrelay_process::{Fence, Shutdown};
use kube::api::Api;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use super::Core;
use super::connect::{Checked, Clients};
use crate::Error;
use crate::cli::Args;
use crate::leader::{self, SteppedDown};

pub(super) struct Leadership {
    /// True while this replica leads.
    pub leading: watch::Receiver<bool>,
    /// The epoch it leads in.
    pub epoch: watch::Receiver<leader::Epoch>,
    /// Asks the keeper to hand the Lease on and stop.
    stop: watch::Sender<bool>,
    keeper: JoinHandle<Result<(), SteppedDown>>,
}

/// How waiting to lead ended.
pub(super) enum Waited {
    Leading,
    /// Shut down while following.
    Stopped,
}

impl Leadership {
    pub(super) async fn start(
        args: &Args,
        clients: &Clients<'_>,
        checked: &Checked,
        core: &Core,
    ) -> Result<Leadership, Error> {
        let election = &args.election;
        let (identity, metrics) = (&checked.identity, &core.metrics);
        let (leading_tx, leading) = watch::channel(!election.leader_elect);
        let (epoch_tx, epoch) = watch::channel(leader::Epoch::default());
        let (stop, stopped) = watch::channel(false);
        let keeper = match election.leader_elect {
            true => {
                // The Lease is written outside the fence, conditional on
                // the version read.
                let leases = clients.behind(Fence::open()).await?;
                info!(%identity, lease = %election.lease_name, namespace = %election.lease_namespace, "waiting to lead");
                tokio::spawn(
                    leader::Keeper {
                        leases: Api::namespaced(leases, &election.lease_namespace),
                        name: election.lease_name.clone(),
                        identity: identity.clone(),
                        settings: checked.settings,
                        fence: checked.fence.clone(),
                        leading: leading_tx,
                        epoch: epoch_tx,
                        metrics: Arc::clone(metrics),
                        events: core.events.clone(),
                    }
                    .run(stopped),
                )
            }
            false => {
                // Working alone is leading, for jobrelay_leader and its alert.
                metrics.leadership(true, 0);
                tokio::spawn(futures::future::pending())
            }
        };
        Ok(Leadership {
            leading,
            epoch,
            stop,
            keeper,
        })
    }

    /// Waits until this replica leads, or the process is asked to stop; an
    /// error if the keeper ended.
    pub(super) async fn wait(&mut self, shutdown: &Shutdown) -> Result<Waited, Error> {
        tokio::select! {
            led = self.leading.wait_for(|leading| *leading) => {
                led.map_err(|_| Error::NoLeader)?;
                Ok(Waited::Leading)
            }
            () = shutdown.clone().requested() => Ok(Waited::Stopped),
            ended = &mut self.keeper => Err(keeper_ended(ended)),
        }
    }

    /// Ends once the keeper does: always an error, as it runs until asked
    /// to stop.
    pub(super) async fn lost(&mut self) -> Error {
        keeper_ended((&mut self.keeper).await)
    }

    /// Hands the Lease to a follower, if held, and waits for the keeper.
    pub(super) async fn step_down(self) {
        self.stop.send_replace(true);
        if let Ok(Err(stepped_down)) = self.keeper.await {
            tracing::warn!(%stepped_down, "stepped down while stopping");
        }
    }
}

fn keeper_ended(ended: Result<Result<(), SteppedDown>, tokio::task::JoinError>) -> Error {
    match ended {
        Ok(ended) => ended.err().map_or(Error::NoLeader, Error::from),
        Err(joined) => Error::from(joined),
    }
}
