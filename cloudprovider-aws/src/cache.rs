//! Time and caching: an injectable [`Clock`], a TTL cache, and the insufficient-capacity
//! cache that marks offerings unavailable for a while after EC2 had no capacity for them.

use karpenter_cloudprovider::OfferingRef;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

/// A source of the current time. Everything in this crate that expires reads time through
/// it, so tests move time forward instead of sleeping.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that only moves when told to; clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<SystemTime>>);

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: SystemTime) -> Self {
        Self(Arc::new(Mutex::new(start)))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut t = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *t += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A map whose entries expire `ttl` after they were inserted. Reads of expired entries miss;
/// expired entries are dropped on the next write.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    clock: Arc<dyn Clock>,
    ttl: Duration,
    entries: Mutex<BTreeMap<K, (SystemTime, V)>>,
}

impl<K: Ord + Clone, V: Clone> TtlCache<K, V> {
    /// An empty cache whose entries live for `ttl` on `clock`.
    pub fn new(clock: Arc<dyn Clock>, ttl: Duration) -> Self {
        Self {
            clock,
            ttl,
            entries: Mutex::new(BTreeMap::new()),
        }
    }

    /// The entry for `key` if it has not expired.
    pub fn get(&self, key: &K) -> Option<V> {
        let now = self.clock.now();
        lock(&self.entries)
            .get(key)
            .filter(|(expires, _)| *expires > now)
            .map(|(_, v)| v.clone())
    }

    /// Stores `value` for `key`, expiring `ttl` from now.
    pub fn insert(&self, key: K, value: V) {
        let now = self.clock.now();
        let mut entries = lock(&self.entries);
        entries.retain(|_, (expires, _)| *expires > now);
        entries.insert(key, (now + self.ttl, value));
    }

    /// Forgets `key`.
    pub fn remove(&self, key: &K) {
        lock(&self.entries).remove(key);
    }

    /// Forgets everything.
    pub fn clear(&self) {
        lock(&self.entries).clear();
    }
}

/// How long an offering stays unavailable after an insufficient-capacity error (Karpenter's
/// `UnavailableOfferingsTTL`).
pub const UNAVAILABLE_OFFERINGS_TTL: Duration = Duration::from_secs(180);

/// Offerings EC2 recently had no capacity for. Cheap to query on every scheduling pass; the
/// sequence number changes whenever the set changes so derived caches can be invalidated.
#[derive(Debug)]
pub struct UnavailableOfferings {
    cache: TtlCache<OfferingRef, ()>,
    seq: std::sync::atomic::AtomicU64,
}

impl UnavailableOfferings {
    /// An empty cache with Karpenter's 3-minute TTL.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self::with_ttl(clock, UNAVAILABLE_OFFERINGS_TTL)
    }

    /// An empty cache with another TTL.
    pub fn with_ttl(clock: Arc<dyn Clock>, ttl: Duration) -> Self {
        Self {
            cache: TtlCache::new(clock, ttl),
            seq: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Marks `offering` unavailable for the TTL from now.
    pub fn mark_unavailable(&self, offering: OfferingRef) {
        tracing::debug!(%offering, "marking offering unavailable");
        self.cache.insert(offering, ());
        self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether `instance_type` in `zone` with `capacity_type` is currently unavailable.
    pub fn is_unavailable(&self, instance_type: &str, zone: &str, capacity_type: &str) -> bool {
        self.cache
            .get(&OfferingRef {
                instance_type: instance_type.to_string(),
                zone: zone.to_string(),
                capacity_type: capacity_type.to_string(),
            })
            .is_some()
    }

    /// A number that changes whenever an offering is marked.
    pub fn seq_num(&self) -> u64 {
        self.seq.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_cache_expires_on_the_injected_clock() {
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
        let cache = TtlCache::new(Arc::new(clock.clone()), Duration::from_secs(60));
        cache.insert("a", 1);
        assert_eq!(cache.get(&"a"), Some(1));
        clock.advance(Duration::from_secs(59));
        assert_eq!(cache.get(&"a"), Some(1));
        clock.advance(Duration::from_secs(1));
        assert_eq!(cache.get(&"a"), None);
    }

    #[test]
    fn unavailable_offerings_last_three_minutes() {
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
        let cache = UnavailableOfferings::new(Arc::new(clock.clone()));
        let seq = cache.seq_num();
        cache.mark_unavailable(OfferingRef {
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: "spot".into(),
        });
        assert_ne!(cache.seq_num(), seq);
        assert!(cache.is_unavailable("m5.large", "us-east-1a", "spot"));
        assert!(!cache.is_unavailable("m5.large", "us-east-1a", "on-demand"));
        assert!(!cache.is_unavailable("m5.large", "us-east-1b", "spot"));
        clock.advance(Duration::from_secs(179));
        assert!(cache.is_unavailable("m5.large", "us-east-1a", "spot"));
        clock.advance(Duration::from_secs(1));
        assert!(!cache.is_unavailable("m5.large", "us-east-1a", "spot"));
    }
}
