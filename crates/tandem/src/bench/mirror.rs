//! `tandem bench mirror`: what finding a program's dirty pages costs with each tracker the
//! kernel grants (issue 42): the time a tracker adds to the first store to a page in a
//! checkpoint interval, and the time of a harvest and re-arm with some pages dirty and with
//! none. Rounds interleave the kinds; the report gives each figure's median over the rounds.

use serde_json::{Value, json};
use tandem_mirror::TrackerKind;
use tandem_mirror::bench::{TrackingReport, measure_tracking};

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
    let mut found: Vec<(TrackerKind, Result<Vec<TrackingReport>, String>)> = TrackerKind::ALL
        .into_iter()
        .map(|kind| (kind, Ok(Vec::new())))
        .collect();
    for _ in 0..args.rounds {
        for (kind, reports) in &mut found {
            let Ok(list) = reports else { continue };
            match measure_tracking(*kind, region_bytes, dirty, intervals) {
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

/// One tracker's medians, or why the kernel refused it.
fn row(kind: TrackerKind, reports: &Result<Vec<TrackingReport>, String>) -> Value {
    match reports {
        Err(why) => json!({ "kind": kind.name(), "refused": why }),
        Ok(reports) => {
            let median = |figure: fn(&TrackingReport) -> f64| {
                let mut values: Vec<f64> = reports.iter().map(figure).collect();
                values.sort_by(f64::total_cmp);
                values[values.len() / 2]
            };
            json!({
                "kind": kind.name(),
                "first_write_ns": median(|r| r.first_write_ns),
                "write_ns_tracked": median(|r| r.write_ns_tracked),
                "write_ns_untracked": median(|r| r.write_ns_untracked),
                "harvest_us_dirty": median(|r| r.harvest_ns_dirty) / 1_000.0,
                "harvest_us_clean": median(|r| r.harvest_ns_clean) / 1_000.0,
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
}
