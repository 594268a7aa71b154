//! Geohashes as Redis computes them (geohash.c, geohash_helper.c): a point is 26 bits of
//! longitude and 26 of latitude, interleaved into a 52-bit integer, which is a sorted set
//! score. The arithmetic is Redis's, operation for operation in `f64` (and the same libm's
//! `sin`, `cos`, `asin`), so scores, distances and the boxes a search visits are Redis's.

/// Latitudes Web Mercator can encode; the poles cannot.
pub const LAT_MIN: f64 = -85.051_128_78;
pub const LAT_MAX: f64 = 85.051_128_78;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
/// 26 steps: 52 bits.
pub const STEP_MAX: u8 = 26;

/// Earth's quadratic mean radius for WGS-84, as geohash_helper.c has it.
const EARTH_RADIUS_IN_METERS: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;
/// `M_PI / 180.0`, evaluated as C does.
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(angle: f64) -> f64 {
    angle * D_R
}

fn rad_deg(angle: f64) -> f64 {
    angle / D_R
}

/// A range of longitudes or latitudes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// Redis's ranges: longitudes ±180, latitudes ±85.05112878.
pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// A geohash: `step` bits of each coordinate, interleaved (latitude in the even bits).
/// Bits and step both 0 is Redis's "zero" hash: no box.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    pub fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash as a 52-bit score prefix (`geohashAlign52Bits`).
    pub fn align52(self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }
}

/// The box a hash stands for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Area {
    pub longitude: (f64, f64),
    pub latitude: (f64, f64),
}

fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555_5555_5555_5555,
        0x3333_3333_3333_3333,
        0x0F0F_0F0F_0F0F_0F0F,
        0x00FF_00FF_00FF_00FF,
        0x0000_FFFF_0000_FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (u64::from(xlo), u64::from(ylo));
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555_5555_5555_5555,
        0x3333_3333_3333_3333,
        0x0F0F_0F0F_0F0F_0F0F,
        0x00FF_00FF_00FF_00FF,
        0x0000_FFFF_0000_FFFF,
        0x0000_0000_FFFF_FFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (interleaved, interleaved >> 1);
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// C's conversion of a non-negative double below 2^32 to `uint32_t`: truncation.
fn c_u32(x: f64) -> u32 {
    x as u32
}

/// `geohashEncode`: `None` outside Redis's limits or the ranges given.
pub fn encode(long_range: Range, lat_range: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    assert!((1..=32).contains(&step), "a geohash of 1 to 32 steps");
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < long_range.min || lon > long_range.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let long_offset = (lon - long_range.min) / (long_range.max - long_range.min) * scale;
    Some(Hash {
        bits: interleave64(c_u32(lat_offset), c_u32(long_offset)),
        step,
    })
}

/// `geohashDecode` over Redis's ranges; `None` for the zero hash.
pub fn decode(hash: Hash) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let separated = deinterleave64(hash.bits);
    let lat_scale = LAT_RANGE.max - LAT_RANGE.min;
    let long_scale = LONG_RANGE.max - LONG_RANGE.min;
    let ilato = separated as u32;
    let ilono = (separated >> 32) as u32;
    let cells = (1u64 << hash.step) as f64;
    let at = |i: u32| f64::from(i) / cells;
    Some(Area {
        latitude: (
            LAT_RANGE.min + at(ilato) * lat_scale,
            LAT_RANGE.min + at(ilato.wrapping_add(1)) * lat_scale,
        ),
        longitude: (
            LONG_RANGE.min + at(ilono) * long_scale,
            LONG_RANGE.min + at(ilono.wrapping_add(1)) * long_scale,
        ),
    })
}

/// The centre of a 52-bit score's box, clamped to Redis's limits (`decodeGeohash`): the
/// longitude and latitude Redis answers for a member.
pub fn decode_score(score: f64) -> [f64; 2] {
    let area = decode(Hash {
        bits: c_f64_to_u64(score),
        step: STEP_MAX,
    })
    .expect("a hash of 26 steps is never zero");
    let lon = ((area.longitude.0 + area.longitude.1) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.latitude.0 + area.latitude.1) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// C's `(uint64_t)` of a double as gcc compiles it on x86-64 (`cvttsd2si`, with 2^63
/// subtracted first for large values), so a score no `GEOADD` wrote still decodes as in
/// Redis.
pub fn c_f64_to_u64(x: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let truncate = |x: f64| -> i64 {
        if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
            i64::MIN
        } else {
            x as i64
        }
    };
    // An unordered comparison (NaN) takes the first branch, as `comisd` and `jnb` do.
    if x.is_nan() || x < TWO_63 {
        truncate(x) as u64
    } else {
        (truncate(x - TWO_63) as u64) ^ (1 << 63)
    }
}

/// The score `GEOADD` gives a point (checked to lie within Redis's limits).
pub fn score_of_point(lon: f64, lat: f64) -> u64 {
    encode(LONG_RANGE, LAT_RANGE, lon, lat, STEP_MAX)
        .expect("the point was checked")
        .align52()
}

/// The 11-character standard geohash `GEOHASH` answers for a score.
pub fn standard_geohash(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let [lon, lat] = decode_score(score);
    let standard = |max: f64| Range { min: -max, max };
    let bits = encode(standard(180.0), standard(90.0), lon, lat, STEP_MAX)
        .expect("a decoded point lies within the standard ranges")
        .bits;
    let mut text = [b'0'; 11];
    for (i, slot) in text.iter_mut().enumerate().take(10) {
        *slot = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    text
}

fn move_x(hash: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(hash.step) * 2;
    let mut x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    hash.bits = x | y;
}

fn move_y(hash: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(hash.step) * 2;
    let x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    hash.bits = x | y;
}

/// A hash moved `dx` boxes east and `dy` north.
fn moved(hash: Hash, dx: i8, dy: i8) -> Hash {
    let mut hash = hash;
    move_x(&mut hash, dx);
    move_y(&mut hash, dy);
    hash
}

/// What a search looks for: within a radius or a box (in meters once multiplied by the
/// unit's `conversion`) around a point.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub center: [f64; 2],
    pub conversion: f64,
    pub kind: ShapeKind,
}

