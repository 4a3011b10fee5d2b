//! Linear programs over non-negative variables, handed to microlp (pure Rust) directly.
//!
//! The master LP and the bound solve dozens of LPs per plan with thousands of terms each.
//! Building them as `good_lp` expressions (a hash map per row, merged term by term) cost as
//! much as microlp's own solve. Rows here are plain term lists, and every coefficient and
//! right-hand side reaches microlp with the value, sign of zero included, that `good_lp`'s
//! `a ≤ b` and `a ≥ b` gave it (`Σ (0 + a_i) x_i ≤ −(0 − b)`, and a `≥` row negated), so
//! microlp solves the same problem and returns the same vertex.

use microlp::{ComparisonOp, LinearExpr, OptimizationDirection, Problem, Variable};

/// A linear program whose variables are all `≥ 0`, built row by row.
pub(crate) struct Lp {
    problem: Problem,
    vars: Vec<Variable>,
}

/// A variable of an [`Lp`], by the order it was added in.
pub(crate) type Var = usize;

impl Lp {
    /// An empty program that minimises its objective.
    pub(crate) fn minimise() -> Self {
        Lp::new(OptimizationDirection::Minimize)
    }

    /// An empty program that maximises its objective.
    pub(crate) fn maximise() -> Self {
        Lp::new(OptimizationDirection::Maximize)
    }

    fn new(direction: OptimizationDirection) -> Self {
        Lp {
            problem: Problem::new(direction),
            vars: Vec::new(),
        }
    }

    /// A new variable `x ≥ 0` with objective coefficient `objective`.
    pub(crate) fn var(&mut self, objective: f64) -> Var {
        let v = self.problem.add_var(0.0 + objective, (0.0, f64::INFINITY));
        self.vars.push(v);
        self.vars.len() - 1
    }

    /// The row `Σ c·x ≤ rhs`. Each variable appears at most once in `terms`.
    pub(crate) fn at_most(&mut self, terms: impl IntoIterator<Item = (Var, f64)>, rhs: f64) {
        self.row(terms, -(0.0 - rhs));
    }

    /// The row `Σ c·x ≥ rhs`, given to the solver as `Σ −c·x ≤ −rhs`. Each variable appears
    /// at most once in `terms`.
    pub(crate) fn at_least(&mut self, terms: impl IntoIterator<Item = (Var, f64)>, rhs: f64) {
        self.row(terms.into_iter().map(|(x, c)| (x, -c)), -(rhs + -0.0));
    }

    /// The row `Σ c·x ≤ rhs` with `rhs` as given.
    fn row(&mut self, terms: impl IntoIterator<Item = (Var, f64)>, rhs: f64) {
        let mut expr = LinearExpr::empty();
        for (x, c) in terms {
            expr.add(self.vars[x], 0.0 + c);
        }
        self.problem.add_constraint(expr, ComparisonOp::Le, rhs);
    }

    /// An optimal value of every variable, in the order they were added; `None` when the
    /// program is infeasible or unbounded, or the solver fails.
    pub(crate) fn solve(&self) -> Option<Vec<f64>> {
        let solution = self.problem.solve().ok()?.into_solution().ok()?;
        Some(self.vars.iter().map(|&v| solution.var_value(v)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_a_small_covering_program_and_its_dual() {
        // min 3a + 5b  s.t.  a + 2b ≥ 4,  2a + b ≥ 5: the optimum is a = 2, b = 1 (11).
        let mut primal = Lp::minimise();
        let a = primal.var(3.0);
        let b = primal.var(5.0);
        primal.at_least([(a, 1.0), (b, 2.0)], 4.0);
        primal.at_least([(a, 2.0), (b, 1.0)], 5.0);
        let x = primal.solve().expect("feasible");
        assert!(
            (x[a] - 2.0).abs() < 1e-9 && (x[b] - 1.0).abs() < 1e-9,
            "{x:?}"
        );

        // Its dual: max 4p + 5q  s.t.  p + 2q ≤ 3,  2p + q ≤ 5, with the same optimum.
        let mut dual = Lp::maximise();
        let p = dual.var(4.0);
        let q = dual.var(5.0);
        dual.at_most([(p, 1.0), (q, 2.0)], 3.0);
        dual.at_most([(p, 2.0), (q, 1.0)], 5.0);
        let y = dual.solve().expect("feasible");
        assert!((4.0 * y[p] + 5.0 * y[q] - 11.0).abs() < 1e-9, "{y:?}");
    }

    #[test]
    fn an_infeasible_program_has_no_solution() {
        let mut lp = Lp::minimise();
        let x = lp.var(1.0);
        lp.at_most([(x, 1.0)], 1.0);
        lp.at_least([(x, 1.0)], 2.0);
        assert!(lp.solve().is_none());
    }
}
