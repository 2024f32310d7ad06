//! The process's own use of the machine, under the names every Prometheus
//! client library gives it (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, …), so the dashboards and alerts written
//! for any process read jobrelay's too. Read from `/proc/self` at each
//! scrape; on a system without `/proc` there are none.

use procfs::process::{LimitValue, Process};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// What `/proc` says of the process, as it says it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// User and system CPU time, in clock ticks.
    pub cpu_ticks: u64,
    /// Clock ticks a second.
    pub ticks_per_second: u64,
    /// Resident pages.
    pub resident_pages: u64,
    /// Bytes of one page.
    pub page_size: u64,
    /// Bytes of virtual memory.
    pub virtual_bytes: u64,
    /// When the process started, in clock ticks after boot.
    pub start_ticks: u64,
    /// When the machine booted, in seconds since the epoch.
    pub boot_seconds: u64,
    /// Threads.
    pub threads: i64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on open file descriptors; `None`: unlimited.
    pub max_fds: Option<u64>,
}

/// The metrics of one [`Reading`], in the units Prometheus expects.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    pub cpu_seconds: f64,
    pub resident_memory_bytes: u64,
    pub virtual_memory_bytes: u64,
    pub start_time_seconds: f64,
    pub threads: i64,
    pub open_fds: u64,
    pub max_fds: Option<u64>,
}

impl Reading {
    /// Converts ticks and pages into seconds and bytes.
    pub fn usage(&self) -> Usage {
        let ticks = self.ticks_per_second.max(1) as f64;
        Usage {
            cpu_seconds: self.cpu_ticks as f64 / ticks,
            resident_memory_bytes: self.resident_pages.saturating_mul(self.page_size),
            virtual_memory_bytes: self.virtual_bytes,
            start_time_seconds: self.boot_seconds as f64 + self.start_ticks as f64 / ticks,
            threads: self.threads,
            open_fds: self.open_fds,
            max_fds: self.max_fds,
        }
    }

    /// Reads this process's figures; `None` where `/proc` cannot be read.
    pub fn of_self() -> Option<Reading> {
        let me = Process::myself().ok()?;
        let stat = me.stat().ok()?;
        let max_fds = match me.limits().ok()?.max_open_files.soft_limit {
            LimitValue::Value(limit) => Some(limit),
            LimitValue::Unlimited => None,
        };
        Some(Reading {
            cpu_ticks: stat.utime.saturating_add(stat.stime),
            ticks_per_second: procfs::ticks_per_second(),
            resident_pages: stat.rss,
            page_size: procfs::page_size(),
            virtual_bytes: stat.vsize,
            start_ticks: stat.starttime,
            boot_seconds: procfs::boot_time_secs().ok()?,
            threads: stat.num_threads,
            open_fds: me.fd_count().ok()? as u64,
            max_fds,
        })
    }
}

/// Reads `/proc/self` at each scrape. Register it in a registry without a
/// prefix: the names are the standard ones.
#[derive(Debug, Default)]
pub struct OsCollector;

impl Collector for OsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(usage) = Reading::of_self().map(|reading| reading.usage()) else {
            return Ok(());
        };
        let cpu = ConstCounter::new(usage.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                usage.resident_memory_bytes as f64,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                usage.virtual_memory_bytes as f64,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                usage.start_time_seconds,
            ),
            (
                "process_threads",
                "Number of OS threads",
                usage.threads as f64,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                usage.open_fds as f64,
            ),
        ];
        let max_fds = usage.max_fds.map(|max| {
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                max as f64,
            )
        });
        for (name, help, value) in gauges.into_iter().chain(max_fds) {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::registry::Registry;

    use super::*;

    fn reading() -> Reading {
        Reading {
            cpu_ticks: 250,
            ticks_per_second: 100,
            resident_pages: 10,
            page_size: 4096,
            virtual_bytes: 1 << 30,
            start_ticks: 1_000,
            boot_seconds: 1_800_000_000,
            threads: 7,
            open_fds: 12,
            max_fds: Some(1024),
        }
    }

    #[test]
    fn ticks_become_seconds_and_pages_bytes() {
        let usage = reading().usage();
        assert_eq!(usage.cpu_seconds, 2.5);
        assert_eq!(usage.resident_memory_bytes, 40_960);
        assert_eq!(usage.virtual_memory_bytes, 1 << 30);
        assert_eq!(usage.start_time_seconds, 1_800_000_010.0);
        assert_eq!(
            (usage.threads, usage.open_fds, usage.max_fds),
            (7, 12, Some(1024))
        );
    }

    #[test]
    fn a_clock_without_ticks_does_not_divide_by_zero() {
        let usage = Reading {
            ticks_per_second: 0,
            ..reading()
        }
        .usage();
        assert_eq!(usage.cpu_seconds, 250.0);
    }

    #[test]
    fn this_process_renders_under_the_standard_names() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(OsCollector));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_start_time_seconds ",
            "process_threads ",
            "process_open_fds ",
        ] {
            let value: f64 = text
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or_else(|| panic!("{name}in:\n{text}"));
            assert!(value >= 0.0, "{name}{value}");
        }
        assert!(
            text.lines()
                .any(|line| line.starts_with("process_resident_memory_bytes ")
                    && !line.ends_with(" 0")),
            "a running process has resident memory:\n{text}"
        );
    }
}