#[derive(Clone, Copy, Debug)]
pub enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// `geohashEstimateStepsByRadius`.
fn estimate_steps(mut range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// `geohashBoundingBox`: min longitude, min latitude, max longitude, max latitude.
fn bounding_box(shape: &Shape) -> [f64; 4] {
    let [lon, lat] = shape.center;
    let (height, width) = match shape.kind {
        ShapeKind::Radius(radius) => (radius, radius),
        ShapeKind::Box { width, height } => (height / 2.0, width / 2.0),
    };
    let height = shape.conversion * height;
    let width = shape.conversion * width;
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let long_delta_top = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(lat + lat_delta).cos());
    let long_delta_bottom =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(lat - lat_delta).cos());
    let long_delta = if lat < 0.0 {
        long_delta_bottom
    } else {
        long_delta_top
    };
    [
        lon - long_delta,
        lat - lat_delta,
        lon + long_delta,
        lat + lat_delta,
    ]
}

/// The boxes a search walks, in Redis's order (`geohashCalculateAreasByShapeWGS84`, then
/// `membersOfAllNeighbors`' order): the centre's box, then north, south, east, west,
/// north-east, north-west, south-east, south-west; zero hashes for the ones left out.
pub fn search_boxes(shape: &Shape) -> [Hash; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(shape);
    let [lon, lat] = shape.center;
    let radius_meters = match shape.kind {
        ShapeKind::Radius(radius) => radius,
        ShapeKind::Box { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * shape.conversion;
    let mut steps = estimate_steps(radius_meters, lat);
    let centre =
        |steps: u8| encode(LONG_RANGE, LAT_RANGE, lon, lat, steps).expect("the centre was checked");
    let mut hash = centre(steps);
    let area_of = |hash: Hash| decode(hash).unwrap_or_default();
    let decrease = area_of(moved(hash, 0, 1)).latitude.1 < max_lat
        || area_of(moved(hash, 0, -1)).latitude.0 > min_lat
        || area_of(moved(hash, 1, 0)).longitude.1 < max_lon
        || area_of(moved(hash, -1, 0)).longitude.0 > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        hash = centre(steps);
    }
    let area = area_of(hash);
    // north, south, east, west, north-east, north-west, south-east, south-west
    let mut boxes = [
        hash,
        moved(hash, 0, 1),
        moved(hash, 0, -1),
        moved(hash, 1, 0),
        moved(hash, -1, 0),
        moved(hash, 1, 1),
        moved(hash, -1, 1),
        moved(hash, 1, -1),
        moved(hash, -1, -1),
    ];
    if steps >= 2 {
        let mut drop = |indices: [usize; 3]| {
            for i in indices {
                boxes[i] = Hash::default();
            }
        };
        if area.latitude.0 < min_lat {
            drop([2, 8, 7]);
        }
        if area.latitude.1 > max_lat {
            drop([1, 5, 6]);
        }
        if area.longitude.0 < min_lon {
            drop([4, 8, 6]);
        }
        if area.longitude.1 > max_lon {
            drop([3, 7, 5]);
        }
    }
    boxes
}

/// The score range of a box's members: from its prefix, included, to the next, excluded
/// (`scoresOfGeoHashBox`).
pub fn score_range(hash: Hash) -> (u64, u64) {
    let next = Hash {
        bits: hash.bits.wrapping_add(1),
        ..hash
    };
    (hash.align52(), next.align52())
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The haversine distance in meters (`geohashGetDistance`).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// The distance of `point` from the shape's centre, if it lies within the shape
/// (`geoWithinShape`).
pub fn within(shape: &Shape, point: [f64; 2]) -> Option<f64> {
    let [x1, y1] = shape.center;
    let [x2, y2] = point;
    match shape.kind {
        ShapeKind::Radius(radius) => {
            let d = distance(x1, y1, x2, y2);
            (d <= radius * shape.conversion).then_some(d)
        }
        ShapeKind::Box { width, height } => {
            let width_m = width * shape.conversion;
            let height_m = height * shape.conversion;
            if lat_distance(y2, y1) > height_m / 2.0 {
                return None;
            }
            if distance(x2, y2, x1, y2) > width_m / 2.0 {
                return None;
            }
            Some(distance(x1, y1, x2, y2))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_round_trips() {
        for (lat, lon) in [
            (0u32, 0u32),
            (1, 2),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            let separated = deinterleave64(interleave64(lat, lon));
            assert_eq!((separated as u32, (separated >> 32) as u32), (lat, lon));
        }
    }

    #[test]
    fn palermo_scores_as_in_redis() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo" gives 3479099956230698.
        assert_eq!(score_of_point(13.361389, 38.115556), 3_479_099_956_230_698);
        assert_eq!(&standard_geohash(3_479_099_956_230_698.0), b"sqc8b49rny0");
    }

    #[test]
    fn c_conversions_of_odd_scores() {
        assert_eq!(c_f64_to_u64(-1.0), u64::MAX);
        assert_eq!(c_f64_to_u64(f64::INFINITY), 0);
        assert_eq!(c_f64_to_u64(f64::NAN), 1 << 63);
        assert_eq!(c_f64_to_u64(1e19), 10_000_000_000_000_000_000);
    }
}
