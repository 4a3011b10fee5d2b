//! API requests from the control plane's audit log (`scripts/control-plane.sh` logs every
//! request at `Metadata` level, as JSON lines): who sent what, by verb, in which phase, and
//! whether a client kept to its token bucket (`--kube-client-qps`/`--kube-client-burst`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::BufRead as _;

#[derive(Debug, Deserialize)]
struct User {
    #[serde(default)]
    username: String,
}

#[derive(Debug, Default, Deserialize)]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    subresource: String,
}

#[derive(Debug, Deserialize)]
struct Status {
    #[serde(default)]
    code: u16,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    stage: String,
    verb: String,
    user: User,
    #[serde(default)]
    object_ref: Option<ObjectRef>,
    #[serde(default)]
    response_status: Option<Status>,
    request_received_timestamp: String,
}

/// Requests of one client in one window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiCounts {
    /// Every request, by verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, `deletecollection`).
    pub by_verb: BTreeMap<String, u64>,
    /// Of those, the kubelet's work (Node and Pod status, Leases in `kube-node-lease`): kwok
    /// does it for the peer, the fake provider's kubelet inside our controller.
    pub kubelet: u64,
    /// Pod evictions (`create` on `pods/eviction`).
    pub evictions: u64,
    /// Answered 429 (throttled by API Priority and Fairness) and 409 (conflict).
    pub throttled: u64,
    pub conflicts: u64,
}

impl ApiCounts {
    pub fn total(&self) -> u64 {
        self.by_verb.values().sum()
    }
    pub fn add(&mut self, other: &ApiCounts) {
        for (verb, n) in &other.by_verb {
            *self.by_verb.entry(verb.clone()).or_default() += n;
        }
        self.kubelet += other.kubelet;
        self.evictions += other.evictions;
        self.throttled += other.throttled;
        self.conflicts += other.conflicts;
    }
}

/// What the kubelet writes: its Node's and Pods' status, and its Lease.
fn is_kubelet_work(o: &ObjectRef) -> bool {
    let status = o.subresource == "status" && matches!(o.resource.as_str(), "nodes" | "pods");
    status || (o.resource == "leases" && o.namespace == "kube-node-lease")
}

/// Counts per window index and actor, and each actor's request times (ms).
#[derive(Debug, Default)]
pub struct Audit {
    /// `[window][actor]`; window `windows.len()` holds requests outside every window.
    pub counts: Vec<BTreeMap<String, ApiCounts>>,
    pub times: BTreeMap<String, Vec<i64>>,
}

/// The files of the audit log at `path`, oldest first: the kube-apiserver rotates the log at
/// `--audit-log-maxsize` (100 MB by default) into `<stem>-<timestamp>.<ext>` beside it, so a
/// large run's early requests are only in those.
fn log_files(path: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let dir = path.parent().unwrap_or_else(|| std::path::Path::new("."));
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let ext = path
        .extension()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let prefix = format!("{stem}-");
    let suffix = format!(".{ext}");
    let mut rotated = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        let name = p.file_name().and_then(|s| s.to_str()).unwrap_or_default();
        if name.starts_with(&prefix) && name.ends_with(&suffix) {
            rotated.push(p);
        }
    }
    // The timestamps in the names are fixed-width, so name order is time order.
    rotated.sort();
    if path.exists() {
        rotated.push(path.to_path_buf());
    }
    Ok(rotated)
}

/// Reads the audit log at `path` and its rotated backups, attributing each request to the
/// actor whose user name it carries (`actors`: actor → user name) and to the window
/// `[start, end)` (ms) it arrived in. A request is counted once: at `ResponseComplete`, or at
/// `ResponseStarted` for a watch.
///
/// # Errors
/// A file cannot be read, or there is none.
pub fn read(
    path: &std::path::Path,
    actors: &BTreeMap<String, String>,
    windows: &[(i64, i64)],
) -> std::io::Result<Audit> {
    let by_user: BTreeMap<&str, &str> = actors
        .iter()
        .map(|(actor, user)| (user.as_str(), actor.as_str()))
        .collect();
    let mut audit = Audit {
        counts: vec![BTreeMap::new(); windows.len() + 1],
        times: BTreeMap::new(),
    };
    let files = log_files(path)?;
    if files.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no audit log at {}", path.display()),
        ));
    }
    let lines = files
        .iter()
        .map(|f| std::fs::File::open(f).map(|file| std::io::BufReader::new(file).lines()));
    for line in lines
        .collect::<std::io::Result<Vec<_>>>()?
        .into_iter()
        .flatten()
    {
        let line = line?;
        // Cheap filter before parsing: most lines are the control plane's own components.
        if !by_user.keys().any(|u| line.contains(u)) {
            continue;
        }
        let Ok(ev) = serde_json::from_str::<Event>(&line) else {
            continue;
        };
        let counted = if ev.verb == "watch" {
            ev.stage == "ResponseStarted"
        } else {
            ev.stage == "ResponseComplete"
        };
        if !counted {
            continue;
        }
        let Some(actor) = by_user.get(ev.user.username.as_str()) else {
            continue;
        };
        let Ok(at) = ev.request_received_timestamp.parse::<jiff::Timestamp>() else {
            continue;
        };
        let at = at.as_millisecond();
        let window = windows
            .iter()
            .position(|(s, e)| at >= *s && at < *e)
            .unwrap_or(windows.len());
        let c = audit.counts[window].entry((*actor).to_owned()).or_default();
        *c.by_verb.entry(ev.verb.clone()).or_default() += 1;
        let obj = ev.object_ref.unwrap_or_default();
        if is_kubelet_work(&obj) {
            c.kubelet += 1;
        }
        if ev.verb == "create" && obj.resource == "pods" && obj.subresource == "eviction" {
            c.evictions += 1;
        }
        match ev.response_status.map(|s| s.code) {
            Some(429) => c.throttled += 1,
            Some(409) => c.conflicts += 1,
            _ => {}
        }
        audit.times.entry((*actor).to_owned()).or_default().push(at);
    }
    for t in audit.times.values_mut() {
        t.sort_unstable();
    }
    Ok(audit)
}

