//! The optimiser's deterministic work budget.
//!
//! The crate reads no clock, so effort is counted in abstract work units (roughly one unit
//! per resource comparison). A caller that wants a wall-clock deadline passes a callback;
//! that callback is the only source of non-determinism, and it is polled only every
//! [`POLL_EVERY`] units so its cost stays negligible.

/// How many work units pass between two polls of the deadline callback.
const POLL_EVERY: u64 = 1 << 16;

/// Work units left, plus the caller's optional "stop now" callback.
pub(crate) struct Budget<'d> {
    left: u64,
    spent: u64,
    next_poll: u64,
    deadline: Option<&'d dyn Fn() -> bool>,
    exhausted: bool,
}

impl<'d> Budget<'d> {
    /// A budget of `units` work units.
    pub(crate) fn new(units: u64, deadline: Option<&'d dyn Fn() -> bool>) -> Self {
        Budget {
            left: units,
            spent: 0,
            next_poll: POLL_EVERY,
            deadline,
            exhausted: false,
        }
    }

    /// Records `units` of work; false once the budget (or the deadline) has run out, and
    /// from then on.
    pub(crate) fn spend(&mut self, units: u64) -> bool {
        if self.exhausted {
            return false;
        }
        let units = units.max(1);
        self.spent = self.spent.saturating_add(units);
        if units > self.left {
            self.left = 0;
            self.exhausted = true;
            return false;
        }
        self.left -= units;
        if self.spent >= self.next_poll {
            self.next_poll = self.spent.saturating_add(POLL_EVERY);
            if self.deadline.is_some_and(|stop| stop()) {
                self.exhausted = true;
                return false;
            }
        }
        true
    }

    /// Whether the budget or the deadline has run out.
    pub(crate) fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// Work units spent so far.
    pub(crate) fn spent(&self) -> u64 {
        self.spent
    }

    /// A budget of at most `fraction` of the units left (and the same deadline), for a
    /// step that must not starve the ones after it; [`Self::absorb`] charges its work back.
    pub(crate) fn portion(&self, fraction: f64) -> Budget<'d> {
        let units = if self.exhausted {
            0
        } else {
            (self.left as f64 * fraction.clamp(0.0, 1.0)) as u64
        };
        let mut part = Budget::new(units, self.deadline);
        part.exhausted = self.exhausted;
        part
    }

    /// A [`Self::portion`] of at most `most` units.
    pub(crate) fn portion_capped(&self, fraction: f64, most: f64) -> Budget<'d> {
        let mut part = self.portion(fraction);
        if (part.left as f64) > most {
            part.left = most.max(0.0) as u64;
        }
        part
    }

    /// Work units left.
    pub(crate) fn left(&self) -> u64 {
        self.left
    }

    /// Charges the work of a [`Self::portion`] to this budget. Running out of a portion
    /// does not exhaust this budget; a deadline seen by the portion does.
    pub(crate) fn absorb(&mut self, part: &Budget<'d>) {
        let spent = part.spent;
        self.spent = self.spent.saturating_add(spent);
        self.left = self.left.saturating_sub(spent);
        if part.exhausted && part.deadline.is_some_and(|stop| stop()) {
            self.exhausted = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_portion_is_charged_back_without_exhausting_the_whole() {
        let mut whole = Budget::new(1_000, None);
        assert!(whole.spend(200));
        let mut part = whole.portion(0.25);
        assert!(part.spend(150));
        assert!(!part.spend(100), "200 units is the portion's limit");
        whole.absorb(&part);
        assert_eq!(whole.spent(), 200 + 250);
        assert!(!whole.exhausted());
        assert!(whole.spend(550));
        assert!(!whole.spend(1));
        let none = whole.portion(0.5);
        assert!(none.exhausted());
    }

    #[test]
    fn a_capped_portion_gets_the_smaller_of_its_share_and_the_cap() {
        let whole = Budget::new(1_000, None);
        let mut capped = whole.portion_capped(0.5, 100.0);
        assert!(capped.spend(100));
        assert!(!capped.spend(1), "the cap, not half of 1,000");
        let mut share = whole.portion_capped(0.1, 500.0);
        assert!(share.spend(100));
        assert!(!share.spend(1), "a tenth, under the cap");
        assert_eq!(whole.left(), 1_000);
    }

    #[test]
    fn runs_out_and_stays_out() {
        let mut b = Budget::new(10, None);
        assert!(b.spend(4));
        assert!(!b.spend(7));
        assert!(b.exhausted());
        assert!(!b.spend(1));
        assert_eq!(b.spent(), 11);
    }

    #[test]
    fn polls_the_deadline_only_every_so_often() {
        let calls = Cell::new(0u32);
        let stop = || {
            calls.set(calls.get() + 1);
            true
        };
        let mut b = Budget::new(u64::MAX, Some(&stop));
        assert!(b.spend(POLL_EVERY - 1));
        assert_eq!(calls.get(), 0);
        assert!(!b.spend(1));
        assert_eq!(calls.get(), 1);
        assert!(b.exhausted());
    }
}
