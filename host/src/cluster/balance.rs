//! Leadership balance: each fragment's leadership goes back to its
//! preferred leader (`placement::preferred_leaders`) once that member is up
//! and caught up, so a member that was down or restarted carries its share
//! of the writes again instead of leaving it to the others for good.
//!
//! Each member runs the balancer over the groups it leads, once per
//! [`TICK`]. A group it leads whose preferred leader is another member is
//! handed to that member after the member could take over
//! (`Group::can_take_over`: acknowledged within the last second, at most a
//! few hundred entries behind) for [`HOLD`] without a break, at most
//! [`PER_TICK`] groups per tick, so leadership moves one group at a time
//! and never to a member that is still catching up or flapping. A member
//! that handed leadership away itself (a clean stop hands over every group
//! it leads, and every member sees the transfer request) or announced its
//! stop (`Forward::Stopping`, which a stopping member sends every other
//! member first, so one that leads nothing is known to stop too) is not
//! handed any for [`COOLDOWN`]: a stopping member is left alone. A
//! hand-over that has not happened after [`GRACE`] (the target went down
//! meanwhile; openraft's leader proposes nothing while a transfer is
//! pending) is redone towards another member that can take over, or the
//! same one when there is none, and the target is left alone for
//! [`COOLDOWN`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::groups::Cluster;
use crate::raft::NodeId;
use crate::store::FragmentId;

/// How often the balancer looks.
pub const TICK: Duration = Duration::from_secs(1);
/// How long a preferred leader must be able to take over, without a break,
/// before it is handed its group.
pub const HOLD: Duration = Duration::from_secs(3);
/// How long a hand-over may take before it is redone.
pub const GRACE: Duration = Duration::from_secs(2);
/// How long a member that handed leadership away, or failed to take it
/// over, is handed none.
pub const COOLDOWN: Duration = Duration::from_secs(30);
/// Most hand-overs a member starts per tick.
pub const PER_TICK: usize = 1;

/// A group this member leads, as one tick sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Led {
    /// The fragment.
    pub fragment: FragmentId,
    /// The group's current term.
    pub term: u64,
    /// The fragment's preferred leader.
    pub preferred: NodeId,
    /// The other voters that could take over now, most suitable first.
    pub ready: Vec<NodeId>,
}

/// A hand-over this member started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Started {
    to: NodeId,
    term: u64,
    at: Instant,
}

/// What a tick decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Hand `fragment` to its preferred leader.
    Balance {
        /// The fragment.
        fragment: FragmentId,
        /// Its preferred leader.
        to: NodeId,
    },
    /// The hand-over of `fragment` to `failed` did not happen: hand it to
    /// `to`.
    Redo {
        /// The fragment.
        fragment: FragmentId,
        /// The member that did not take over.
        failed: NodeId,
        /// Where it goes now.
        to: NodeId,
    },
}

/// The balancer's memory from one tick to the next.
#[derive(Debug, Default)]
pub struct Balancer {
    /// Per fragment: the preferred leader that could take over, and since
    /// when without a break.
    ready_since: BTreeMap<FragmentId, (NodeId, Instant)>,
    /// Hand-overs started and not yet seen done.
    started: BTreeMap<FragmentId, Started>,
    /// Members that failed to take over, and when.
    failed: BTreeMap<NodeId, Instant>,
}

impl Balancer {
    /// One tick at `now`: `led` are the groups this member leads, `me` this
    /// member, `handed_away` the members seen handing leadership away and
    /// when. Returns the hand-overs to start.
    pub fn tick(
        &mut self,
        now: Instant,
        me: NodeId,
        led: &[Led],
        handed_away: &BTreeMap<NodeId, Instant>,
    ) -> Vec<Action> {
        let led_now: BTreeMap<FragmentId, &Led> = led.iter().map(|g| (g.fragment, g)).collect();
        self.failed
            .retain(|_, at| now.saturating_duration_since(*at) < COOLDOWN);
        let mut actions = Vec::new();
        // Hand-overs under way: done once this member no longer leads the
        // group in the term it handed over; redone after GRACE.
        let started = std::mem::take(&mut self.started);
        for (fragment, start) in started {
            match led_now.get(&fragment) {
                Some(group) if group.term == start.term => {
                    if now.saturating_duration_since(start.at) < GRACE {
                        self.started.insert(fragment, start);
                        continue;
                    }
                    self.failed.insert(start.to, now);
                    let to = group
                        .ready
                        .iter()
                        .copied()
                        .find(|node| *node != start.to)
                        .unwrap_or(start.to);
                    actions.push(Action::Redo {
                        fragment,
                        failed: start.to,
                        to,
                    });
                    self.started.insert(
                        fragment,
                        Started {
                            to,
                            term: start.term,
                            at: now,
                        },
                    );
                }
                _ => {}
            }
        }
        let cooling: BTreeSet<NodeId> = handed_away
            .iter()
            .filter(|(_, at)| now.saturating_duration_since(**at) < COOLDOWN)
            .map(|(node, _)| *node)
            .chain(self.failed.keys().copied())
            .collect();
        self.ready_since
            .retain(|fragment, _| led_now.contains_key(fragment));
        let mut balanced = 0;
        for group in led {
            if group.preferred == me || self.started.contains_key(&group.fragment) {
                self.ready_since.remove(&group.fragment);
                continue;
            }
            if !group.ready.contains(&group.preferred) {
                self.ready_since.remove(&group.fragment);
                continue;
            }
            let since = match self.ready_since.get(&group.fragment) {
                Some((node, since)) if *node == group.preferred => *since,
                _ => {
                    self.ready_since
                        .insert(group.fragment, (group.preferred, now));
                    now
                }
            };
            if balanced < PER_TICK
                && now.saturating_duration_since(since) >= HOLD
                && !cooling.contains(&group.preferred)
            {
                balanced += 1;
                self.ready_since.remove(&group.fragment);
                self.started.insert(
                    group.fragment,
                    Started {
                        to: group.preferred,
                        term: group.term,
                        at: now,
                    },
                );
                actions.push(Action::Balance {
                    fragment: group.fragment,
                    to: group.preferred,
                });
            }
        }
        actions
    }
}

