//! The memory bound: what `max_memory` means, the sampler of the process's
//! resident memory, and the check that refuses a write that would pass the
//! bound.
//!
//! Invariant: a refused write changes nothing (the check runs before the
//! write reaches its fragment). Only client puts are checked; deletes,
//! reads, expiry conversion, expiry handler actions and purges never are,
//! so a full node can always shed data and recover. The check compares the
//! last sample (at most [`SAMPLE_INTERVAL`] old) plus the bytes of the puts
//! admitted since that sample, plus the new write, with the bound.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How often the sampler reads the process's resident memory.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// Bytes charged per admitted put besides its key and value: the record's
/// version, index entry and buffer slot, roughly.
const RECORD_OVERHEAD: u64 = 128;

/// The bound on the process's resident memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaxMemory {
    /// No bound: writes are never refused for memory.
    Unbounded,
    /// A number of bytes.
    Bytes(u64),
    /// A percentage (above 0, at most 100) of the machine's memory, or of
    /// the cgroup's limit when that is lower.
    Percent(f64),
}

/// The default bound: 80 % of the machine's (or cgroup's) memory. The rest
/// is headroom for what a write check cannot refuse once running: queries
/// (each may hold `max_query_bytes`), plugin instances, RocksDB's page
/// cache and compactions, and allocator slack.
pub const DEFAULT_MAX_MEMORY: MaxMemory = MaxMemory::Percent(80.0);

impl Default for MaxMemory {
    fn default() -> Self {
        DEFAULT_MAX_MEMORY
    }
}

/// A `max_memory` text that is not a byte size, a percentage or `none`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid memory bound {text:?}: {reason}; use bytes with an optional unit (536870912, 512MiB, 2GB), a percentage of the machine's memory (80%), or none"
)]
pub struct MaxMemoryError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl FromStr for MaxMemory {
    type Err = MaxMemoryError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |reason| MaxMemoryError {
            text: text.to_string(),
            reason,
        };
        let trimmed = text.trim();
        if trimmed.eq_ignore_ascii_case("none") {
            return Ok(MaxMemory::Unbounded);
        }
        if let Some(percent) = trimmed.strip_suffix('%') {
            let percent: f64 = percent
                .trim()
                .parse()
                .map_err(|_| error("the percentage is not a number"))?;
            if !(percent > 0.0 && percent <= 100.0) {
                return Err(error("a percentage must be above 0 and at most 100"));
            }
            return Ok(MaxMemory::Percent(percent));
        }
        let split = trimmed
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(trimmed.len());
        let (digits, unit) = trimmed.split_at(split);
        let number: u64 = digits
            .parse()
            .map_err(|_| error("expected a whole number of bytes"))?;
        let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" => 1000,
            "mb" => 1000 * 1000,
            "gb" => 1000 * 1000 * 1000,
            "tb" => 1000 * 1000 * 1000 * 1000,
            "kib" => 1 << 10,
            "mib" => 1 << 20,
            "gib" => 1 << 30,
            "tib" => 1 << 40,
            _ => {
                return Err(error(
                    "unknown unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
                ));
            }
        };
        let bytes = number
            .checked_mul(multiplier)
            .ok_or_else(|| error("too large"))?;
        if bytes == 0 {
            return Err(error(
                "0 bytes would refuse every write (none disables the bound)",
            ));
        }
        Ok(MaxMemory::Bytes(bytes))
    }
}

impl fmt::Display for MaxMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaxMemory::Unbounded => f.write_str("none"),
            MaxMemory::Bytes(bytes) => write!(f, "{bytes}"),
            MaxMemory::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

impl MaxMemory {
    /// The bound in bytes, `None` for no bound. A percentage of a machine
    /// whose memory cannot be read (no `/proc/meminfo`) is no bound; the
    /// caller logs that.
    pub fn resolve(&self) -> Option<u64> {
        match *self {
            MaxMemory::Unbounded => None,
            MaxMemory::Bytes(bytes) => Some(bytes),
            MaxMemory::Percent(percent) => {
                system_memory().map(|total| (total as f64 * percent / 100.0) as u64)
            }
        }
    }
}

