//! Leadership balance: each fragment's leadership goes back to its
//! preferred leader (`placement::preferred_leaders`) once that member is up
//! and caught up, so a member that was down or restarted carries its share
//! of the writes again instead of leaving it to the others for good; and
//! it follows a group's writes to the member they arrive at, when most
//! arrive at one.
//!
//! Each group's target is its preferred leader, unless in the last
//! [`WRITE_WINDOW`] at least [`FOLLOW_MIN_WRITES`] writes reached the
//! leader: then a leader that took at least half of them from its own
//! clients keeps the group, and a group with at least
//! [`FOLLOW_SHARE_PERCENT`] % of them forwarded by one other replica goes
//! to that replica (nothing is forwarded then, and that member's groups
//! share their followers' messages and fsyncs: a quarter less CPU per write
//! when clients write through one member, BENCHMARKS.md). The
//! different thresholds for leaving and for staying keep a group from
//! moving back and forth. A group that goes quiet stays where its writes
//! last kept it (a pause in the load moves nothing); any other quiet group
//! goes to its preferred leader.
//!
//! Each member runs the balancer over the groups it leads, once per
//! [`TICK`]. A group it leads whose target is another member is
//! handed to that member after the member could take over
//! (`Group::can_take_over`: acknowledged within the last second, at most a
//! few hundred entries behind) for [`HOLD`] without a break, at most
//! [`PER_TICK`] groups per tick, so leadership moves one group at a time
//! and never to a member that is still catching up or flapping. A member
//! that announced its stop (`Forward::Stopping`, which a stopping member
//! sends every other member before it hands its groups away) is not
//! handed any for [`COOLDOWN`]: a stopping member is left alone. A
//! hand-over that has not happened after [`GRACE`] (the target went down
//! meanwhile; openraft's leader proposes nothing while a transfer is
//! pending) is redone towards another member that can take over, or the
//! same one when there is none, and the target is left alone for
//! [`COOLDOWN`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};
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
/// How long a member that announced its stop, or failed to take it
/// over, is handed none.
pub const COOLDOWN: Duration = Duration::from_secs(30);
/// Most hand-overs a member starts per tick.
pub const PER_TICK: usize = 1;
/// How far back the balancer looks at where a group's writes came from.
pub const WRITE_WINDOW: Duration = Duration::from_secs(5);
/// Fewest writes to a group within [`WRITE_WINDOW`] for where they came
/// from to decide its leader (100 a second); a quieter group stays where
/// its writes last kept it, or goes to its preferred leader.
pub const FOLLOW_MIN_WRITES: u64 = 500;
/// Share of a group's writes, in percent, that one other replica must
/// have forwarded for leadership to move to it.
pub const FOLLOW_SHARE_PERCENT: u64 = 80;

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
    /// The fragment's replicas.
    pub replicas: Vec<NodeId>,
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
    /// Hand `fragment` to the replica most of its writes come through.
    Follow {
        /// The fragment.
        fragment: FragmentId,
        /// That replica.
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

/// A group's write counts per member, as one tick saw them.
type Counts = (Instant, BTreeMap<NodeId, u64>);

/// The balancer's memory from one tick to the next.
#[derive(Debug, Default)]
pub struct Balancer {
    /// Per fragment: the target that could take over, and since when
    /// without a break.
    ready_since: BTreeMap<FragmentId, (NodeId, Instant)>,
    /// Per fragment this member holds: the write counts observed at each
    /// tick within [`WRITE_WINDOW`], oldest first.
    seen: BTreeMap<FragmentId, VecDeque<Counts>>,
    /// Per fragment led: the target its writes last decided (a window
    /// with at least [`FOLLOW_MIN_WRITES`]).
    decided: BTreeMap<FragmentId, NodeId>,
    /// Hand-overs started and not yet seen done.
    started: BTreeMap<FragmentId, Started>,
    /// Members that failed to take over, and when.
    failed: BTreeMap<NodeId, Instant>,
}

impl Balancer {
    /// One tick at `now`: `led` are the groups this member leads, `me` this
    /// member, `stopping` the members that announced their stop and when.
    /// Returns the hand-overs to start.
    pub fn tick(
        &mut self,
        now: Instant,
        me: NodeId,
        led: &[Led],
        stopping: &BTreeMap<NodeId, Instant>,
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
        let cooling: BTreeSet<NodeId> = stopping
            .iter()
            .filter(|(_, at)| now.saturating_duration_since(**at) < COOLDOWN)
            .map(|(node, _)| *node)
            .chain(self.failed.keys().copied())
            .collect();
        self.ready_since
            .retain(|fragment, _| led_now.contains_key(fragment));
        self.decided
            .retain(|fragment, _| led_now.contains_key(fragment));
        let mut balanced = 0;
        for group in led {
            let target = self.target(now, me, group);
            if target == me || self.started.contains_key(&group.fragment) {
                self.ready_since.remove(&group.fragment);
                continue;
            }
            if !group.ready.contains(&target) {
                self.ready_since.remove(&group.fragment);
                continue;
            }
            let since = match self.ready_since.get(&group.fragment) {
                Some((node, since)) if *node == target => *since,
                _ => {
                    self.ready_since.insert(group.fragment, (target, now));
                    now
                }
            };
            if balanced < PER_TICK
                && now.saturating_duration_since(since) >= HOLD
                && !cooling.contains(&target)
            {
                balanced += 1;
                self.ready_since.remove(&group.fragment);
                self.started.insert(
                    group.fragment,
                    Started {
                        to: target,
                        term: group.term,
                        at: now,
                    },
                );
                actions.push(if target == group.preferred {
                    Action::Balance {
                        fragment: group.fragment,
                        to: target,
                    }
                } else {
                    Action::Follow {
                        fragment: group.fragment,
                        to: target,
                    }
                });
            }
        }
        actions
    }

    /// Record `fragment`'s write counts at `now` (the snapshot of this
    /// member's replica's `WriteOrigins`), for every replica this member
    /// holds, led or not, before each [`Self::tick`]: a member that takes
    /// a group over then knows at once how many of its writes came
    /// through it.
    pub fn observe(&mut self, now: Instant, fragment: FragmentId, writes: BTreeMap<NodeId, u64>) {
        let seen = self.seen.entry(fragment).or_default();
        seen.push_back((now, writes));
        while seen.len() > 1
            && seen
                .get(1)
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= WRITE_WINDOW)
        {
            seen.pop_front();
        }
    }

    /// Who should lead `group` (led by `me`) at `now`, from where its
    /// writes came within [`WRITE_WINDOW`] (the module's rule).
    fn target(&mut self, now: Instant, me: NodeId, group: &Led) -> NodeId {
        // Quiet, or observed for less than half the window (no pattern
        // yet): a group its writes last kept here stays, any other goes to
        // its preferred leader.
        let quiet = if self.decided.get(&group.fragment) == Some(&me) {
            me
        } else {
            group.preferred
        };
        let Some(((oldest_at, oldest), (_, latest))) = self
            .seen
            .get(&group.fragment)
            .and_then(|seen| seen.front().zip(seen.back()))
        else {
            return quiet;
        };
        if now.saturating_duration_since(*oldest_at) < WRITE_WINDOW / 2 {
            return quiet;
        }
        let window: BTreeMap<NodeId, u64> = latest
            .iter()
            .map(|(node, n)| {
                (
                    *node,
                    n.saturating_sub(oldest.get(node).copied().unwrap_or(0)),
                )
            })
            .collect();
        let total: u64 = window.values().sum();
        if total < FOLLOW_MIN_WRITES {
            return quiet;
        }
        let busiest = window
            .iter()
            .filter(|(node, _)| **node != me && group.replicas.contains(node))
            .max_by_key(|(_, n)| **n);
        let target = if window.get(&me).copied().unwrap_or(0) * 2 >= total {
            me
        } else {
            match busiest {
                Some((node, n)) if n * 100 >= total * FOLLOW_SHARE_PERCENT => *node,
                _ => group.preferred,
            }
        };
        self.decided.insert(group.fragment, target);
        target
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
        let stopping = self.stopping.lock().clone();
        let now = Instant::now();
        let mut led = Vec::new();
        for (fragment, replica) in &self.replicas {
            balancer.observe(now, *fragment, replica.origins.snapshot());
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
                replicas: self.placement[*fragment as usize].clone(),
            });
        }
        for action in balancer.tick(now, me, &led, &stopping) {
            let (fragment, to) = match action {
                Action::Balance { fragment, to } => {
                    tracing::info!(
                        fragment,
                        to,
                        "handing fragment {fragment}'s leadership to its preferred leader, member {to}"
                    );
                    (fragment, to)
                }
                Action::Follow { fragment, to } => {
                    tracing::info!(
                        fragment,
                        to,
                        "handing fragment {fragment}'s leadership to member {to}, which most of its writes come through"
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
            replicas: vec![1, 2, 3],
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
    fn a_stopping_member_is_left_alone_for_the_cooldown() {
        let mut b = Balancer::default();
        let t0 = Instant::now();
        let groups = [led(0, 1, 2, &[2, 3])];
        let stopping = BTreeMap::from([(2, t0)]);
        assert!(b.tick(t0, 1, &groups, &stopping).is_empty());
        assert!(b.tick(t0 + HOLD + TICK, 1, &groups, &stopping).is_empty());
        assert!(b.tick(t0 + COOLDOWN / 2, 1, &groups, &stopping).is_empty());
        assert_eq!(
            b.tick(t0 + COOLDOWN, 1, &groups, &stopping),
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

    /// Fragment 0 led by member 1 (its preferred leader `preferred`, the
    /// others ready), after `per_second` writes a second for `secs`
    /// seconds, shared out by `shares` (member, percent).
    fn loaded(
        preferred: NodeId,
        secs: u32,
        per_second: u64,
        shares: &[(NodeId, u64)],
    ) -> (Led, BTreeMap<NodeId, u64>) {
        let total = per_second * u64::from(secs);
        let writes = shares.iter().map(|(m, p)| (*m, total * p / 100)).collect();
        (led(0, 1, preferred, &[2, 3]), writes)
    }

    /// The actions of ticks 0, 1, … `secs` of member 1 over `group(s)`,
    /// with the tick each came at, until the first hand-over (after which
    /// member 1 no longer leads the group).
    fn run(secs: u32, group: impl Fn(u32) -> (Led, BTreeMap<NodeId, u64>)) -> Vec<(u32, Action)> {
        let mut b = Balancer::default();
        let t0 = Instant::now();
        for s in 0..=secs {
            let (group, writes) = group(s);
            b.observe(t0 + TICK * s, group.fragment, writes);
            let actions = b.tick(t0 + TICK * s, 1, &[group], NONE);
            if !actions.is_empty() {
                return actions.into_iter().map(|a| (s, a)).collect();
            }
        }
        Vec::new()
    }

    #[test]
    fn leadership_follows_the_writes_to_the_replica_they_come_through() {
        // 90 % of 300 writes a second come through member 2: once half a
        // window has been seen (tick 3) member 2 is the target, and after
        // the hold it is handed the group, once.
        let actions = run(12, |s| loaded(1, s, 300, &[(1, 10), (2, 90)]));
        assert_eq!(actions, vec![(6, Action::Follow { fragment: 0, to: 2 })]);
    }

    #[test]
    fn a_leader_keeps_a_group_whose_writes_mostly_arrive_at_it() {
        // 60 % local: member 1 keeps the group though member 2 is its
        // preferred leader and could take over.
        assert!(run(20, |s| loaded(2, s, 300, &[(1, 60), (2, 40)])).is_empty());
    }

    #[test]
    fn a_pause_in_the_writes_moves_nothing() {
        // 60 % local for 8 s, then no writes: member 1 keeps the group
        // though member 2 is its preferred leader and could take over.
        assert!(run(30, |s| loaded(2, s.min(8), 300, &[(1, 60), (2, 40)])).is_empty());
    }

    #[test]
    fn spread_quiet_or_unplaced_writes_leave_the_group_to_its_preferred_leader() {
        // Spread out (no one forwards 80 %): the preferred leader.
        assert_eq!(
            run(12, |s| loaded(2, s, 300, &[(1, 40), (2, 30), (3, 30)])),
            vec![(3, Action::Balance { fragment: 0, to: 2 })],
            "with no pattern yet the hold starts at once"
        );
        // Too few writes to go by (50 a second): the preferred leader, which
        // is this member, keeps it.
        assert!(run(20, |s| loaded(1, s, 50, &[(1, 10), (2, 90)])).is_empty());
        // Writes through a member that holds no replica of the fragment.
        let unplaced = |s| {
            let (mut group, writes) = loaded(1, s, 300, &[(1, 10), (2, 90)]);
            group.replicas = vec![1, 3];
            group.ready = vec![3];
            (group, writes)
        };
        assert!(run(20, unplaced).is_empty());
    }
}
