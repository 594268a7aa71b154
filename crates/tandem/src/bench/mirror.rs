//! `tandem bench mirror`: what mirroring a program's memory costs with each tracker the
//! kernel grants (issue 42): the time a tracker adds to the first store to a page in a
//! checkpoint interval, the time of a harvest and re-arm with some pages dirty and with none,
//! and a whole checkpoint in-process (taken, encoded, decoded, applied by a backup's
//! `Mirror` with its undo copies, and a rollback). Rounds interleave the kinds; the report
//! gives each figure's median over the rounds.

use serde_json::{Value, json};
use tandem_mirror::TrackerKind;
use tandem_mirror::bench::{
    CheckpointReport, TrackingReport, measure_checkpoints, measure_tracking,
};

use crate::Failure;
use crate::cli::MirrorArgs;

pub fn run(args: &MirrorArgs) -> Result<(), Failure> {
    let region_bytes = usize::try_from(args.region_mib).expect("a u32 fits") << 20;
    let pages = region_bytes / tandem_mirror::page_size();
    let dirty = ((pages as f64 * args.dirty_percent / 100.0) as usize).max(1);
    let intervals = args.intervals as usize;
    if !args.json {
        println!(
            "region {} MiB ({pages} pages), {dirty} pages stored to per interval, {intervals} \
             intervals per round, {} rounds",
            args.region_mib, args.rounds
        );
    }
    let mut found: Vec<(TrackerKind, Result<Vec<Reports>, String>)> = TrackerKind::ALL
        .into_iter()
        .map(|kind| (kind, Ok(Vec::new())))
        .collect();
    for _ in 0..args.rounds {
        for (kind, reports) in &mut found {
            let Ok(list) = reports else { continue };
            let measured =
                measure_tracking(*kind, region_bytes, dirty, intervals).and_then(|tracking| {
                    let checkpoints = intervals.max(2);
                    let checkpoint = measure_checkpoints(*kind, region_bytes, dirty, checkpoints)?;
                    Ok((tracking, checkpoint))
                });
            match measured {
                Ok(report) => list.push(report),
                Err(error) => *reports = Err(error.to_string()),
            }
        }
    }
    let rows: Vec<Value> = found
        .iter()
        .map(|(kind, reports)| row(*kind, reports))
        .collect();
    if args.json {
        let report = json!({
            "region_mib": args.region_mib,
            "pages": pages,
            "dirty_pages_per_interval": dirty,
            "intervals": intervals,
            "rounds": args.rounds,
            "trackers": rows,
        });
        println!("{report:#}");
    } else {
        for (row, (kind, _)) in rows.iter().zip(&found) {
            print_row(*kind, row);
        }
    }
    Ok(())
}

/// One round's measures of a tracker: its tracking alone, and whole checkpoints.
type Reports = (TrackingReport, CheckpointReport);

/// One tracker's medians, or why the kernel refused it.
fn row(kind: TrackerKind, reports: &Result<Vec<Reports>, String>) -> Value {
    match reports {
        Err(why) => json!({ "kind": kind.name(), "refused": why }),
        Ok(reports) => {
            let median = |figure: fn(&Reports) -> f64| {
                let mut values: Vec<f64> = reports.iter().map(figure).collect();
                values.sort_by(f64::total_cmp);
                values[values.len() / 2]
            };
            json!({
                "kind": kind.name(),
                "first_write_ns": median(|r| r.0.first_write_ns),
                "write_ns_tracked": median(|r| r.0.write_ns_tracked),
                "write_ns_untracked": median(|r| r.0.write_ns_untracked),
                "harvest_us_dirty": median(|r| r.0.harvest_ns_dirty) / 1_000.0,
                "harvest_us_clean": median(|r| r.0.harvest_ns_clean) / 1_000.0,
                "checkpoint_take_us": median(|r| r.1.take_ns) / 1_000.0,
                "checkpoint_bytes": median(|r| r.1.bytes_per_checkpoint),
                "checkpoint_encode_us": median(|r| r.1.encode_ns) / 1_000.0,
                "checkpoint_decode_us": median(|r| r.1.decode_ns) / 1_000.0,
                "checkpoint_apply_us": median(|r| r.1.apply_ns) / 1_000.0,
                "checkpoint_rollback_us": median(|r| r.1.rollback_ns) / 1_000.0,
                "first_checkpoint_take_ms": median(|r| r.1.first_take_ns) / 1e6,
                "first_checkpoint_apply_ms": median(|r| r.1.first_apply_ns) / 1e6,
            })
        }
    }
}

fn print_row(kind: TrackerKind, row: &Value) {
    if let Some(why) = row["refused"].as_str() {
        println!("{kind:>10}: refused by this kernel: {why}");
        return;
    }
    let figure = |name: &str| row[name].as_f64().unwrap_or(f64::NAN);
    println!(
        "{kind:>10}: first store +{:.0} ns ({:.0} tracked, {:.0} untracked); harvest and re-arm \
         {:.1} µs with the interval's pages dirty, {:.1} µs with none",
        figure("first_write_ns"),
        figure("write_ns_tracked"),
        figure("write_ns_untracked"),
        figure("harvest_us_dirty"),
        figure("harvest_us_clean"),
    );
    println!(
        "{:>10}  a checkpoint: taken {:.0} µs, {:.0} bytes, encoded {:.0} µs, decoded {:.0} µs, \
         applied {:.0} µs, rolled back {:.0} µs; the first (every page): taken {:.0} ms, \
         applied {:.0} ms",
        "",
        figure("checkpoint_take_us"),
        figure("checkpoint_bytes"),
        figure("checkpoint_encode_us"),
        figure("checkpoint_decode_us"),
        figure("checkpoint_apply_us"),
        figure("checkpoint_rollback_us"),
        figure("first_checkpoint_take_ms"),
        figure("first_checkpoint_apply_ms"),
    );
}
