//! Prints what checkpoints cost on one region size, per tracker:
//! `cargo run --release -p tandem-mirror --example checkpoints -- [MiB] [percent dirty]
//! [checkpoints]` (defaults: 256 MiB, 1%, 20 checkpoints). A kind the kernel refuses is printed
//! with why.

use tandem_mirror::TrackerKind;
use tandem_mirror::bench::measure_checkpoints;

fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .map(|arg| arg.parse().expect("arguments are numbers"))
        .collect();
    let mib = args.first().copied().unwrap_or(256.0);
    let percent = args.get(1).copied().unwrap_or(1.0);
    let checkpoints = args.get(2).copied().unwrap_or(20.0) as usize;
    let region_bytes = (mib * 1024.0 * 1024.0) as usize;
    let pages = region_bytes / tandem_mirror::page_size();
    let dirty = ((pages as f64 * percent / 100.0) as usize).max(1);
    println!(
        "region {mib} MiB ({pages} pages), {dirty} pages stored to per checkpoint, {checkpoints} \
         checkpoints after the first"
    );
    for kind in TrackerKind::ALL {
        match measure_checkpoints(kind, region_bytes, dirty, checkpoints) {
            Ok(report) => println!(
                "{kind:>10}: first (every page, {:.1} MiB) take {:.1} ms, apply {:.1} ms; then per \
                 checkpoint {:.1} KiB: take {:.0} µs, encode {:.0} µs, decode {:.0} µs, apply \
                 {:.0} µs, rollback {:.0} µs",
                report.first_bytes as f64 / (1024.0 * 1024.0),
                report.first_take_ns / 1e6,
                report.first_apply_ns / 1e6,
                report.bytes_per_checkpoint / 1024.0,
                report.take_ns / 1e3,
                report.encode_ns / 1e3,
                report.decode_ns / 1e3,
                report.apply_ns / 1e3,
                report.rollback_ns / 1e3,
            ),
            Err(error) => println!("{kind:>10}: refused: {error}"),
        }
    }
}
