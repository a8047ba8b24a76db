//! Expiry handlers on a cluster member: binding changes committed in the
//! metadata group, the dispatcher told which fragments this member leads,
//! and its settlements proposed to each fragment's group.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::BoxFuture;

use crate::cluster::{Cluster, ClusterError, MetaCommand, MetaOutcome};
use crate::expiry::command::Command;
use crate::expiry::entries;
use crate::expiry::outbox::Outbox;
use crate::expiry::settle::Settler;
use crate::expiry::{Binding, ExpiryError};
use crate::store::KvStore;

/// Commit a binding change in the metadata group: what applying it
/// answered, a failure as the error it stands for.
pub(super) async fn change_metadata(
    cluster: &Cluster,
    command: MetaCommand,
) -> Result<MetaOutcome, ExpiryError> {
    let change =
        cluster
            .change_metadata(command)
            .await
            .map_err(|error| ExpiryError::Unavailable {
                code: match error {
                    ClusterError::MetaNoQuorum { .. } | ClusterError::NoQuorum { .. } => {
                        "no_quorum"
                    }
                    _ => "unavailable",
                }
                .to_string(),
                message: error.to_string(),
            })?;
    match change.outcome {
        MetaOutcome::Failed { code, message } => Err(ExpiryError::from_contract(&code, message)),
        outcome => Ok(outcome),
    }
}

pub(super) fn decode_binding(bytes: &[u8]) -> Result<Binding, ExpiryError> {
    serde_json::from_slice(bytes).map_err(|e| ExpiryError::Unavailable {
        code: "unavailable".into(),
        message: format!("the metadata group answered a binding that does not decode: {e}"),
    })
}

pub(super) fn unexpected_outcome(outcome: MetaOutcome) -> ExpiryError {
    ExpiryError::Unavailable {
        code: "unavailable".into(),
        message: format!("the metadata group answered {outcome:?}"),
    }
}

/// How often a cluster member looks for fragments it started or stopped
/// leading.
const LEADERSHIP_POLL: Duration = Duration::from_millis(100);

/// Tell the dispatcher which fragments this member leads, for as long as
/// the cluster runs: a fragment it starts leading is taken over once this
/// member applied every earlier entry (its stored events, same ids, are
/// delivered again); one it stops leading is forgotten.
pub(super) async fn follow_leadership(
    cluster: Weak<Cluster>,
    outbox: Arc<Outbox>,
    store: Weak<dyn KvStore>,
) {
    let mut led: std::collections::BTreeSet<u32> = std::collections::BTreeSet::new();
    loop {
        tokio::time::sleep(LEADERSHIP_POLL).await;
        // The dispatcher stopped (shutdown): nothing left to tell.
        let (true, Some(cluster)) = (outbox.is_open(), cluster.upgrade()) else {
            return;
        };
        let now: std::collections::BTreeSet<u32> = cluster.led_fragments().into_iter().collect();
        for lost in led.difference(&now) {
            if !outbox.send(Command::Forget(*lost)) {
                return;
            }
        }
        for gained in now.difference(&led) {
            let fragment = *gained;
            if !outbox.send(Command::Lead(fragment)) {
                return;
            }
            let (cluster, outbox, store) = (cluster.clone(), outbox.clone(), store.clone());
            tokio::spawn(async move {
                // Retry until caught up, unless leadership moves on (the
                // next poll then forgets the fragment) or the node stops.
                while outbox.is_open() && cluster.led_fragments().contains(&fragment) {
                    if cluster.caught_up_as_leader(fragment).await {
                        let Some(store) = store.upgrade() else {
                            return; // The node closed its store.
                        };
                        let loaded = tokio::task::spawn_blocking(move || {
                            entries::load_fragment_outbox(&*store, fragment)
                        })
                        .await;
                        match loaded {
                            Ok(Ok(events)) => {
                                outbox.send(Command::Takeover(fragment, events));
                                return;
                            }
                            Ok(Err(error)) => {
                                tracing::warn!(fragment, %error, "cannot load the outbox of a fragment this member now leads; retrying");
                            }
                            Err(error) => {
                                tracing::warn!(fragment, %error, "loading the outbox failed; retrying");
                            }
                        }
                    }
                    tokio::time::sleep(LEADERSHIP_POLL).await;
                }
            });
        }
        led = now;
    }
}

/// The dispatcher's settler on a cluster member: a `Settle` command
/// proposed by the fragment's leader, so every replica removes the same
/// events (the fsync flag is the group's: its log entry is as durable as
/// its writes).
pub(super) struct ClusterSettler(pub(super) Arc<Cluster>);

impl Settler for ClusterSettler {
    fn settle(
        &self,
        fragment: u32,
        writes: Vec<crate::store::FamilyWrite>,
        _sync: bool,
    ) -> BoxFuture<'static, Result<(), String>> {
        let cluster = self.0.clone();
        Box::pin(async move { cluster.settle(fragment, writes).await })
    }
}
