//! Reads from this member's replicas: linearizable (a read index the
//! fragment's leader confirmed with a quorum, applied here first) or, when
//! the request allows it, within a staleness bound (a read index confirmed
//! recently enough, with no round trip to the leader).

use std::time::Duration;

use tokio::time::Instant;

use super::ClusterError;
use super::forward::{Answer, Forward};
use super::groups::{Cluster, RETRY_PAUSE, Replica};
use crate::store::FragmentId;

/// The largest staleness a read may allow (one day). A bound is only
/// worth asking for if it says something; larger ones are refused.
pub const MAX_STALENESS: Duration = Duration::from_secs(24 * 60 * 60);

/// Refuse a staleness bound over [`MAX_STALENESS`], saying why.
pub fn check_staleness(max_staleness: Option<Duration>) -> Result<(), String> {
    match max_staleness {
        Some(bound) if bound > MAX_STALENESS => Err(format!(
            "max_staleness_ms is {} ms; a read may allow at most {} ms (one day): ask for less, or leave it out for a linearizable read",
            bound.as_millis(),
            MAX_STALENESS.as_millis()
        )),
        _ => Ok(()),
    }
}

impl Replica {
    /// Note that this replica has applied a read index asked for at
    /// `asked`: every write acknowledged before `asked` is here.
    fn confirm(&self, asked: Instant) {
        let mut confirmed = self.confirmed.lock();
        if confirmed.is_none_or(|at| at < asked) {
            *confirmed = Some(asked);
        }
    }
}

impl Cluster {
    /// Wait until a linearizable read of `fragment` may be served from this
    /// node's replica: its leader confirmed leadership with a quorum and
    /// this replica applied everything committed before the read.
    ///
    /// Reads share rounds: a read index asked for after a read arrived
    /// covers it (every write acknowledged before it arrived is committed
    /// by then), so this node asks for one at a time per fragment and each
    /// round serves every read that arrived before it was asked for; a read
    /// that arrives during a round waits for the next. Under load that is
    /// one quorum round (and, on a follower, one forward to the leader) per
    /// round trip instead of per read.
    pub(crate) async fn linearize(&self, fragment: FragmentId) -> Result<(), ClusterError> {
        self.serving()?;
        let arrived = Instant::now();
        let deadline = arrived + self.config.quorum_timeout;
        let Some(replica) = self.replicas.get(&fragment) else {
            return Err(ClusterError::Refused {
                code: "not_replicated_here".into(),
                message: format!(
                    "fragment {fragment} has no replica on node {} to read (its reads go to the fragment's leader)",
                    self.config.node_id
                ),
            });
        };
        let covered = || replica.confirmed.lock().is_some_and(|at| at >= arrived);
        let mut failed: Option<String> = None;
        loop {
            let Ok(turn) = tokio::time::timeout_at(deadline, replica.asking.lock()).await else {
                let reason = failed.unwrap_or_else(|| {
                    "the read index rounds of the reads before it did not end in time".into()
                });
                return Err(self.no_quorum(fragment, reason));
            };
            if covered() {
                return Ok(());
            }
            let reason = match self.ask_read_index(fragment, replica, deadline).await {
                Ok(()) => return Ok(()),
                Err(reason) => reason,
            };
            if Instant::now() + RETRY_PAUSE >= deadline {
                return Err(self.no_quorum(fragment, reason));
            }
            failed = Some(reason);
            drop(turn);
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// One round of [`Cluster::linearize`]: ask the fragment's leader (this
    /// node or another) for a read index and wait until `replica` applied
    /// it, before `deadline`; why not, on failure.
    async fn ask_read_index(
        &self,
        fragment: FragmentId,
        replica: &Replica,
        deadline: Instant,
    ) -> Result<(), String> {
        let asked = Instant::now();
        let remaining = deadline.saturating_duration_since(asked);
        match replica.group.leader() {
            Some(node) if node == self.config.node_id => {
                match tokio::time::timeout(remaining, replica.group.read_index()).await {
                    Ok(Ok(_)) => {
                        replica.confirm(asked);
                        Ok(())
                    }
                    Ok(Err(error)) => Err(error.to_string()),
                    Err(_) => Err("the leader could not confirm a quorum".into()),
                }
            }
            Some(node) => {
                match self
                    .forward(node, &Forward::ReadIndex { fragment }, deadline)
                    .await
                {
                    Ok(Answer::ReadIndex(index)) => {
                        let remaining = deadline.saturating_duration_since(Instant::now());
                        if replica.group.wait_applied(index, remaining).await {
                            replica.confirm(asked);
                            Ok(())
                        } else {
                            Err(format!("this replica did not apply entry {index} in time"))
                        }
                    }
                    Ok(Answer::Failure { message, .. }) => Err(message),
                    Ok(other) => Err(format!("node {node} answered {other:?}")),
                    Err(error) => Err(error.to_string()),
                }
            }
            None => Err("no leader known".into()),
        }
    }

    /// Make this node's replica of `fragment` readable with data at most
    /// `max_staleness` old: served at once when the replica applied a read
    /// index asked for within the bound (it holds every write acknowledged
    /// before that moment), otherwise linearized now (see
    /// [`Cluster::linearize`], with its `no_quorum` failure). Returns how
    /// old the data may be: the time since that read index was asked for,
    /// zero when linearized now. The bound is measured on this node's
    /// monotonic clock only, so it needs no clock agreement between
    /// members.
    pub(crate) async fn read_within(
        &self,
        fragment: FragmentId,
        max_staleness: Duration,
    ) -> Result<Duration, ClusterError> {
        self.serving()?;
        if let Some(replica) = self.replicas.get(&fragment)
            && let Some(asked) = *replica.confirmed.lock()
        {
            let age = asked.elapsed();
            if age <= max_staleness {
                return Ok(age);
            }
        }
        self.linearize(fragment).await?;
        Ok(Duration::ZERO)
    }
}
