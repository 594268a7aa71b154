//! Prints what each tracker costs on one region size:
//! `cargo run --release -p tandem-mirror --example measure -- [MiB] [percent dirty] [intervals]`
//! (defaults: 1024 MiB, 1%, 5 intervals). A kind the kernel refuses is printed with why.

use tandem_mirror::TrackerKind;
use tandem_mirror::bench::measure_tracking;

fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .map(|arg| arg.parse().expect("arguments are numbers"))
        .collect();
    let mib = args.first().copied().unwrap_or(1024.0);
    let percent = args.get(1).copied().unwrap_or(1.0);
    let intervals = args.get(2).copied().unwrap_or(5.0) as usize;
    let region_bytes = (mib * 1024.0 * 1024.0) as usize;
    let pages = region_bytes / tandem_mirror::page_size();
    let dirty = ((pages as f64 * percent / 100.0) as usize).max(1);
    println!(
        "region {mib} MiB ({pages} pages), {dirty} pages stored to per interval, {intervals} intervals"
    );
    for kind in TrackerKind::ALL {
        match measure_tracking(kind, region_bytes, dirty, intervals) {
            Ok(report) => println!(
                "{kind:>10}: first store +{:.0} ns ({:.0} tracked, {:.0} untracked); harvest+re-arm \
                 {:.0} µs with {dirty} dirty, {:.0} µs with none",
                report.first_write_ns,
                report.write_ns_tracked,
                report.write_ns_untracked,
                report.harvest_ns_dirty / 1000.0,
                report.harvest_ns_clean / 1000.0,
            ),
            Err(error) => println!("{kind:>10}: refused: {error}"),
        }
    }
}
