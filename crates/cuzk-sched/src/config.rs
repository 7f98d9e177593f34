//! How a scheduler is laid out: workers, devices, slots, the host budget.

/// How the scheduler is laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// CPU workers that synthesize partitions.
    pub partition_workers: usize,
    /// More synthesis workers that take only high and urgent partitions, so those start at once even
    /// while every other worker is busy with bulk work.
    pub priority_workers: usize,
    /// GPUs (or simulated devices).
    pub devices: usize,
    /// GPU workers per device.
    pub gpu_workers_per_device: usize,
    /// Partition-sized arena slots per device (from the device's free memory, for a real GPU).
    pub slots_per_device: usize,
    /// The host memory budget in bytes (default: three quarters of the memory available when the
    /// configuration is made, or 16 GiB where that cannot be read).
    pub host_budget_bytes: u64,
    /// Use one lock for upload and kernels instead of two (to measure what the split buys).
    pub merge_locks: bool,
    /// Keep only the newest this many timeline spans (about 17 per partition), so a scheduler that
    /// lives for weeks stays in bounded memory; `None` keeps them all (runs of known length).
    pub timeline_spans: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            partition_workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            priority_workers: 1,
            devices: 1,
            gpu_workers_per_device: 2,
            slots_per_device: 2,
            host_budget_bytes: available_memory().map_or(16 << 30, |b| b / 4 * 3),
            merge_locks: false,
            timeline_spans: None,
        }
    }
}

/// Bytes of memory available to new work (Linux: `MemAvailable` of `/proc/meminfo`).
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&info)
}

/// The `MemAvailable` line of a `/proc/meminfo` text, in bytes.
fn parse_mem_available(info: &str) -> Option<u64> {
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_budget_comes_from_available_memory() {
        let info = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(parse_mem_available(info), Some(20_000_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: 5 MB\n"), None, "only kB is what the kernel writes");
        assert!(Config::default().host_budget_bytes > 0);
    }
}
