//! What `INFO` reads of the process hosting a node: its id, how long it has run, its client
//! connections and the CPU time it used.

use std::sync::Arc;
use std::time::Instant;

use tandem_redis::session::{CpuTimes, HostFacts};

use crate::metrics::Metrics;

/// Linux's clock ticks per second in `/proc/[pid]/stat` (`USER_HZ`, which the kernel keeps
/// at 100 for user space on every architecture it runs on).
const USER_HZ: f64 = 100.0;

/// This process, as `INFO` reports it.
#[derive(Debug)]
pub struct Host {
    started: Instant,
    metrics: Arc<Metrics>,
}

impl Host {
    /// The process, which starts now, counting its clients in `metrics`.
    pub fn new(metrics: &Arc<Metrics>) -> Arc<Host> {
        Arc::new(Host {
            started: Instant::now(),
            metrics: Arc::clone(metrics),
        })
    }
}

impl HostFacts for Host {
    fn process_id(&self) -> u32 {
        std::process::id()
    }

    fn uptime_s(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn connected_clients(&self) -> u64 {
        u64::try_from(self.metrics.client_connections.get()).unwrap_or(0)
    }

    fn blocked_clients(&self) -> u64 {
        u64::try_from(self.metrics.blocked_clients.get()).unwrap_or(0)
    }

    /// Read from `/proc/self/stat` when asked; zero where it cannot be read.
    fn cpu(&self) -> CpuTimes {
        std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|stat| cpu_times(&stat))
            .unwrap_or_default()
    }

    fn model_stats(&self) -> Vec<(String, String)> {
        model_stat_lines(&self.metrics)
    }
}

/// `INFO`'s lines for what the data model reported (`Metrics::model_stats`).
fn model_stat_lines(metrics: &Metrics) -> Vec<(String, String)> {
    metrics
        .model_stats()
        .into_iter()
        .map(|(name, value)| (name.to_string(), tandem_redis::model::stat_text(value)))
        .collect()
}

/// The CPU times of a `/proc/[pid]/stat` line: fields 14 to 17 (utime, stime, cutime,
/// cstime, in clock ticks), counted after the command name, which is in parentheses and may
/// hold spaces.
fn cpu_times(stat: &str) -> Option<CpuTimes> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // After the name come field 3 (state) onwards: utime is field 14, the 12th here.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |at: usize| -> Option<f64> { Some(fields.get(at)?.parse::<u64>().ok()? as f64) };
    Some(CpuTimes {
        user_s: ticks(11)? / USER_HZ,
        sys_s: ticks(12)? / USER_HZ,
        children_user_s: ticks(13)? / USER_HZ,
        children_sys_s: ticks(14)? / USER_HZ,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_cpu_times() {
        let stat = "4242 (tandem (node) 1) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    250 37 4 1 20 0 9 0 100 1000 200";
        let times = cpu_times(stat).expect("parsed");
        assert_eq!(
            times,
            CpuTimes {
                user_s: 2.5,
                sys_s: 0.37,
                children_user_s: 0.04,
                children_sys_s: 0.01,
            }
        );
        assert_eq!(cpu_times("4242 (cut short) S 1"), None);
    }

    #[test]
    fn this_process_reads_its_own_times() {
        let metrics = Arc::new(Metrics::new(1, "primary"));
        let host = Host::new(&metrics);
        // Spend some CPU, then the reading cannot be all zero.
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let cpu = host.cpu();
        assert!(cpu.user_s + cpu.sys_s > 0.0, "{cpu:?}");
        assert_eq!(host.process_id(), std::process::id());
    }
}
