//! The `process_*` families that Prometheus client libraries export for the process itself
//! (client_golang's process collector, which upstream's `/metrics` carries), read from
//! `/proc/self` when scraped: CPU seconds, resident and virtual memory, start time, open and
//! maximum file descriptors. Alerts and dashboards written for any exporter use these names.
//! On a system without `/proc` nothing is exported.

use std::fmt::Write as _;

/// `/proc` reports times in USER_HZ ticks, which the kernel fixes at 100 for user space on
/// every architecture Linux supports.
const TICKS_PER_SECOND: f64 = 100.0;

/// What the families report, in their units.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Resident set size, bytes.
    pub resident_bytes: u64,
    /// Virtual memory size, bytes.
    pub virtual_bytes: u64,
    /// Start time since the Unix epoch, seconds.
    pub start_time_seconds: f64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on open file descriptors.
    pub max_fds: u64,
}

/// CPU seconds and start (seconds after boot) from `/proc/<pid>/stat`: fields 14 and 15
/// (utime, stime) and 22 (starttime), counted after the command name, which may itself hold
/// spaces and parentheses.
pub fn parse_stat(stat: &str) -> Option<(f64, f64)> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // The first field after the name is field 3 (state).
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
    let cpu = (field(14)? + field(15)?) / TICKS_PER_SECOND;
    let start = field(22)? / TICKS_PER_SECOND;
    Some((cpu, start))
}

/// A `Vm…:` line of `/proc/<pid>/status` in bytes (the file gives kB).
pub fn parse_status_bytes(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kb * 1024)
    })
}

/// The boot time (`btime`, seconds since the epoch) from `/proc/stat`.
pub fn parse_boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

/// The soft "Max open files" limit from `/proc/<pid>/limits`; `unlimited` as `u64::MAX`.
pub fn parse_max_fds(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    if soft == "unlimited" {
        Some(u64::MAX)
    } else {
        soft.parse().ok()
    }
}

/// This process's figures now, or `None` where `/proc` cannot be read.
pub fn read() -> Option<ProcessStats> {
    let proc = |path: &str| std::fs::read_to_string(path).ok();
    let (cpu_seconds, started_after_boot) = parse_stat(&proc("/proc/self/stat")?)?;
    let status = proc("/proc/self/status")?;
    Some(ProcessStats {
        cpu_seconds,
        resident_bytes: parse_status_bytes(&status, "VmRSS")?,
        virtual_bytes: parse_status_bytes(&status, "VmSize")?,
        start_time_seconds: parse_boot_time(&proc("/proc/stat")?)? + started_after_boot,
        open_fds: std::fs::read_dir("/proc/self/fd").ok()?.count() as u64,
        max_fds: parse_max_fds(&proc("/proc/self/limits")?)?,
    })
}

/// The families in OpenMetrics text, with client_golang's names and help.
pub fn encode(out: &mut String, s: &ProcessStats) {
    let mut family = |name: &str, kind: &str, help: &str, sample: &str, value: String| {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{sample} {value}\n"
        );
    };
    family(
        "process_cpu_seconds",
        "counter",
        "Total user and system CPU time spent in seconds.",
        "process_cpu_seconds_total",
        format!("{}", s.cpu_seconds),
    );
    family(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        "process_resident_memory_bytes",
        s.resident_bytes.to_string(),
    );
    family(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        "process_virtual_memory_bytes",
        s.virtual_bytes.to_string(),
    );
    family(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        "process_start_time_seconds",
        format!("{}", s.start_time_seconds),
    );
    family(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        "process_open_fds",
        s.open_fds.to_string(),
    );
    family(
        "process_max_fds",
        "gauge",
        "Maximum number of open file descriptors.",
        "process_max_fds",
        if s.max_fds == u64::MAX {
            "+Inf".to_owned()
        } else {
            s.max_fds.to_string()
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_parsed() {
        // A command name with a space and a parenthesis, as the kernel prints it.
        let stat = "4242 (karp (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 \
                    7 0 123400 104857600 2560 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((3.0, 1234.0)));
        assert_eq!(parse_stat("garbage"), None);
        let status = "Name:\tkarpenter\nVmSize:\t  102400 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(parse_status_bytes(status, "VmRSS"), Some(10_485_760));
        assert_eq!(parse_status_bytes(status, "VmSize"), Some(104_857_600));
        assert_eq!(parse_status_bytes(status, "VmSwap"), None);
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1764370000\nprocesses 9\n"),
            Some(1_764_370_000.0)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_fds(limits), Some(1024));
        assert_eq!(
            parse_max_fds("Max open files            unlimited            unlimited  files\n"),
            Some(u64::MAX)
        );
    }

    #[test]
    fn this_process_is_read_and_encoded_on_linux() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let s = read().expect("/proc/self readable");
        assert!(
            s.resident_bytes > 0 && s.virtual_bytes >= s.resident_bytes,
            "{s:?}"
        );
        assert!(s.open_fds > 0 && s.max_fds >= s.open_fds, "{s:?}");
        assert!(s.start_time_seconds > 1.6e9, "{s:?}");
        let mut out = String::new();
        encode(&mut out, &s);
        assert!(out.contains("# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total "));
        assert!(out.contains("\nprocess_resident_memory_bytes "), "{out}");
        assert_eq!(out.lines().filter(|l| !l.starts_with('#')).count(), 6);
    }
}
