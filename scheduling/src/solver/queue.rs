//! The scheduling queue (`queue.go`): pods by cpu then memory descending, then creation
//! time, then UID (and key, so the order is total); a failed pod goes to the back, and the
//! queue stops once every remaining pod has failed since the last success.

use crate::model::Pod;
use std::cmp::Ordering;
use std::collections::VecDeque;

/// Upstream's `byCPUAndMemoryDescending`, made total by the pod key.
pub(crate) fn compare(a: &Pod, b: &Pod) -> Ordering {
    b.requests
        .cpu_millis
        .cmp(&a.requests.cpu_millis)
        .then_with(|| b.requests.memory.cmp(&a.requests.memory))
        .then_with(|| a.created_at.cmp(&b.created_at))
        .then_with(|| a.uid.cmp(&b.uid))
        .then_with(|| a.namespace.cmp(&b.namespace))
        .then_with(|| a.name.cmp(&b.name))
}

/// A queue of pod indices.
#[derive(Debug)]
pub(crate) struct Queue {
    pods: VecDeque<usize>,
    last_len: Vec<Option<usize>>,
}

impl Queue {
    /// Sorts `pods` (indices into `all`) into scheduling order.
    pub(crate) fn new(all: &[Pod], mut pods: Vec<usize>) -> Self {
        pods.sort_by(|&a, &b| compare(&all[a], &all[b]));
        Queue {
            pods: pods.into(),
            last_len: vec![None; all.len()],
        }
    }

    /// The next pod, or `None` once a full cycle made no progress.
    pub(crate) fn pop(&mut self) -> Option<usize> {
        let &p = self.pods.front()?;
        if self.last_len[p] == Some(self.pods.len()) {
            return None;
        }
        self.pods.pop_front();
        Some(p)
    }

    /// Requeues a pod that failed.
    pub(crate) fn push(&mut self, p: usize) {
        self.pods.push_back(p);
        self.last_len[p] = Some(self.pods.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, cpu: i64, mem: i64, created: i64) -> Pod {
        let mut p = Pod {
            namespace: "ns".into(),
            name: name.into(),
            created_at: created,
            ..Pod::default()
        };
        p.requests.cpu_millis = cpu;
        p.requests.memory = mem;
        p
    }

    #[test]
    fn orders_by_cpu_memory_then_age() {
        let pods = vec![
            pod("a", 100, 1, 0),
            pod("b", 200, 1, 0),
            pod("c", 200, 2, 5),
            pod("d", 200, 2, 1),
        ];
        let mut q = Queue::new(&pods, vec![0, 1, 2, 3]);
        let order: Vec<usize> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![3, 2, 1, 0]);
    }

    #[test]
    fn stops_after_a_cycle_without_progress() {
        let pods = vec![pod("a", 1, 1, 0), pod("b", 1, 1, 1)];
        let mut q = Queue::new(&pods, vec![0, 1]);
        let a = q.pop().unwrap();
        q.push(a);
        let b = q.pop().unwrap();
        q.push(b);
        assert_eq!(q.pop(), None);
    }
}
