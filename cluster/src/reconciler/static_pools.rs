//! The static-NodePool half of a tick: keep each static pool at `spec.replicas` NodeClaims
//! (upstream's `static.provisioning` and `static.deprovisioning` controllers).

use super::{Event, Reconciler, StaticChange, Tick};
use crate::deletion::DeletionCause;
use crate::provisioner::static_node_claim;
use crate::static_capacity::{Scale, node_limit, scale, scale_down_choice, static_claim_counts};
use crate::{Action, ClusterState};
use karpenter_disruption::static_pool::template_claim;
use karpenter_scheduling::model::Millis;
use std::collections::BTreeSet;

/// How long a NodeClaim the reconciler created (or asked to delete) counts as such before the
/// index shows it: long enough for a watch to deliver it, short enough that a request which
/// failed is soon decided again.
pub const STATIC_OBSERVE_MS: Millis = 30_000;

impl Reconciler {
    /// Creates or deletes NodeClaims so that every valid static pool not being deleted has
    /// `replicas` active ones, within `limits.nodes`.
    pub(super) fn keep_static(&mut self, index: &ClusterState, now: Millis, tick: &mut Tick) {
        let claims = index.node_claims();
        self.static_launches
            .retain(|name, (_, until)| *until > now && !claims.contains_key(name));
        self.static_deletions.retain(|name, until| {
            *until > now && claims.get(name).is_some_and(|c| !c.is_deleting())
        });
        let pools: Vec<_> = index
            .node_pools()
            .values()
            .filter(|p| p.is_static() && p.metadata.deletion_timestamp.is_none())
            // Upstream waits for a Ready pool; an invalid one (ValidationSucceeded=False) is
            // not.
            .filter(|p| p.validate().is_ok())
            .collect();
        // Without static pools (the usual case) a tick costs nothing here.
        let held: BTreeSet<String> = if pools.is_empty() {
            BTreeSet::new()
        } else {
            self.orchestrator
                .disrupting()
                .iter()
                .filter_map(|node| index.nodes().get(node)?.node_claim.clone())
                .collect()
        };
        let deleting: BTreeSet<String> = self.static_deletions.keys().cloned().collect();
        let mut all_counts = if pools.is_empty() {
            Default::default()
        } else {
            static_claim_counts(index, &held, &deleting)
        };
        for (pool, _) in self.static_launches.values() {
            if let Some(c) = all_counts.get_mut(pool) {
                c.active += 1;
            }
        }
        for pool in pools {
            let name = pool.name();
            let replicas = pool.spec.replicas.unwrap_or(0);
            let counts = all_counts.remove(name).unwrap_or_default();
            let decision = scale(replicas, node_limit(pool), counts);
            if decision != Scale::LimitReached {
                self.static_limited.remove(name);
            }
            let change = match decision {
                Scale::Steady => continue,
                Scale::LimitReached => {
                    // Reported when it starts and then every half minute, as upstream
                    // requeues a pool at its limit.
                    if self
                        .static_limited
                        .get(name)
                        .is_some_and(|at| now - at < STATIC_OBSERVE_MS)
                    {
                        continue;
                    }
                    self.static_limited.insert(name.to_owned(), now);
                    StaticChange::LimitReached
                }
                Scale::Up(n) => {
                    let mut created = Vec::new();
                    for _ in 0..n {
                        let taken = |c: &str| {
                            claims.contains_key(c)
                                || self.static_launches.contains_key(c)
                                || created.iter().any(|x: &String| x == c)
                        };
                        let claim_name = self.names.next(name, &taken);
                        tick.actions.push(Action::LaunchNodeClaim {
                            claim: Box::new(static_node_claim(&claim_name, pool, now)),
                            plan: Box::new(template_claim(name)),
                        });
                        created.push(claim_name);
                    }
                    for c in &created {
                        self.static_launches
                            .insert(c.clone(), (name.to_owned(), now + STATIC_OBSERVE_MS));
                    }
                    StaticChange::Provision(created)
                }
                Scale::Down(n) => {
                    let skip: BTreeSet<String> = held.union(&deleting).cloned().collect();
                    let chosen = scale_down_choice(index, name, n as usize, &skip, now);
                    if chosen.is_empty() {
                        // Only claims just created and not yet in the index are extra:
                        // they are removed once it shows them.
                        continue;
                    }
                    for c in &chosen {
                        tick.actions.push(Action::DeleteNodeClaim {
                            node_claim: c.clone(),
                            cause: DeletionCause::Overprovisioned,
                        });
                        self.static_deletions
                            .insert(c.clone(), now + STATIC_OBSERVE_MS);
                    }
                    StaticChange::Deprovision(chosen)
                }
            };
            tick.events.push(Event::StaticCapacity {
                node_pool: name.to_owned(),
                current: counts.active,
                desired: replicas,
                change,
            });
        }
        let until = self
            .static_launches
            .values()
            .map(|(_, t)| *t)
            .chain(self.static_deletions.values().copied())
            .min();
        if let Some(t) = until {
            tick.wake_at(t);
        }
    }
}