impl Cluster {
    /// Start the balancer in the background; it stops at [`Cluster::hand_over`]
    /// and at shutdown. Nothing to do with one replica per fragment.
    pub(crate) fn start_leader_balance(self: &Arc<Self>) {
        if self.config.replication < 2 {
            return;
        }
        let weak = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            let mut balancer = Balancer::default();
            loop {
                tokio::time::sleep(TICK).await;
                let Some(cluster) = weak.upgrade() else {
                    return;
                };
                cluster.balance_once(&mut balancer).await;
            }
        });
        *self.balance_task.lock() = Some(task);
    }

    /// Stop the balancer (before a clean stop hands leadership away).
    pub(crate) fn stop_leader_balance(&self) {
        if let Some(task) = self.balance_task.lock().take() {
            task.abort();
        }
    }

    async fn balance_once(&self, balancer: &mut Balancer) {
        let me = self.config.node_id;
        // Members that announced their stop count as having handed
        // leadership away at that moment.
        let mut handed_away: BTreeMap<NodeId, Instant> = self.stopping.lock().clone();
        let mut led = Vec::new();
        for (fragment, replica) in &self.replicas {
            if let Some((node, at)) = replica.group.handed_away()
                && node != me
            {
                let latest = handed_away.entry(node).or_insert(at);
                *latest = (*latest).max(at);
            }
            if !replica.group.is_leader() {
                continue;
            }
            let preferred = self.preferred[*fragment as usize];
            // The preferred leader first, then the others in placement order.
            let mut ready: Vec<NodeId> = self.placement[*fragment as usize]
                .iter()
                .copied()
                .filter(|node| replica.group.can_take_over(*node))
                .collect();
            ready.sort_by_key(|node| *node != preferred);
            led.push(Led {
                fragment: *fragment,
                term: replica.group.term(),
                preferred,
                ready,
            });
        }
        for action in balancer.tick(Instant::now(), me, &led, &handed_away) {
            let (fragment, to) = match action {
                Action::Balance { fragment, to } => {
                    tracing::info!(
                        fragment,
                        to,
                        "handing fragment {fragment}'s leadership to its preferred leader, member {to}"
                    );
                    (fragment, to)
                }
                Action::Redo {
                    fragment,
                    failed,
                    to,
                } => {
                    tracing::warn!(
                        fragment,
                        failed,
                        to,
                        "member {failed} did not take over fragment {fragment} within {} s; handing it to member {to}",
                        GRACE.as_secs()
                    );
                    (fragment, to)
                }
            };
            self.replicas[&fragment].group.hand_over(to).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn led(fragment: FragmentId, term: u64, preferred: NodeId, ready: &[NodeId]) -> Led {
        Led {
            fragment,
            term,
            preferred,
            ready: ready.to_vec(),
        }
    }

    const NONE: &BTreeMap<NodeId, Instant> = &BTreeMap::new();

    #[test]
    fn a_preferred_leader_gets_its_group_after_it_could_take_over_for_the_hold() {
        let mut b = Balancer::default();
        let t0 = Instant::now();
        let groups = [led(0, 5, 2, &[2, 3]), led(1, 5, 1, &[2, 3])];
        assert!(b.tick(t0, 1, &groups, NONE).is_empty());
        assert!(b.tick(t0 + HOLD / 2, 1, &groups, NONE).is_empty());
        // A break (not caught up) starts the hold again.
        let behind = [led(0, 5, 2, &[3]), led(1, 5, 1, &[2, 3])];
        assert!(b.tick(t0 + HOLD / 2 + TICK, 1, &behind, NONE).is_empty());
        let t1 = t0 + HOLD + TICK;
        assert!(b.tick(t1, 1, &groups, NONE).is_empty());
        assert_eq!(
            b.tick(t1 + HOLD, 1, &groups, NONE),
            vec![Action::Balance { fragment: 0, to: 2 }],
            "fragment 1 is already led by its preferred leader"
        );
        // Done: member 2 took over (this member no longer leads it).
        assert!(b.tick(t1 + HOLD + TICK, 1, &groups[1..], NONE).is_empty());
        assert!(b.started.is_empty());
    }

    #[test]
    fn one_hand_over_per_tick() {
        let mut b = Balancer::default();
        let t0 = Instant::now();
        let mut groups: Vec<Led> = (0..3).map(|f| led(f, 1, 2, &[2])).collect();
        assert!(b.tick(t0, 1, &groups, NONE).is_empty());
        let mut handed = Vec::new();
        for step in 1..=3u32 {
            let actions = b.tick(t0 + HOLD + TICK * step, 1, &groups, NONE);
            assert_eq!(actions.len(), 1, "step {step}: {actions:?}");
            // Each hand-over is done by the next tick.
            let Action::Balance { fragment, .. } = actions[0] else {
                panic!("{actions:?}");
            };
            groups.retain(|g| g.fragment != fragment);
            handed.extend(actions);
        }
        assert_eq!(
            handed,
            (0..3)
                .map(|fragment| Action::Balance { fragment, to: 2 })
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_member_that_handed_leadership_away_is_left_alone_for_the_cooldown() {
        let mut b = Balancer::default();
        let t0 = Instant::now();
        let groups = [led(0, 1, 2, &[2, 3])];
        let handed = BTreeMap::from([(2, t0)]);
        assert!(b.tick(t0, 1, &groups, &handed).is_empty());
        assert!(b.tick(t0 + HOLD + TICK, 1, &groups, &handed).is_empty());
        assert!(b.tick(t0 + COOLDOWN / 2, 1, &groups, &handed).is_empty());
        assert_eq!(
            b.tick(t0 + COOLDOWN, 1, &groups, &handed),
            vec![Action::Balance { fragment: 0, to: 2 }]
        );
    }

    #[test]
    fn a_hand_over_that_did_not_happen_is_redone_elsewhere_and_the_target_left_alone() {
        let mut b = Balancer::default();
        let t0 = Instant::now();
        let groups = [led(0, 7, 2, &[2, 3])];
        b.tick(t0, 1, &groups, NONE);
        let t1 = t0 + HOLD;
        assert_eq!(
            b.tick(t1, 1, &groups, NONE),
            vec![Action::Balance { fragment: 0, to: 2 }]
        );
        // Still leading in the same term: member 2 went down meanwhile.
        let gone = [led(0, 7, 2, &[3])];
        assert!(b.tick(t1 + TICK, 1, &gone, NONE).is_empty());
        assert_eq!(
            b.tick(t1 + GRACE, 1, &gone, NONE),
            vec![Action::Redo {
                fragment: 0,
                failed: 2,
                to: 3
            }]
        );
        // Member 3 took over; member 2 is back, but leadership that returns
        // to this member is not handed to 2 during the cooldown.
        assert!(b.tick(t1 + GRACE + TICK, 1, &[], NONE).is_empty());
        let back = [led(0, 9, 2, &[2, 3])];
        let t2 = t1 + GRACE + TICK * 2;
        assert!(b.tick(t2, 1, &back, NONE).is_empty());
        assert!(b.tick(t2 + HOLD, 1, &back, NONE).is_empty());
        assert_eq!(
            b.tick(t1 + GRACE + COOLDOWN, 1, &back, NONE),
            vec![Action::Balance { fragment: 0, to: 2 }]
        );
    }

    #[test]
    fn a_new_term_ends_a_hand_over_and_a_lone_target_is_asked_again() {
        let mut b = Balancer::default();
        let t0 = Instant::now();
        let groups = [led(0, 3, 2, &[2])];
        b.tick(t0, 1, &groups, NONE);
        assert_eq!(b.tick(t0 + HOLD, 1, &groups, NONE).len(), 1);
        // Re-elected here in a later term: not the hand-over's doing, and
        // not redone.
        let later = [led(0, 4, 2, &[2])];
        assert!(b.tick(t0 + HOLD + GRACE, 1, &later, NONE).is_empty());
        assert!(b.started.is_empty());
        // No other member could take over: the same one is asked again.
        let mut b = Balancer::default();
        b.tick(t0, 1, &groups, NONE);
        b.tick(t0 + HOLD, 1, &groups, NONE);
        assert_eq!(
            b.tick(t0 + HOLD + GRACE, 1, &[led(0, 3, 2, &[])], NONE),
            vec![Action::Redo {
                fragment: 0,
                failed: 2,
                to: 2
            }]
        );
    }
}
