//! Reference answers computed by exhaustive search, for checking the solver on problems small
//! enough to enumerate.

use karpenter_scheduling::model::InstanceType;
use std::sync::Arc;

/// The cheapest price of any available offering of `it`; infinite when it has none.
pub fn min_price(it: &InstanceType) -> f64 {
    it.offerings
        .iter()
        .map(|o| o.price)
        .fold(f64::INFINITY, f64::min)
}

/// The price of the cheapest way to place pods of the given `(cpu millicores, memory bytes)`
/// requests on new nodes: over every partition of the pods into nodes and every choice of a
/// type per node whose allocatable holds its pods (cpu, memory and pod count), at the type's
/// [`min_price`], with the nodes' total cpu capacity within `cpu_limit_millis`. Infinite when
/// nothing fits.
///
/// Exponential in the number of pods (Bell numbers times types per node): keep to about six
/// pods.
pub fn brute_force(
    requests: &[(i64, i64)],
    types: &[Arc<InstanceType>],
    cpu_limit_millis: Option<i64>,
) -> f64 {
    brute_force_apart(
        requests,
        &vec![false; requests.len()],
        types,
        cpu_limit_millis,
    )
}

/// [`brute_force`] where the pods flagged in `apart` may not share a node with each other
/// (as under a required hostname anti-affinity among them).
pub fn brute_force_apart(
    requests: &[(i64, i64)],
    apart: &[bool],
    types: &[Arc<InstanceType>],
    cpu_limit_millis: Option<i64>,
) -> f64 {
    assert_eq!(requests.len(), apart.len(), "one flag per pod");
    let mut search = Search {
        requests,
        apart,
        types,
        limit: cpu_limit_millis.unwrap_or(i64::MAX),
        best: f64::INFINITY,
    };
    search.partitions(0, &mut Vec::new());
    search.best
}

/// One exhaustive search's fixed inputs and best price so far.
struct Search<'a> {
    requests: &'a [(i64, i64)],
    apart: &'a [bool],
    types: &'a [Arc<InstanceType>],
    limit: i64,
    best: f64,
}

/// A node of a partition: cpu, memory and pods, and whether it holds a pod kept apart.
type Block = (i64, i64, i64, bool);

impl Search<'_> {
    /// Every way of adding the pods from `i` on to `blocks`, pricing each complete
    /// partition.
    fn partitions(&mut self, i: usize, blocks: &mut Vec<Block>) {
        if i == self.requests.len() {
            cheapest_types(blocks, self.types, self.limit, 0.0, &mut self.best);
            return;
        }
        let (cpu, mem) = self.requests[i];
        let apart = self.apart[i];
        for b in 0..blocks.len() {
            if apart && blocks[b].3 {
                continue;
            }
            let before = blocks[b];
            blocks[b] = (
                before.0 + cpu,
                before.1 + mem,
                before.2 + 1,
                before.3 || apart,
            );
            self.partitions(i + 1, blocks);
            blocks[b] = before;
        }
        blocks.push((cpu, mem, 1, apart));
        self.partitions(i + 1, blocks);
        blocks.pop();
    }
}

/// Cheapest choice of one type per block with total capacity within the limit.
fn cheapest_types(
    blocks: &[Block],
    types: &[Arc<InstanceType>],
    left: i64,
    spent: f64,
    best: &mut f64,
) {
    if spent >= *best {
        return;
    }
    let Some((&(cpu, mem, n, _), rest)) = blocks.split_first() else {
        *best = spent;
        return;
    };
    for it in types {
        let a = it.allocatable();
        if cpu <= a.cpu_millis && mem <= a.memory && n <= a.pods && it.capacity.cpu_millis <= left {
            cheapest_types(
                rest,
                types,
                left - it.capacity.cpu_millis,
                spent + min_price(it),
                best,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance_types::InstanceTypeBuilder;
    use crate::resources::GI;

    #[test]
    fn two_small_pods_share_the_cheapest_node_that_holds_both() {
        let types = vec![
            InstanceTypeBuilder::new("s", 2, 4).on_demand(0.1).build(),
            InstanceTypeBuilder::new("m", 4, 8).on_demand(0.15).build(),
        ];
        let price = brute_force(&[(1500, GI), (1500, GI)], &types, None);
        assert!((price - 0.15).abs() < 1e-12);
        // A 3-core limit leaves room for one small node only.
        assert!(brute_force(&[(1500, GI), (1500, GI)], &types, Some(3000)).is_infinite());
        // Kept apart, they need a node each.
        let apart = brute_force_apart(&[(1500, GI), (1500, GI)], &[true, true], &types, None);
        assert!((apart - 0.2).abs() < 1e-12);
    }
}
