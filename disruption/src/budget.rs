//! NodePool disruption budgets: how many of a pool's nodes may be disrupted now, per reason.
//!
//! Upstream semantics (`GetAllowedDisruptionsByReason`, `BuildDisruptionBudgetMapping`):
//! every budget that applies to the reason (no reasons listed means all) and is active at
//! `now` caps the count; the smallest cap wins; a percentage is of the pool's node count,
//! rounded up; nodes already being disrupted (marked for deletion or not ready) are
//! subtracted. A budget that cannot be evaluated (bad `nodes`, bad cron, a duration without a
//! schedule) fails closed and allows nothing.

use chrono::{DateTime, Utc};
use croner::parser::{CronParser, Seconds, Year};
use karpenter_cloudprovider::v1::{Budget, BudgetNodes, DisruptionReason};
use karpenter_scheduling::model::Millis;
use std::collections::BTreeMap;

/// Why a budget cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// `nodes` is neither a count nor a percentage.
    #[error("budget nodes {0:?} is not a count or a percentage")]
    Nodes(String),
    /// The schedule is not a 5-field cron expression or macro.
    #[error("budget schedule {schedule:?}: {reason}")]
    Schedule {
        /// The schedule text.
        schedule: String,
        /// The parser's complaint.
        reason: String,
    },
    /// A duration without a schedule (the API rejects it; upstream fails closed).
    #[error("budget has a duration but no schedule")]
    DurationWithoutSchedule,
    /// `now` is outside the range the calendar can represent.
    #[error("time {0} ms is out of range")]
    Time(Millis),
}

fn parse_schedule(schedule: &str) -> Result<croner::Cron, BudgetError> {
    // croner knows no `@midnight`; upstream's robfig/cron treats it as `@daily`.
    let text = if schedule.trim() == "@midnight" {
        "@daily"
    } else {
        schedule
    };
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|e| BudgetError::Schedule {
            schedule: schedule.to_owned(),
            reason: e.to_string(),
        })
}

fn to_utc(ms: Millis) -> Result<DateTime<Utc>, BudgetError> {
    DateTime::<Utc>::from_timestamp_millis(ms).ok_or(BudgetError::Time(ms))
}

/// Whether `budget` is active at `now`: always without a schedule; with one, when the
/// schedule fired in `(now - duration, now]` (upstream walks back `duration` and asks whether
/// the next hit is not after `now`). A schedule without a duration is never active.
pub fn is_active(budget: &Budget, now: Millis) -> Result<bool, BudgetError> {
    let Some(schedule) = &budget.schedule else {
        return if budget.duration.is_some() {
            Err(BudgetError::DurationWithoutSchedule)
        } else {
            Ok(true)
        };
    };
    let cron = parse_schedule(schedule)?;
    let duration = budget.duration.as_ref().map_or(0, |d| d.millis());
    let start = to_utc(now.saturating_sub(duration))?;
    let now_utc = to_utc(now)?;
    match cron.find_next_occurrence(&start, false) {
        Ok(next) => Ok(next <= now_utc),
        // No future occurrence at all (e.g. Feb 30): never active.
        Err(_) => Ok(false),
    }
}

/// How many nodes `budget` allows out of `num_nodes` at `now` (`u64::MAX` when inactive).
pub fn budget_allows(budget: &Budget, num_nodes: u64, now: Millis) -> Result<u64, BudgetError> {
    if !is_active(budget, now)? {
        return Ok(u64::MAX);
    }
    let nodes: BudgetNodes = BudgetNodes::parse(&budget.nodes)
        .ok_or_else(|| BudgetError::Nodes(budget.nodes.clone()))?;
    Ok(nodes.allowed(num_nodes))
}

/// The most restrictive active budget of `budgets` for `reason` over a pool of `num_nodes`
/// (`u64::MAX` when none applies). Any budget that cannot be evaluated makes the answer 0.
pub fn allowed_disruptions(
    budgets: &[Budget],
    num_nodes: u64,
    reason: DisruptionReason,
    now: Millis,
) -> u64 {
    let mut allowed = u64::MAX;
    for b in budgets {
        // Upstream evaluates every budget and fails closed on any error, even one for
        // another reason.
        match budget_allows(b, num_nodes, now) {
            Err(_) => return 0,
            Ok(v) => {
                if b.reasons.is_empty() || b.reasons.contains(&reason) {
                    allowed = allowed.min(v);
                }
            }
        }
    }
    allowed
}

/// Node counts of one pool, as budgets see them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolCounts {
    /// Managed, initialized nodes whose instance is not terminating.
    pub nodes: u64,
    /// Of those, nodes being disrupted already (deleting, queued, or not ready).
    pub disrupting: u64,
}

/// Remaining disruptions per NodePool for one reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetMapping {
    remaining: BTreeMap<String, u64>,
}

