//! Benchmarks: they measure speed and report it; they assert nothing about time.
//!
//! Variants are compared inside one process and interleaved in short slices, so that the
//! noise of a shared machine falls on all of them alike; reports give medians and ratios.

pub mod durability;
pub mod engine;
pub mod groups;
pub mod mirror;
pub mod reads;
pub mod replication;
pub mod resp;
pub mod resp_load;
pub mod starvation;

/// Median of a non-empty list of samples.
pub fn median(samples: &[f64]) -> f64 {
    assert!(!samples.is_empty(), "median of no samples");
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_and_even_lists() {
        assert_eq!(super::median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