/// How a client's request times compare with a token bucket of `qps` and `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Budget {
    pub qps: f64,
    pub burst: f64,
    /// Most requests in any one second, and in any ten seconds (per second).
    pub peak_1s: u64,
    pub peak_10s_per_sec: f64,
    /// The deepest the bucket went below empty: requests that arrived beyond what the bucket
    /// allows (a few are the server's timestamps not being the client's send times).
    pub overdraft: f64,
}

/// Replays `times` (sorted ms) through a full bucket of `burst` tokens refilled at `qps`.
pub fn budget(times: &[i64], qps: f64, burst: f64) -> Budget {
    let mut tokens = burst;
    let mut last = times.first().copied().unwrap_or(0);
    let mut overdraft: f64 = 0.0;
    for &t in times {
        tokens = (tokens + (t - last) as f64 / 1000.0 * qps).min(burst);
        last = t;
        tokens -= 1.0;
        overdraft = overdraft.max(-tokens);
    }
    let peak = |window_ms: i64| {
        let mut best = 0_usize;
        let mut lo = 0;
        for hi in 0..times.len() {
            while times[hi] - times[lo] >= window_ms {
                lo += 1;
            }
            best = best.max(hi - lo + 1);
        }
        best
    };
    Budget {
        qps,
        burst,
        peak_1s: peak(1000) as u64,
        peak_10s_per_sec: peak(10_000) as f64 / 10.0,
        overdraft,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(user: &str, verb: &str, stage: &str, at: &str, resource: &str, sub: &str) -> String {
        serde_json::json!({
            "kind": "Event", "stage": stage, "verb": verb,
            "user": {"username": user},
            "objectRef": {"resource": resource, "subresource": sub, "namespace": "kube-node-lease"},
            "responseStatus": {"code": 200},
            "requestReceivedTimestamp": at,
        })
        .to_string()
    }

    #[test]
    fn requests_are_counted_once_by_actor_verb_and_window() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let lines = [
            line(
                "sa:ctl",
                "list",
                "ResponseComplete",
                "2026-01-01T00:00:00.500Z",
                "nodes",
                "",
            ),
            line(
                "sa:ctl",
                "watch",
                "ResponseStarted",
                "2026-01-01T00:00:00.600Z",
                "nodes",
                "",
            ),
            line(
                "sa:ctl",
                "watch",
                "ResponseComplete",
                "2026-01-01T00:00:00.600Z",
                "nodes",
                "",
            ),
            line(
                "sa:ctl",
                "patch",
                "ResponseComplete",
                "2026-01-01T00:00:02.000Z",
                "nodes",
                "status",
            ),
            line(
                "sa:ctl",
                "create",
                "ResponseComplete",
                "2026-01-01T00:00:02.100Z",
                "pods",
                "eviction",
            ),
            line(
                "admin",
                "get",
                "ResponseComplete",
                "2026-01-01T00:00:00.500Z",
                "nodes",
                "",
            ),
        ];
        // The first two lines went to a backup the kube-apiserver rotated away.
        std::fs::write(
            dir.path().join("audit-2026-01-01T00-00-01.000.log"),
            lines[..2].join("\n"),
        )
        .expect("write backup");
        std::fs::write(&path, lines[2..].join("\n")).expect("write");
        std::fs::write(dir.path().join("audit-policy.yaml"), "rules: []").expect("write");
        let start = "2026-01-01T00:00:00Z"
            .parse::<jiff::Timestamp>()
            .expect("ts")
            .as_millisecond();
        let actors = BTreeMap::from([("controller".to_owned(), "sa:ctl".to_owned())]);
        let windows = [(start, start + 1000), (start + 1000, start + 3000)];
        let audit = read(&path, &actors, &windows).expect("read");
        let first = &audit.counts[0]["controller"];
        assert_eq!(first.by_verb.get("list"), Some(&1));
        assert_eq!(first.by_verb.get("watch"), Some(&1), "a watch counts once");
        assert_eq!(first.total(), 2);
        let second = &audit.counts[1]["controller"];
        assert_eq!(second.kubelet, 1);
        assert_eq!(second.evictions, 1);
        assert!(audit.counts[2].is_empty());
        assert_eq!(audit.times["controller"].len(), 4);
    }

    #[test]
    fn the_bucket_allows_a_burst_then_its_rate() {
        // 300 at once, then 10 a second for 10 seconds: within qps 10, burst 300.
        let mut times: Vec<i64> = vec![0; 300];
        times.extend((1..=100).map(|i| i * 100));
        let ok = budget(&times, 10.0, 300.0);
        assert!(ok.overdraft < 1.0, "{ok:?}");
        // The busiest second holds the 300 and the nine at 100..=900 ms.
        assert_eq!(ok.peak_1s, 309);
        // 400 at once overdraws a burst of 300 by 100.
        let over = budget(&vec![0; 400], 10.0, 300.0);
        assert!((over.overdraft - 100.0).abs() < 1e-9, "{over:?}");
    }
}