impl BudgetMapping {
    /// `allowed − disrupting` (never negative) for every pool in `pools`.
    pub fn new<'a>(
        pools: impl IntoIterator<Item = (&'a str, &'a [Budget])>,
        counts: &BTreeMap<String, PoolCounts>,
        reason: DisruptionReason,
        now: Millis,
    ) -> Self {
        let remaining = pools
            .into_iter()
            .map(|(name, budgets)| {
                let c = counts.get(name).copied().unwrap_or_default();
                let allowed = allowed_disruptions(budgets, c.nodes, reason, now);
                (name.to_owned(), allowed.saturating_sub(c.disrupting))
            })
            .collect();
        Self { remaining }
    }

    /// Disruptions still allowed for `pool` (0 for an unknown pool).
    pub fn remaining(&self, pool: &str) -> u64 {
        self.remaining.get(pool).copied().unwrap_or(0)
    }

    /// Takes one disruption from `pool`; false (and nothing taken) when none is left.
    pub fn take(&mut self, pool: &str) -> bool {
        match self.remaining.get_mut(pool) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloudprovider::duration::Duration;

    const HOUR: Millis = 3_600_000;
    // 2024-01-01T00:00:00Z, a Monday.
    const MON_MIDNIGHT: Millis = 1_704_067_200_000;

    fn budget(nodes: &str, schedule: Option<&str>, duration: Option<&str>) -> Budget {
        Budget {
            reasons: Vec::new(),
            nodes: nodes.into(),
            schedule: schedule.map(str::to_owned),
            duration: duration.map(|d| Duration::parse(d).unwrap()),
        }
    }

    #[test]
    fn percentages_round_up_and_counts_are_absolute() {
        let cases = [
            ("10%", 10, 1),
            ("10%", 11, 2),
            ("5%", 10, 1),
            ("0%", 10, 0),
            ("100%", 7, 7),
            ("3", 10, 3),
            ("0", 10, 0),
            ("50%", 0, 0),
        ];
        for (nodes, total, want) in cases {
            assert_eq!(
                budget_allows(&budget(nodes, None, None), total, 0).unwrap(),
                want,
                "{nodes} of {total}"
            );
        }
        assert!(budget_allows(&budget("ten", None, None), 10, 0).is_err());
    }

    #[test]
    fn schedule_windows_table() {
        // (schedule, duration, now, active)
        let cases = [
            ("@daily", "1h", MON_MIDNIGHT, true),
            ("@daily", "1h", MON_MIDNIGHT + HOUR - 1, true),
            ("@daily", "1h", MON_MIDNIGHT + HOUR, false),
            ("@daily", "1h", MON_MIDNIGHT - 1, false),
            ("@midnight", "30m", MON_MIDNIGHT + 10 * 60_000, true),
            ("0 9 * * 1-5", "8h", MON_MIDNIGHT + 10 * HOUR, true),
            (
                "0 9 * * 1-5",
                "8h",
                MON_MIDNIGHT + 5 * 24 * HOUR + 10 * HOUR,
                false,
            ),
            // Day-of-month OR day-of-week (robfig/cron): Wednesday the 3rd matches
            // day-of-week 3 although it is not the 15th; Tuesday the 2nd matches neither.
            ("0 0 15 * 3", "1h", MON_MIDNIGHT + 2 * 24 * HOUR + 1, true),
            ("0 0 15 * 3", "1h", MON_MIDNIGHT + 24 * HOUR + 1, false),
        ];
        for (schedule, duration, now, want) in cases {
            assert_eq!(
                is_active(&budget("0", Some(schedule), Some(duration)), now).unwrap(),
                want,
                "{schedule} {duration} at {now}"
            );
        }
    }

    #[test]
    fn schedule_without_duration_is_inactive_and_duration_alone_fails_closed() {
        assert!(!is_active(&budget("0", Some("@hourly"), None), MON_MIDNIGHT).unwrap());
        assert!(is_active(&budget("0", None, Some("1h")), MON_MIDNIGHT).is_err());
        assert_eq!(
            allowed_disruptions(
                &[budget("0", None, Some("1h"))],
                10,
                DisruptionReason::Empty,
                0
            ),
            0
        );
        assert!(is_active(&budget("0", Some("0 0 * *"), Some("1h")), 0).is_err());
        assert!(is_active(&budget("0", Some("0 0 0 * * *"), Some("1h")), 0).is_err());
    }

    #[test]
    fn most_restrictive_active_budget_for_the_reason_wins() {
        let mut drift_only = budget("0", None, None);
        drift_only.reasons = vec![DisruptionReason::Drifted];
        let budgets = vec![
            budget("50%", None, None),
            drift_only,
            // Inactive at MON_MIDNIGHT + 2h.
            budget("0", Some("@daily"), Some("1h")),
        ];
        let now = MON_MIDNIGHT + 2 * HOUR;
        assert_eq!(
            allowed_disruptions(&budgets, 10, DisruptionReason::Underutilized, now),
            5
        );
        assert_eq!(
            allowed_disruptions(&budgets, 10, DisruptionReason::Drifted, now),
            0
        );
        assert_eq!(
            allowed_disruptions(&budgets, 10, DisruptionReason::Empty, MON_MIDNIGHT),
            0
        );
        assert_eq!(
            allowed_disruptions(&[], 10, DisruptionReason::Empty, now),
            u64::MAX
        );
    }

    #[test]
    fn mapping_subtracts_nodes_already_disrupting() {
        let budgets = vec![budget("3", None, None)];
        let counts: BTreeMap<String, PoolCounts> = [(
            "a".to_string(),
            PoolCounts {
                nodes: 10,
                disrupting: 2,
            },
        )]
        .into();
        let mut m = BudgetMapping::new(
            [("a", budgets.as_slice()), ("b", budgets.as_slice())],
            &counts,
            DisruptionReason::Empty,
            0,
        );
        assert_eq!(m.remaining("a"), 1);
        assert!(m.take("a"));
        assert!(!m.take("a"));
        assert_eq!(m.remaining("b"), 3);
        assert_eq!(m.remaining("zzz"), 0);
    }
}
