//! Geo commands (geo.c): `GEOADD`, `GEODIST`, `GEOHASH`, `GEOPOS`, `GEOSEARCH`,
//! `GEOSEARCHSTORE`, `GEORADIUS`, `GEORADIUSBYMEMBER` and their `_RO` forms.
//!
//! A geo set is an ordinary sorted set whose scores are 52-bit geohashes ([`geohash`]). A
//! search walks the nine boxes around its centre in Redis's order, each in score order, so
//! an unsorted reply lists the members as Redis lists them; sorting by distance is Redis's
//! too (glibc's stable merge sort for a whole reply, Redis's `pqsort` for the first `COUNT`
//! of more). Arguments are read and refused in the order `georadiusGeneric` reads them, and
//! a storing search writes only after everything is read.

use super::geohash::{self, Shape, ShapeKind};
use super::{AddFlags, ZSet, add, member_of, read_zset, replace_with, score_of};
use crate::cmd::{CmdError, Command, Ctx, Read, Write, arg, data};
use crate::mem::Mem;
use crate::num;
use crate::resp::{Argv, ReplyWriter};

pub static COMMANDS: &[Command] = &[
    data("GEOADD", -5, Write, (1, 1, 1), true, geoadd),
    data("GEODIST", -4, Read, (1, 1, 1), false, geodist),
    data("GEOHASH", -2, Read, (1, 1, 1), false, geohash_),
    data("GEOPOS", -2, Read, (1, 1, 1), false, geopos),
    // The STORE destination is found by `store_keys_at`, as Redis finds it by keyword.
    data("GEORADIUS", -6, Write, (1, 1, 1), true, georadius),
    data(
        "GEORADIUSBYMEMBER",
        -5,
        Write,
        (1, 1, 1),
        true,
        georadiusbymember,
    ),
    data(
        "GEORADIUSBYMEMBER_RO",
        -5,
        Read,
        (1, 1, 1),
        false,
        georadiusbymember_ro,
    ),
    data("GEORADIUS_RO", -6, Read, (1, 1, 1), false, georadius_ro),
    data("GEOSEARCH", -7, Read, (1, 1, 1), false, geosearch),
    data("GEOSEARCHSTORE", -8, Write, (1, 2, 1), true, geosearchstore),
];

/// The argument indices of the `STORE` and `STOREDIST` destinations of a `GEORADIUS` or
/// `GEORADIUSBYMEMBER` call, for ACL key checks: the command table's key range names only
/// the source. Every one named counts (the last is the one written), so a user may not hide a
/// key behind an allowed one.
pub fn store_keys_at(name: &str, argv: &Argv) -> Vec<usize> {
    let first_option = match name {
        "GEORADIUS" => 6,
        "GEORADIUSBYMEMBER" => 5,
        _ => return Vec::new(),
    };
    let mut found = Vec::new();
    let mut i = first_option;
    while i < argv.len() {
        let word = arg(argv, i);
        if word.eq_ignore_ascii_case(b"COUNT") {
            i += 1;
        } else if (word.eq_ignore_ascii_case(b"STORE") || word.eq_ignore_ascii_case(b"STOREDIST"))
            && i + 1 < argv.len()
        {
            found.push(i + 1);
            i += 1;
        }
        i += 1;
    }
    found
}

const NOT_DECODED: CmdError = CmdError::fixed("ERR could not decode requested zset member");

/// A double argument as `getDoubleFromObjectOrReply` reads it, with its error text.
fn double_arg(text: &[u8], error: &'static str) -> Result<f64, CmdError> {
    num::parse_f64(text).ok_or(CmdError::fixed(error))
}