/// The memory this process may use: the machine's (`MemTotal`), or the
/// cgroup's limit when lower (v2 `memory.max`, v1 `memory.limit_in_bytes`).
/// `None` when `/proc/meminfo` cannot be read.
pub fn system_memory() -> Option<u64> {
    let total = parse_meminfo_total(&std::fs::read_to_string("/proc/meminfo").ok()?)?;
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|path| std::fs::read_to_string(path).ok())
    .filter_map(|text| parse_cgroup_limit(&text))
    .min();
    Some(cgroup.map_or(total, |limit| limit.min(total)))
}

/// `MemTotal` of `/proc/meminfo` text, in bytes.
pub fn parse_meminfo_total(text: &str) -> Option<u64> {
    parse_kib_field(text, "MemTotal:")
}

/// `VmRSS` of `/proc/self/status` text, in bytes.
pub fn parse_status_resident(text: &str) -> Option<u64> {
    parse_kib_field(text, "VmRSS:")
}

fn parse_kib_field(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find_map(|line| line.strip_prefix(field))?;
    let mut parts = line.split_whitespace();
    let kib: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | None => kib.checked_mul(1024),
        Some(_) => None,
    }
}

/// A cgroup memory limit file's text in bytes: `None` for `max` (v2's "no
/// limit") or anything unreadable. v1's "no limit" is a huge number, which
/// the caller's minimum with `MemTotal` absorbs.
pub fn parse_cgroup_limit(text: &str) -> Option<u64> {
    let text = text.trim();
    if text == "max" {
        return None;
    }
    text.parse().ok()
}

fn read_resident() -> Option<u64> {
    parse_status_resident(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// A write was refused because it would take the node past its memory bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "memory is full: {resident_bytes} bytes resident (last sample, plus writes since) and this write needs about {write_bytes} more, past the bound of {limit_bytes} bytes (--max-memory, NodeConfig::max_memory); nothing was written. Delete data or let it expire (shorter TTLs), or raise --max-memory; reads and deletes keep working"
)]
pub struct MemoryFull {
    /// The estimate the write was checked against.
    pub resident_bytes: u64,
    /// What the write was charged.
    pub write_bytes: u64,
    /// The bound.
    pub limit_bytes: u64,
}

/// The memory state of a node, for health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryHealth {
    /// The process's resident memory at the last sample; `None` where it
    /// cannot be read (no `/proc`), and then nothing is refused.
    pub resident_bytes: Option<u64>,
    /// The bound in bytes; `None` when unbounded.
    pub limit_bytes: Option<u64>,
    /// Whether writes are being refused: a write was refused since the last
    /// sample, or the last sample plus writes since is at the bound.
    pub full: bool,
    /// Writes refused since the node opened.
    pub refused_writes: u64,
}

struct Shared {
    limit: Option<u64>,
    /// Resident bytes at the last sample; `u64::MAX` until one succeeded.
    resident: AtomicU64,
    /// Bytes of puts admitted since the last sample.
    pending: AtomicU64,
    refused_since_sample: AtomicBool,
    refused_total: AtomicU64,
    stop: AtomicBool,
}

const UNKNOWN: u64 = u64::MAX;

impl Shared {
    fn sample(&self) {
        let resident = read_resident().unwrap_or(UNKNOWN);
        self.resident.store(resident, Ordering::Release);
        self.pending.store(0, Ordering::Release);
        self.refused_since_sample.store(false, Ordering::Release);
    }
}

/// Owns the sampler thread (`ebb-memory`, a plain thread so no tokio worker
/// ever reads `/proc`) and answers the write check. Dropping it stops the
/// thread.
pub(crate) struct MemoryMonitor {
    shared: Arc<Shared>,
    thread: Option<std::thread::Thread>,
}