/// A longitude and latitude (`extractLongLatOrReply`).
fn lon_lat(argv: &Argv, at: usize) -> Result<[f64; 2], CmdError> {
    let lon = double_arg(arg(argv, at), "ERR value is not a valid float")?;
    let lat = double_arg(arg(argv, at + 1), "ERR value is not a valid float")?;
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&lon)
        || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat)
    {
        return Err(CmdError::owned(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok([lon, lat])
}

/// Meters per unit (`extractUnitOrReply`).
fn unit(text: &[u8]) -> Result<f64, CmdError> {
    match text.to_ascii_lowercase().as_slice() {
        b"m" => Ok(1.0),
        b"km" => Ok(1000.0),
        b"ft" => Ok(0.3048),
        b"mi" => Ok(1609.34),
        _ => Err(CmdError::fixed(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        )),
    }
}

/// A radius and its unit (`extractDistanceOrReply`): (radius, meters per unit).
fn radius_arg(argv: &Argv, at: usize) -> Result<(f64, f64), CmdError> {
    let radius = double_arg(arg(argv, at), "ERR need numeric radius")?;
    if radius < 0.0 {
        return Err(CmdError::fixed("ERR radius cannot be negative"));
    }
    Ok((radius, unit(arg(argv, at + 1))?))
}

/// A box's width, height and unit (`extractBoxOrReply`).
fn box_arg(argv: &Argv, at: usize) -> Result<(f64, f64, f64), CmdError> {
    let width = double_arg(arg(argv, at), "ERR need numeric width")?;
    let height = double_arg(arg(argv, at + 1), "ERR need numeric height")?;
    if height < 0.0 || width < 0.0 {
        return Err(CmdError::fixed("ERR height or width cannot be negative"));
    }
    Ok((width, height, unit(arg(argv, at + 2))?))
}

/// The score of `member` in `zset`.
fn score(ctx: &Ctx<'_, '_>, zset: ZSet, member: &[u8]) -> Option<f64> {
    let seed = ctx.layout.seed(&ctx.access);
    zset.find(&ctx.access, seed, member)
        .map(|found| score_of(&ctx.access, found.entry))
}

/// Where `member` lies (`longLatFromMember`).
fn position(ctx: &Ctx<'_, '_>, zset: ZSet, member: &[u8]) -> Option<[f64; 2]> {
    score(ctx, zset, member).map(geohash::decode_score)
}

/// A distance as Redis's `addReplyDoubleDistance` writes it: `fixedpoint_d2string` with
/// four decimals (the value times 10^4 rounded to even by `llrint`).
fn write_distance(out: &mut ReplyWriter<'_>, d: f64) {
    let text = if d == 0.0 {
        "0.0000".to_owned()
    } else {
        let scaled = (d * 10_000.0).round_ties_even() as i64;
        let sign = if scaled < 0 { "-" } else { "" };
        let magnitude = scaled.unsigned_abs();
        format!("{sign}{}.{:04}", magnitude / 10_000, magnitude % 10_000)
    };
    out.bulk(text.as_bytes());
}

/// A coordinate as `addReplyHumanLongDouble` writes a double: its exact value to 17
/// decimals, trailing zeros and point dropped; a bulk string in RESP2, a double in RESP3.
fn write_coordinate(out: &mut ReplyWriter<'_>, d: f64) {
    let mut text = format!("{d:.17}");
    while text.ends_with('0') {
        text.pop();
    }
    if text.ends_with('.') {
        text.pop();
    }
    if text == "-0" {
        text = "0".to_owned();
    }
    out.double_text(text.as_bytes());
}

pub fn geoadd(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let mut flags = AddFlags::default();
    let mut first = 2;
    while first < argv.len() {
        match arg(argv, first).to_ascii_lowercase().as_slice() {
            b"nx" => flags.nx = true,
            b"xx" => flags.xx = true,
            b"ch" => flags.ch = true,
            _ => break,
        }
        first += 1;
    }
    if !(argv.len() - first).is_multiple_of(3) || (flags.xx && flags.nx) {
        return Err(CmdError::SYNTAX);
    }
    let mut pairs = Vec::with_capacity((argv.len() - first) / 3);
    for at in (first..argv.len()).step_by(3) {
        let [lon, lat] = lon_lat(argv, at)?;
        // ZADD reads the score back from its decimal text: a 52-bit integer is exact.
        pairs.push((geohash::score_of_point(lon, lat) as f64, arg(argv, at + 2)));
    }
    let added = add(ctx, arg(argv, 1), &pairs, flags)?;
    out.integer(if flags.ch {
        added.added + added.updated
    } else {
        added.added
    });
    Ok(())
}

pub fn geodist(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let to_meter = match argv.len() {
        5 => unit(arg(argv, 4))?,
        4 => 1.0,
        _ => return Err(CmdError::SYNTAX),
    };
    let Some(zset) = read_zset(ctx, arg(argv, 1))? else {
        out.null();
        return Ok(());
    };
    match (
        position(ctx, zset, arg(argv, 2)),
        position(ctx, zset, arg(argv, 3)),
    ) {
        (Some([lon1, lat1]), Some([lon2, lat2])) => {
            write_distance(out, geohash::distance(lon1, lat1, lon2, lat2) / to_meter)
        }
        _ => out.null(),
    }
    Ok(())
}

pub fn geohash_(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let zset = read_zset(ctx, arg(argv, 1))?;
    out.array(argv.len() - 2);
    for member in argv.iter().skip(2) {
        match zset.and_then(|zset| score(ctx, zset, member)) {
            Some(score) => out.bulk(&geohash::standard_geohash(score)),
            None => out.null(),
        }
    }
    Ok(())
}

pub fn geopos(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let zset = read_zset(ctx, arg(argv, 1))?;
    out.array(argv.len() - 2);
    for member in argv.iter().skip(2) {
        match zset.and_then(|zset| position(ctx, zset, member)) {
            Some([lon, lat]) => {
                out.array(2);
                write_coordinate(out, lon);
                write_coordinate(out, lat);
            }
            None => out.null_array(),
        }
    }
    Ok(())
}

/// Which search command runs (`georadiusGeneric`'s flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Radius { store_allowed: bool },
    ByMember { store_allowed: bool },
    Search,
    SearchStore,
}

impl Variant {
    fn is_search(self) -> bool {
        matches!(self, Variant::Search | Variant::SearchStore)
    }

    fn store_allowed(self) -> bool {
        matches!(
            self,
            Variant::Radius {
                store_allowed: true
            } | Variant::ByMember {
                store_allowed: true
            }
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    None,
    Asc,
    Desc,
}

/// A search's options, as `georadiusGeneric` reads them.
#[derive(Debug)]
struct Options<'a> {
    center: Option<[f64; 2]>,
    /// The radius or box and meters per unit.
    kind: Option<(ShapeKind, f64)>,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    order: Order,
    any: bool,
    count: u64,
    store: Option<&'a [u8]>,
    store_dist: bool,
    from_member: bool,
    from_lonlat: bool,
    by_radius: bool,
    by_box: bool,
}

/// The options from argument `base` on. `zset` is the source (a missing one still has its
/// options read, but `FROMMEMBER`'s member is not looked up).
fn read_options<'a>(
    ctx: &Ctx<'_, '_>,
    argv: &'a Argv,
    base: usize,
    variant: Variant,
    zset: Option<ZSet>,
    o: &mut Options<'a>,
) -> Result<(), CmdError> {
    let search = variant.is_search();
    let mut i = base;
    while i < argv.len() {
        let left = argv.len() - i - 1;
        match arg(argv, i).to_ascii_lowercase().as_slice() {
            b"withdist" => o.with_dist = true,
            b"withhash" => o.with_hash = true,
            b"withcoord" => o.with_coord = true,
            b"any" => o.any = true,
            b"asc" => o.order = Order::Asc,
            b"desc" => o.order = Order::Desc,
            b"count" if left >= 1 => {
                let count = crate::cmd::int_arg(argv, i + 1)?;
                if count <= 0 {
                    return Err(CmdError::fixed("ERR COUNT must be > 0"));
                }
                o.count = count as u64;
                i += 1;
            }
            word @ (b"store" | b"storedist") if left >= 1 && variant.store_allowed() => {
                o.store = Some(arg(argv, i + 1));
                o.store_dist = word == b"storedist";
                i += 1;
            }
            b"storedist" if variant == Variant::SearchStore => o.store_dist = true,
            b"frommember" if left >= 1 && search && !o.from_lonlat => {
                if let Some(zset) = zset {
                    let at = position(ctx, zset, arg(argv, i + 1)).ok_or(NOT_DECODED)?;
                    o.center = Some(at);
                }
                o.from_member = true;
                i += 1;
            }
            b"fromlonlat" if left >= 2 && search && !o.from_member => {
                o.center = Some(lon_lat(argv, i + 1)?);
                o.from_lonlat = true;
                i += 2;
            }
            b"byradius" if left >= 2 && search && !o.by_box => {
                let (radius, conversion) = radius_arg(argv, i + 1)?;
                o.kind = Some((ShapeKind::Radius(radius), conversion));
                o.by_radius = true;
                i += 2;
            }
            b"bybox" if left >= 3 && search && !o.by_radius => {
                let (width, height, conversion) = box_arg(argv, i + 1)?;
                o.kind = Some((ShapeKind::Box { width, height }, conversion));
                o.by_box = true;
                i += 3;
            }
            _ => return Err(CmdError::SYNTAX),
        }
        i += 1;
    }
    Ok(())
}

/// A member a search found.
#[derive(Debug)]
struct Point {
    member: Vec<u8>,
    score: f64,
    at: [f64; 2],
    distance: f64,
}

/// The members of `zset` with scores from `min` (included) to `max` (excluded) that lie in
/// `shape`, in score order, appended to `found` until it holds `limit` (0: no limit)
/// (`geoGetPointsInRange`).
fn points_in_range(
    mem: &impl Mem,
    zset: ZSet,
    (min, max): (f64, f64),
    shape: &Shape,
    found: &mut Vec<Point>,
    limit: usize,
) {
    let before = zset.walk(mem, |mem, entry| score_of(mem, entry) < min);
    let mut entry = zset.next(mem, before.last());
    while entry != 0 {
        let score = score_of(mem, entry);
        if score >= max {
            break;
        }
        let at = geohash::decode_score(score);
        if let Some(distance) = geohash::within(shape, at) {
            found.push(Point {
                member: member_of(mem, entry).to_vec(),
                score,
                at,
                distance,
            });
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        entry = zset.next(mem, entry);
    }
}

/// Every member in `shape`, box by box (`membersOfAllNeighbors`): a box equal to the last
/// one walked (which happens for radii of thousands of kilometres) is skipped.
fn search(mem: &impl Mem, zset: ZSet, shape: &Shape, limit: usize) -> Vec<Point> {
    let boxes = geohash::search_boxes(shape);
    let mut found = Vec::new();
    // Redis remembers the last box walked by index, and index 0 reads as "none".
    let mut last_walked = 0;
    for (i, &hash) in boxes.iter().enumerate() {
        if hash.is_zero() || last_walked != 0 && hash == boxes[last_walked] {
            continue;
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        let (min, max) = geohash::score_range(hash);
        points_in_range(
            mem,
            zset,
            (min as f64, max as f64),
            shape,
            &mut found,
            limit,
        );
        last_walked = i;
    }
    found
}

/// Redis's comparison of two points by distance (`sort_gp_asc`, or its negation).
fn compare(a: &Point, b: &Point, desc: bool) -> std::cmp::Ordering {
    let asc = a
        .distance
        .partial_cmp(&b.distance)
        .unwrap_or(std::cmp::Ordering::Less);
    if desc { asc.reverse() } else { asc }
}

/// `-1`, `0` or `1` as Redis's comparator answers for places `x` and `y`.
fn cmp_at(items: &[Point], x: usize, y: usize, desc: bool) -> i32 {
    compare(&items[x], &items[y], desc) as i32
}

/// The median of three places (`med3`).
fn med3(items: &[Point], x: usize, y: usize, z: usize, desc: bool) -> usize {
    let cmp = |p, q| cmp_at(items, p, q, desc);
    if cmp(x, y) < 0 {
        if cmp(y, z) < 0 {
            y
        } else if cmp(x, z) < 0 {
            z
        } else {
            x
        }
    } else if cmp(y, z) > 0 {
        y
    } else if cmp(x, z) < 0 {
        x
    } else {
        z
    }
}

/// The pivot of the `n` places from `a` (n >= 7): the middle one, or a median of medians.
fn pivot(items: &[Point], a: usize, n: usize, desc: bool) -> usize {
    let mut pm = a + n / 2;
    if n > 7 {
        let mut pl = a;
        let mut pn = a + n - 1;
        if n > 40 {
            let d = n / 8;
            pl = med3(items, pl, pl + d, pl + 2 * d, desc);
            pm = med3(items, pm - d, pm, pm + d, desc);
            pn = med3(items, pn - 2 * d, pn - d, pn, desc);
        }
        pm = med3(items, pl, pm, pn, desc);
    }
    pm
}

/// Bentley and McIlroy's split of the `n` places from `a` around the pivot at `a`: equal
/// items gather at both ends. Returns (pa, pb, pc, pd) as `_pqsort` leaves them.
fn partition(items: &mut [Point], a: usize, n: usize, desc: bool) -> [usize; 4] {
    let (mut pa, mut pb) = (a + 1, a + 1);
    // pc and pd stay at or above a: pc stops once it passes pb - 1 >= a.
    let (mut pc, mut pd) = (a + n - 1, a + n - 1);
    loop {
        while pb <= pc {
            let c = cmp_at(items, pb, a, desc);
            if c > 0 {
                break;
            }
            if c == 0 {
                items.swap(pa, pb);
                pa += 1;
            }
            pb += 1;
        }
        while pb <= pc {
            let c = cmp_at(items, pc, a, desc);
            if c < 0 {
                break;
            }
            if c == 0 {
                items.swap(pc, pd);
                pd -= 1;
            }
            pc -= 1;
        }
        if pb > pc {
            return [pa, pb, pc, pd];
        }
        items.swap(pb, pc);
        pb += 1;
        pc -= 1;
    }
}

/// Redis's `pqsort`: Bentley and McIlroy's quicksort that sorts only what is needed for
/// places `lo..=hi` to hold what a full sort puts there. Ties end up where its swaps leave
/// them, so this is a port, step for step, with an explicit stack for its recursion.
fn pqsort(items: &mut [Point], lo: usize, hi: usize, desc: bool) {
    let overlaps = |start: usize, len: usize| !(hi < start || lo >= start + len);
    let vecswap = |items: &mut [Point], x: usize, y: usize, len: usize| {
        for k in 0..len {
            items.swap(x + k, y + k);
        }
    };
    let mut stack = vec![(0usize, items.len())];
    while let Some((a, n)) = stack.pop() {
        if n < 7 {
            for m in a + 1..a + n {
                let mut l = m;
                while l > a && cmp_at(items, l - 1, l, desc) > 0 {
                    items.swap(l, l - 1);
                    l -= 1;
                }
            }
            continue;
        }
        let pm = pivot(items, a, n, desc);
        items.swap(a, pm);
        let [pa, pb, pc, pd] = partition(items, a, n, desc);
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(items, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(items, pb, pn - r, r);
        // Each side is sorted only where it meets lo..=hi (the order of the two does not
        // matter: they are disjoint).
        let left = pb - pa;
        if left > 1 && overlaps(a, left) {
            stack.push((a, left));
        }
        let right = pd - pc;
        if right > 1 && overlaps(pn - right, right) {
            stack.push((pn - right, right));
        }
    }
}

/// `georadiusGeneric`: the search `variant` runs, answered or stored.
fn georadius_generic(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    variant: Variant,
) -> Result<(), CmdError> {
    let source = arg(
        argv,
        if variant == Variant::SearchStore {
            2
        } else {
            1
        },
    );
    let zset = read_zset(ctx, source)?;
    let mut o = Options::new(argv, variant);
    let base = read_base(ctx, argv, variant, zset, &mut o)?;
    read_options(ctx, argv, base, variant, zset, &mut o)?;
    check_options(argv, variant, &o)?;
    let Some(zset) = zset else {
        match o.store {
            Some(destination) => {
                crate::cmd::keys::delete_destination(ctx, destination);
                out.integer(0);
            }
            None => out.array(0),
        }
        return Ok(());
    };
    let found = found_points(ctx, zset, &mut o);
    match o.store {
        None => answer(out, &o, &found),
        Some(destination) => {
            let event = if variant.is_search() {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            store(ctx, out, (destination, event), o.store_dist, &found)?;
        }
    }
    Ok(())
}

impl<'a> Options<'a> {
    /// No option yet; `GEOSEARCHSTORE` stores into its first key.
    fn new(argv: &'a Argv, variant: Variant) -> Options<'a> {
        Options {
            center: None,
            kind: None,
            with_dist: false,
            with_hash: false,
            with_coord: false,
            order: Order::None,
            any: false,
            count: 0,
            store: (variant == Variant::SearchStore).then(|| arg(argv, 1)),
            store_dist: false,
            from_member: false,
            from_lonlat: false,
            by_radius: false,
            by_box: false,
        }
    }
}

/// The arguments before the options (`GEORADIUS`'s point and radius, `GEORADIUSBYMEMBER`'s
/// member and radius); returns where the options start.
fn read_base(
    ctx: &Ctx<'_, '_>,
    argv: &Argv,
    variant: Variant,
    zset: Option<ZSet>,
    o: &mut Options<'_>,
) -> Result<usize, CmdError> {
    Ok(match variant {
        Variant::Radius { .. } => {
            o.center = Some(lon_lat(argv, 2)?);
            let (radius, conversion) = radius_arg(argv, 4)?;
            o.kind = Some((ShapeKind::Radius(radius), conversion));
            6
        }
        Variant::ByMember { .. } => {
            // A missing source still has its options read, but not its member or radius.
            if let Some(zset) = zset {
                o.center = Some(position(ctx, zset, arg(argv, 2)).ok_or(NOT_DECODED)?);
                let (radius, conversion) = radius_arg(argv, 3)?;
                o.kind = Some((ShapeKind::Radius(radius), conversion));
            }
            5
        }
        Variant::Search => 2,
        Variant::SearchStore => 3,
    })
}

/// What the search finds in `zset`, sorted as asked, cut to `COUNT`, distances in the unit.
fn found_points(ctx: &Ctx<'_, '_>, zset: ZSet, o: &mut Options<'_>) -> Vec<Point> {
    if o.count != 0 && o.order == Order::None && !o.any {
        o.order = Order::Asc;
    }
    let (kind, conversion) = o.kind.expect("a search has a radius or a box");
    let shape = Shape {
        center: o.center.expect("a search has a centre"),
        conversion,
        kind,
    };
    let limit = if o.any { o.count as usize } else { 0 };
    let mut found = search(&ctx.access, zset, &shape, limit);
    let returned = match o.count {
        0 => found.len(),
        count => found
            .len()
            .min(usize::try_from(count).unwrap_or(usize::MAX)),
    };
    if o.order != Order::None && returned > 0 {
        let desc = o.order == Order::Desc;
        if returned == found.len() {
            found.sort_by(|a, b| compare(a, b, desc));
        } else {
            pqsort(&mut found, 0, returned - 1, desc);
        }
    }
    found.truncate(returned);
    for point in &mut found {
        point.distance /= shape.conversion;
    }
    found
}

/// The checks after the options are read, in Redis's order.
fn check_options(argv: &Argv, variant: Variant, o: &Options<'_>) -> Result<(), CmdError> {
    let name = || String::from_utf8_lossy(arg(argv, 0)).into_owned();
    if o.store.is_some() && (o.with_dist || o.with_hash || o.with_coord) {
        let what = match variant {
            Variant::SearchStore => "GEOSEARCHSTORE",
            _ => "STORE option in GEORADIUS",
        };
        return Err(CmdError::owned(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    if variant.is_search() && !(o.from_member || o.from_lonlat) {
        return Err(CmdError::owned(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
            name()
        )));
    }
    if variant.is_search() && !(o.by_radius || o.by_box) {
        return Err(CmdError::owned(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {}",
            name()
        )));
    }
    if o.any && o.count == 0 {
        return Err(CmdError::fixed(
            "ERR the ANY argument requires COUNT argument",
        ));
    }
    Ok(())
}

/// A search's reply: members, or arrays of a member and what was asked for (distance,
/// hash, coordinates, in that order).
fn answer(out: &mut ReplyWriter<'_>, o: &Options<'_>, found: &[Point]) {
    let extras = usize::from(o.with_dist) + usize::from(o.with_hash) + usize::from(o.with_coord);
    out.array(found.len());
    for point in found {
        if extras > 0 {
            out.array(extras + 1);
        }
        out.bulk(&point.member);
        if o.with_dist {
            write_distance(out, point.distance);
        }
        if o.with_hash {
            // C converts the score to `long long`: a 52-bit integer, exactly.
            out.integer(point.score as i64);
        }
        if o.with_coord {
            out.array(2);
            write_coordinate(out, point.at[0]);
            write_coordinate(out, point.at[1]);
        }
    }
}

/// A storing search: `destination` replaced by a sorted set of what was found (scored by
/// geohash or, for `STOREDIST`, by distance) and `event` published, or deleted if nothing
/// was.
fn store(
    ctx: &mut Ctx<'_, '_>,
    out: &mut ReplyWriter<'_>,
    (destination, event): (&[u8], &str),
    by_distance: bool,
    found: &[Point],
) -> Result<(), CmdError> {
    let pairs: Vec<(Vec<u8>, f64)> = found
        .iter()
        .map(|point| {
            let score = if by_distance {
                point.distance
            } else {
                point.score
            };
            (point.member.clone(), score)
        })
        .collect();
    replace_with(ctx, destination, &pairs, event)?;
    out.integer(pairs.len() as i64);
    Ok(())
}

pub fn georadius(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let variant = Variant::Radius {
        store_allowed: true,
    };
    georadius_generic(ctx, argv, out, variant)
}

pub fn georadius_ro(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let variant = Variant::Radius {
        store_allowed: false,
    };
    georadius_generic(ctx, argv, out, variant)
}

pub fn georadiusbymember(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let variant = Variant::ByMember {
        store_allowed: true,
    };
    georadius_generic(ctx, argv, out, variant)
}

pub fn georadiusbymember_ro(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let variant = Variant::ByMember {
        store_allowed: false,
    };
    georadius_generic(ctx, argv, out, variant)
}

pub fn geosearch(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    georadius_generic(ctx, argv, out, Variant::Search)
}

pub fn geosearchstore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    georadius_generic(ctx, argv, out, Variant::SearchStore)
}