impl MemoryMonitor {
    /// Take a first sample and start the sampler. If the thread cannot be
    /// spawned the first sample stays (logged); the bound still applies to
    /// it and to the writes counted since.
    pub(crate) fn start(limit: Option<u64>) -> Self {
        let mut monitor = Self::sampled_once(limit);
        let sampler = monitor.shared.clone();
        let thread = std::thread::Builder::new()
            .name("ebb-memory".into())
            .spawn(move || {
                loop {
                    std::thread::park_timeout(SAMPLE_INTERVAL);
                    if sampler.stop.load(Ordering::Acquire) {
                        break;
                    }
                    sampler.sample();
                }
            });
        match thread {
            Ok(handle) => monitor.thread = Some(handle.thread().clone()),
            Err(error) => tracing::warn!(%error, "cannot start the memory sampler"),
        }
        monitor
    }

    /// One sample, no sampler thread.
    fn sampled_once(limit: Option<u64>) -> Self {
        let shared = Arc::new(Shared {
            limit,
            resident: AtomicU64::new(UNKNOWN),
            pending: AtomicU64::new(0),
            refused_since_sample: AtomicBool::new(false),
            refused_total: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        shared.sample();
        Self {
            shared,
            thread: None,
        }
    }

    /// Admit a put of `key_bytes + value_bytes`, or refuse it when the
    /// estimate plus the write would pass the bound. Admitted bytes count
    /// toward the estimate until the next sample.
    pub(crate) fn admit_put(&self, key_bytes: usize, value_bytes: usize) -> Result<(), MemoryFull> {
        let Some(limit) = self.shared.limit else {
            return Ok(());
        };
        let resident = self.shared.resident.load(Ordering::Acquire);
        if resident == UNKNOWN {
            return Ok(());
        }
        let write = (key_bytes + value_bytes) as u64 + RECORD_OVERHEAD;
        let pending = self.shared.pending.fetch_add(write, Ordering::AcqRel);
        let estimate = resident.saturating_add(pending);
        if estimate.saturating_add(write) > limit {
            self.shared.pending.fetch_sub(write, Ordering::AcqRel);
            self.shared
                .refused_since_sample
                .store(true, Ordering::Release);
            self.shared.refused_total.fetch_add(1, Ordering::Relaxed);
            return Err(MemoryFull {
                resident_bytes: estimate,
                write_bytes: write,
                limit_bytes: limit,
            });
        }
        Ok(())
    }

    /// The memory state now.
    pub(crate) fn health(&self) -> MemoryHealth {
        let resident = self.shared.resident.load(Ordering::Acquire);
        let resident = (resident != UNKNOWN).then_some(resident);
        let pending = self.shared.pending.load(Ordering::Acquire);
        let full = match (resident, self.shared.limit) {
            (Some(resident), Some(limit)) => {
                self.shared.refused_since_sample.load(Ordering::Acquire)
                    || resident.saturating_add(pending) >= limit
            }
            _ => false,
        };
        MemoryHealth {
            resident_bytes: resident,
            limit_bytes: self.shared.limit,
            full,
            refused_writes: self.shared.refused_total.load(Ordering::Relaxed),
        }
    }

    /// Stop the sampler thread (also on drop).
    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = &self.thread {
            thread.unpark();
        }
    }
}

impl Drop for MemoryMonitor {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_parse_as_bytes_units_percentages_or_none() {
        let cases = [
            ("536870912", MaxMemory::Bytes(536_870_912)),
            ("512MiB", MaxMemory::Bytes(512 << 20)),
            ("512 mib", MaxMemory::Bytes(512 << 20)),
            ("2GB", MaxMemory::Bytes(2_000_000_000)),
            ("1GiB", MaxMemory::Bytes(1 << 30)),
            ("10kb", MaxMemory::Bytes(10_000)),
            ("7B", MaxMemory::Bytes(7)),
            ("80%", MaxMemory::Percent(80.0)),
            ("12.5%", MaxMemory::Percent(12.5)),
            ("100%", MaxMemory::Percent(100.0)),
            ("none", MaxMemory::Unbounded),
            ("NONE", MaxMemory::Unbounded),
        ];
        for (text, expected) in cases {
            assert_eq!(text.parse::<MaxMemory>(), Ok(expected), "{text}");
        }
    }

    #[test]
    fn bad_bounds_are_refused_with_what_to_write() {
        for (text, reason) in [
            ("", "whole number"),
            ("0", "0 bytes"),
            ("0MiB", "0 bytes"),
            ("12 parsecs", "unknown unit"),
            ("-5", "whole number"),
            ("1.5GB", "unknown unit"),
            ("0%", "above 0"),
            ("101%", "at most 100"),
            ("lots%", "not a number"),
            ("99999999999TiB", "too large"),
        ] {
            let error = text.parse::<MaxMemory>().unwrap_err();
            let message = error.to_string();
            assert!(message.contains(reason), "{text}: {message}");
            assert!(
                message.contains("512MiB") && message.contains("none"),
                "{message}"
            );
        }
    }

    #[test]
    fn bounds_print_as_they_parse() {
        for bound in [
            MaxMemory::Bytes(123),
            MaxMemory::Percent(80.0),
            MaxMemory::Unbounded,
        ] {
            assert_eq!(bound.to_string().parse::<MaxMemory>(), Ok(bound));
        }
    }

    #[test]
    fn meminfo_status_and_cgroup_texts_are_read() {
        let meminfo = "MemTotal:       16318412 kB\nMemFree:         1234 kB\n";
        assert_eq!(parse_meminfo_total(meminfo), Some(16_318_412 * 1024));
        assert_eq!(parse_meminfo_total("MemFree: 1 kB\n"), None);
        let status = "Name:\tebb\nVmPeak:\t  200 kB\nVmRSS:\t   51200 kB\n";
        assert_eq!(parse_status_resident(status), Some(51_200 * 1024));
        assert_eq!(parse_status_resident("VmRSS: 12 MB\n"), None);
        assert_eq!(parse_cgroup_limit("max\n"), None);
        assert_eq!(parse_cgroup_limit("1073741824\n"), Some(1 << 30));
        assert_eq!(parse_cgroup_limit("garbage"), None);
    }

    #[test]
    fn this_process_has_memory_and_a_resident_size() {
        let total = system_memory().expect("/proc/meminfo on Linux");
        let resident = read_resident().expect("/proc/self/status on Linux");
        assert!(resident > 0 && resident < total, "{resident} of {total}");
        let half = MaxMemory::Percent(50.0).resolve().unwrap();
        assert!(half.abs_diff(total / 2) <= 1, "{half} vs {total}");
    }

    #[test]
    fn puts_past_the_bound_are_refused_and_counted() {
        let resident = read_resident().unwrap();
        // Room for about one 1 MiB put over what is resident now.
        let monitor = MemoryMonitor::sampled_once(Some(resident + (3 << 19)));
        monitor.shared.resident.store(resident, Ordering::Release);
        monitor.admit_put(3, 1 << 20).expect("the first fits");
        let refused = monitor.admit_put(3, 1 << 20).unwrap_err();
        assert_eq!(refused.limit_bytes, resident + (3 << 19));
        assert!(refused.to_string().contains("--max-memory"));
        let health = monitor.health();
        assert!(health.full);
        assert_eq!(health.refused_writes, 1);
        assert_eq!(health.resident_bytes, Some(resident));
        let unbounded = MemoryMonitor::sampled_once(None);
        unbounded.admit_put(3, 1 << 30).expect("no bound");
        assert!(!unbounded.health().full);
    }
}
