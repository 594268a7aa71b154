//! Property tests of the RESP codec and Redis's number formats: the request parser never
//! panics and agrees with itself however the bytes are split, replies read back as
//! written, and numbers read back as printed.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use tandem_fuzzkit::mutate;
use tandem_redis::num::{
    LongDouble, format_double, format_i64, parse_f64, parse_i64, parse_long_double_like,
};
use tandem_redis::resp::{
    Argv, ArgvDecodeError, Parsed, Proto, ReplyWriter, RequestLimits, Value, parse_reply,
    parse_request,
};

fn encode_multibulk(args: &[Vec<u8>], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

fn collect(argv: &Argv) -> Vec<Vec<u8>> {
    argv.iter().map(<[u8]>::to_vec).collect()
}

/// Request-like bytes: random garbage, and garbage behind the markers the parser
/// branches on, so that every branch sees malformed input.
fn request_bytes() -> impl Strategy<Value = Vec<u8>> {
    let prefixes = prop_oneof![
        Just(Vec::new()),
        Just(b"*".to_vec()),
        Just(b"*2\r\n".to_vec()),
        Just(b"*1\r\n$".to_vec()),
        Just(b"*2\r\n$3\r\nGET\r\n".to_vec()),
        Just(b"SET \"".to_vec()),
        Just(b"SET '".to_vec()),
    ];
    let alphabet = prop_oneof![
        any::<u8>(),
        Just(b'\r'),
        Just(b'\n'),
        Just(b'$'),
        Just(b'"'),
        Just(b'\''),
        Just(b'\\'),
        Just(b'-'),
        Just(b'0'),
        Just(0u8),
    ];
    (prefixes, vec(alphabet, 0..64)).prop_map(|(mut bytes, tail)| {
        bytes.extend(tail);
        bytes
    })
}

/// One request in a pipeline, with the arguments it should parse to (`None` when Redis
/// skips it).
fn pipelined_request() -> impl Strategy<Value = (Vec<u8>, Option<Vec<Vec<u8>>>)> {
    prop_oneof![
        4 => vec(vec(any::<u8>(), 0..16), 1..4).prop_map(|args| {
            let mut bytes = Vec::new();
            encode_multibulk(&args, &mut bytes);
            (bytes, Some(args))
        }),
        1 => vec("[a-zA-Z0-9]{1,6}", 1..4).prop_map(|words| {
            let line = format!("{}\r\n", words.join(" "));
            let args = words.into_iter().map(String::into_bytes).collect();
            (line.into_bytes(), Some(args))
        }),
        1 => prop_oneof![
            Just(&b"*0\r\n"[..]),
            Just(&b"*-1\r\n"[..]),
            Just(&b"\r\n"[..]),
            Just(&b"  \n"[..]),
        ]
            .prop_map(|bytes| (bytes.to_vec(), None)),
    ]
}

/// Quotes bytes for an inline request so that `sdssplitargs` reads them back.
fn quote_inline(arg: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &byte in arg {
        match byte {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', byte]),
            0x20..=0x7e => out.push(byte),
            _ => out.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parse_request_never_panics_and_reports_consistently(
        bytes in request_bytes(),
        small_limits in any::<bool>(),
    ) {
        let limits = if small_limits {
            RequestLimits {
                bulk_len_max: 8,
                args_max: 3,
                inline_len_max: 16,
                unauthenticated: false,
            }
        } else {
            RequestLimits::default()
        };
        let mut argv = Argv::new();
        argv.push(b"stale");
        match parse_request(&bytes, &limits, &mut argv) {
            Ok(Parsed::Incomplete { at_least }) => {
                prop_assert!(at_least > bytes.len());
                prop_assert!(argv.is_empty());
            }
            Ok(Parsed::Command { consumed }) => {
                prop_assert!(consumed > 0 && consumed <= bytes.len());
                prop_assert!(!argv.is_empty());
            }
            Ok(Parsed::Skip { consumed }) => {
                prop_assert!(consumed > 0 && consumed <= bytes.len());
                prop_assert!(argv.is_empty());
            }
            Err(_) => prop_assert!(argv.is_empty()),
        }
    }

    #[test]
    fn multibulk_prefixes_are_incomplete_and_the_whole_parses(
        args in vec(vec(any::<u8>(), 0..24), 1..6),
    ) {
        let mut bytes = Vec::new();
        encode_multibulk(&args, &mut bytes);
        let limits = RequestLimits::default();
        let mut argv = Argv::new();
        for end in 0..bytes.len() {
            match parse_request(&bytes[..end], &limits, &mut argv) {
                Ok(Parsed::Incomplete { at_least }) => {
                    prop_assert!(at_least > end && at_least <= bytes.len());
                }
                other => prop_assert!(false, "prefix of {} bytes gave {:?}", end, other),
            }
        }
        let parsed = parse_request(&bytes, &limits, &mut argv);
        prop_assert_eq!(parsed, Ok(Parsed::Command { consumed: bytes.len() }));
        prop_assert_eq!(collect(&argv), args);
    }

    #[test]
    fn pipelines_parse_the_same_however_reads_split_them(
        requests in vec(pipelined_request(), 1..6),
        cuts in vec(any::<Index>(), 0..8),
    ) {
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for (bytes, args) in &requests {
            stream.extend_from_slice(bytes);
            expected.extend(args.clone());
        }
        let mut read_ends: Vec<usize> =
            cuts.iter().map(|cut| cut.index(stream.len() + 1)).collect();
        read_ends.push(stream.len());
        read_ends.sort_unstable();

        let limits = RequestLimits::default();
        let mut argv = Argv::new();
        let mut parsed = Vec::new();
        let mut buffer: Vec<u8> = Vec::new();
        let mut wanted = 1;
        let mut delivered = 0;
        for read_end in read_ends {
            buffer.extend_from_slice(&stream[delivered..read_end]);
            delivered = read_end;
            // Honour the parser's hint: if it were too large, a command would be missed.
            while buffer.len() >= wanted {
                match parse_request(&buffer, &limits, &mut argv) {
                    Ok(Parsed::Incomplete { at_least }) => wanted = at_least,
                    Ok(Parsed::Command { consumed }) => {
                        parsed.push(collect(&argv));
                        buffer.drain(..consumed);
                        wanted = 1;
                    }
                    Ok(Parsed::Skip { consumed }) => {
                        buffer.drain(..consumed);
                        wanted = 1;
                    }
                    Err(error) => prop_assert!(false, "valid pipeline refused: {}", error),
                }
            }
        }
        prop_assert!(buffer.is_empty());
        prop_assert_eq!(parsed, expected);
    }

    #[test]
    fn quoted_inline_arguments_read_back(args in vec(vec(any::<u8>(), 0..16), 1..5)) {
        let mut line = Vec::new();
        for (index, arg) in args.iter().enumerate() {
            if index > 0 {
                line.push(b' ');
            }
            quote_inline(arg, &mut line);
        }
        line.extend_from_slice(b"\r\n");
        let mut argv = Argv::new();
        let parsed = parse_request(&line, &RequestLimits::default(), &mut argv);
        prop_assert_eq!(parsed, Ok(Parsed::Command { consumed: line.len() }));
        prop_assert_eq!(collect(&argv), args);
    }

    #[test]
    fn argv_encoding_round_trips_strictly(args in vec(vec(any::<u8>(), 0..200), 0..6)) {
        let mut argv = Argv::new();
        for arg in &args {
            argv.push(arg);
        }
        prop_assert_eq!(argv.len(), args.len());
        let mut encoded = Vec::new();
        argv.encode(&mut encoded);
        prop_assert_eq!(Argv::decode(&encoded), Ok(argv.clone()));
        for end in 0..encoded.len() {
            prop_assert!(Argv::decode(&encoded[..end]).is_err());
        }
        encoded.push(0);
        prop_assert_eq!(Argv::decode(&encoded), Err(ArgvDecodeError::TrailingBytes(1)));
    }

    #[test]
    fn argv_decoding_accepts_only_canonical_encodings(bytes in vec(any::<u8>(), 0..48)) {
        if let Ok(argv) = Argv::decode(&bytes) {
            let mut encoded = Vec::new();
            argv.encode(&mut encoded);
            prop_assert_eq!(encoded, bytes);
        }
    }

    #[test]
    fn parse_reply_never_panics(bytes in request_bytes()) {
        if let Ok(Some((_, consumed))) = parse_reply(&bytes) {
            prop_assert!(consumed <= bytes.len());
        }
    }

    #[test]
    fn written_replies_read_back(reply in reply_tree(), resp3 in any::<bool>()) {
        let proto = if resp3 { Proto::Resp3 } else { Proto::Resp2 };
        let mut bytes = Vec::new();
        write_reply(&reply, &mut ReplyWriter::new(&mut bytes, proto));
        let expected = expected_value(&reply, proto);
        prop_assert_eq!(parse_reply(&bytes), Ok(Some((expected, bytes.len()))));
        for end in 0..bytes.len() {
            prop_assert_eq!(parse_reply(&bytes[..end]), Ok(None));
        }
    }

    #[test]
    fn integers_read_back_as_printed(n in any::<i64>()) {
        let mut text = Vec::new();
        format_i64(n, &mut text);
        prop_assert_eq!(text.clone(), n.to_string().into_bytes());
        prop_assert_eq!(parse_i64(&text), Some(n));
    }

    #[test]
    fn only_canonical_integer_text_parses(text in "-?[0-9]{0,21}") {
        let canonical = text.parse::<i64>().ok().filter(|n| n.to_string() == text);
        prop_assert_eq!(parse_i64(text.as_bytes()), canonical);
    }

    #[test]
    fn doubles_read_back_exactly_as_printed(bits in any::<u64>()) {
        let value = f64::from_bits(bits);
        prop_assume!(value.is_finite());
        let mut text = Vec::new();
        format_double(value, &mut text);
        let read = parse_f64(&text).map(f64::to_bits);
        prop_assert_eq!(read, Some(bits), "{}", String::from_utf8_lossy(&text));
    }

    #[test]
    fn decimal_doubles_parse_as_rust_does(
        digits in "[0-9]{1,20}",
        fraction in proptest::option::of("[0-9]{0,20}"),
        exponent in -330i32..330,
        negative in any::<bool>(),
    ) {
        let text = format!(
            "{}{}{}e{}",
            if negative { "-" } else { "" },
            digits,
            fraction.map(|f| format!(".{f}")).unwrap_or_default(),
            exponent,
        );
        let rust: f64 = text.parse().expect("a plain decimal");
        let is_zero_text = text
            .bytes()
            .take_while(|&b| b != b'e')
            .all(|b| !b.is_ascii_digit() || b == b'0');
        let out_of_range = rust.is_infinite() || (rust == 0.0 && !is_zero_text);
        let expected = if out_of_range { None } else { Some(rust.to_bits()) };
        prop_assert_eq!(parse_f64(text.as_bytes()).map(f64::to_bits), expected);
    }

    #[test]
    fn hex_doubles_parse_as_their_value(mantissa in 1u64..(1 << 53), exponent in -900i32..900) {
        let text = format!("0x{mantissa:x}p{exponent}");
        let value = mantissa as f64 * 2f64.powi(exponent);
        prop_assert_eq!(parse_f64(text.as_bytes()), Some(value));
    }

    #[test]
    fn long_double_parsing_never_panics(bytes in request_bytes(), text in "[-+0-9.eEpPxX]{0,24}") {
        let _ = LongDouble::parse(&bytes);
        let _ = parse_long_double_like(text.as_bytes());
        if let Some(value) = LongDouble::parse(text.as_bytes()) {
            let mut printed = Vec::new();
            value.format_human(&mut printed);
            prop_assert!(!printed.is_empty());
        }
    }

    #[test]
    fn long_double_sums_of_short_decimals_are_exact(a in -1600i64..1600, b in -1600i64..1600) {
        let cents = |n: i64| {
            let sign = if n < 0 { "-" } else { "" };
            format!("{sign}{}.{:02}", n.abs() / 100, n.abs() % 100)
        };
        let sum = LongDouble::parse(cents(a).as_bytes()).expect("decimal")
            + LongDouble::parse(cents(b).as_bytes()).expect("decimal");
        let mut printed = Vec::new();
        sum.format_human(&mut printed);
        let exact = cents(a + b);
        let exact = exact.trim_end_matches('0').trim_end_matches('.');
        let exact = if exact == "-0" || exact.is_empty() { "0" } else { exact };
        prop_assert_eq!(String::from_utf8_lossy(&printed), exact);
    }

    #[test]
    fn long_double_integer_sums_are_exact(
        a in -(1i64 << 62)..(1 << 62),
        b in -(1i64 << 62)..(1 << 62),
    ) {
        let sum = LongDouble::parse(a.to_string().as_bytes()).expect("integer")
            + LongDouble::parse(b.to_string().as_bytes()).expect("integer");
        let mut printed = Vec::new();
        sum.format_human(&mut printed);
        let exact = (i128::from(a) + i128::from(b)).to_string();
        prop_assert_eq!(String::from_utf8_lossy(&printed), exact);
    }

    #[test]
    fn long_double_text_reads_back_to_the_same_text(
        digits in "[1-9][0-9]{0,24}",
        exponent in -40i32..40,
    ) {
        let text = format!("{digits}e{exponent}");
        let value = LongDouble::parse(text.as_bytes()).expect("in range");
        let mut printed = Vec::new();
        value.format_human(&mut printed);
        let again = LongDouble::parse(&printed).expect("printed text parses");
        let mut reprinted = Vec::new();
        again.format_human(&mut reprinted);
        prop_assert_eq!(reprinted, printed);
    }
}

/// A reply to write with [`ReplyWriter`], for checking that it reads back.
#[derive(Clone, Debug)]
enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    BulkInteger(i64),
    Null,
    NullArray,
    Double(f64),
    Boolean(bool),
    Verbatim(String),
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
}

fn reply_tree() -> impl Strategy<Value = Reply> {
    let leaf = prop_oneof![
        "[a-zA-Z0-9 ]{0,12}".prop_map(Reply::Simple),
        "ERR [a-z \r\n]{0,12}".prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Integer),
        vec(any::<u8>(), 0..16).prop_map(Reply::Bulk),
        any::<i64>().prop_map(Reply::BulkInteger),
        Just(Reply::Null),
        Just(Reply::NullArray),
        any::<f64>().prop_map(Reply::Double),
        any::<bool>().prop_map(Reply::Boolean),
        "[a-z\r\n ]{0,12}".prop_map(Reply::Verbatim),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Reply::Array),
            vec((inner.clone(), inner.clone()), 0..3).prop_map(Reply::Map),
            vec(inner, 0..4).prop_map(Reply::Set),
        ]
    })
}

fn write_reply(reply: &Reply, writer: &mut ReplyWriter<'_>) {
    match reply {
        Reply::Simple(text) => writer.simple(text),
        Reply::Error(text) => writer.error(text),
        Reply::Integer(n) => writer.integer(*n),
        Reply::Bulk(bytes) => writer.bulk(bytes),
        Reply::BulkInteger(n) => writer.bulk_integer(*n),
        Reply::Null => writer.null(),
        Reply::NullArray => writer.null_array(),
        Reply::Double(d) => writer.double(*d),
        Reply::Boolean(b) => writer.boolean(*b),
        Reply::Verbatim(text) => writer.verbatim("txt", text),
        Reply::Array(items) => {
            writer.array(items.len());
            items.iter().for_each(|item| write_reply(item, writer));
        }
        Reply::Set(items) => {
            writer.set(items.len());
            items.iter().for_each(|item| write_reply(item, writer));
        }
        Reply::Map(pairs) => {
            writer.map(pairs.len());
            for (key, value) in pairs {
                write_reply(key, writer);
                write_reply(value, writer);
            }
        }
    }
}

fn expected_value(reply: &Reply, proto: Proto) -> Value {
    let resp3 = proto == Proto::Resp3;
    let all = |items: &[Reply]| {
        items
            .iter()
            .map(|item| expected_value(item, proto))
            .collect()
    };
    match reply {
        Reply::Simple(text) => Value::Simple(text.clone().into_bytes()),
        Reply::Error(text) => Value::Error(text.replace(['\r', '\n'], " ").into_bytes()),
        Reply::Integer(n) => Value::Integer(*n),
        Reply::Bulk(bytes) => Value::Bulk(bytes.clone()),
        Reply::BulkInteger(n) => Value::Bulk(n.to_string().into_bytes()),
        Reply::Null => Value::Null,
        Reply::NullArray if resp3 => Value::Null,
        Reply::NullArray => Value::NullArray,
        Reply::Double(d) => {
            let mut text = Vec::new();
            format_double(*d, &mut text);
            if resp3 {
                Value::Double(text)
            } else {
                Value::Bulk(text)
            }
        }
        Reply::Boolean(b) if resp3 => Value::Boolean(*b),
        Reply::Boolean(b) => Value::Integer(i64::from(*b)),
        Reply::Verbatim(text) if resp3 => {
            Value::Verbatim(b"txt".to_vec(), text.clone().into_bytes())
        }
        Reply::Verbatim(text) => Value::Bulk(text.clone().into_bytes()),
        Reply::Array(items) => Value::Array(all(items)),
        Reply::Set(items) if resp3 => Value::Set(all(items)),
        Reply::Set(items) => Value::Array(all(items)),
        Reply::Map(pairs) if resp3 => Value::Map(
            pairs
                .iter()
                .map(|(key, value)| (expected_value(key, proto), expected_value(value, proto)))
                .collect(),
        ),
        Reply::Map(pairs) => Value::Array(
            pairs
                .iter()
                .flat_map(|(key, value)| [expected_value(key, proto), expected_value(value, proto)])
                .collect(),
        ),
    }
}

// ---------------------------------------------------------------------------------------
// Fuzz targets (docs/fuzzing.md): `TANDEM_FUZZ_CASES` cases each.

/// Cases a RESP fuzz target runs by default: a few seconds in a debug build.
const RESP_FUZZ_CASES: u32 = 65536;

/// The limits a connection parses under: Redis's, a stranger's before `AUTH`, and small ones
/// that every limit's branch meets.
fn limits() -> impl Strategy<Value = RequestLimits> {
    let small =
        (1..40usize, 1..6usize, 1..40usize).prop_map(|(bulk, args, inline)| RequestLimits {
            bulk_len_max: bulk,
            args_max: args,
            inline_len_max: inline,
            unauthenticated: false,
        });
    prop_oneof![
        Just(RequestLimits::default()),
        Just(RequestLimits {
            unauthenticated: true,
            ..RequestLimits::default()
        }),
        small,
    ]
}

/// What a client might send: arbitrary bytes, request-like garbage, multibulk headers that
/// announce anything, and pipelines of valid requests with bytes flipped, cut or inserted.
fn request_stream() -> impl Strategy<Value = Vec<u8>> {
    let pipeline = vec(pipelined_request(), 1..6)
        .prop_map(|requests| requests.into_iter().flat_map(|(bytes, _)| bytes).collect());
    let edits = vec((any::<Index>(), any::<u8>(), any::<u8>()), 0..4);
    let mutated = (pipeline, edits).prop_map(|(bytes, edits)| mutate(bytes, &edits));
    let announced = ("-?[0-9]{1,21}", "-?[0-9]{1,21}", vec(any::<u8>(), 0..32)).prop_map(
        |(count, len, tail)| [format!("*{count}\r\n${len}\r\n").into_bytes(), tail].concat(),
    );
    prop_oneof![
        vec(any::<u8>(), 0..512),
        request_bytes(),
        announced,
        mutated,
    ]
}

/// The commands a connection parsed (each its arguments), and the protocol error that closed
/// it, if one did.
type ConnectionParse = (Vec<Vec<Vec<u8>>>, Option<String>);

/// What a connection parses from `stream` when it arrives in reads ending at `read_ends`,
/// honouring the parser's hints as the RESP loop does. Checks the parser's promises on the
/// way.
fn parse_stream(
    stream: &[u8],
    read_ends: &[usize],
    limits: &RequestLimits,
) -> Result<ConnectionParse, TestCaseError> {
    let mut argv = Argv::new();
    let (mut commands, mut buffer) = (Vec::new(), Vec::new());
    let (mut wanted, mut delivered) = (1, 0);
    for &read_end in read_ends {
        buffer.extend_from_slice(&stream[delivered..read_end]);
        delivered = read_end;
        while buffer.len() >= wanted {
            match parse_request(&buffer, limits, &mut argv) {
                Ok(Parsed::Incomplete { at_least }) => {
                    prop_assert!(at_least > buffer.len() && argv.is_empty());
                    wanted = at_least;
                }
                Ok(Parsed::Command { consumed }) => {
                    prop_assert!(consumed > 0 && consumed <= buffer.len() && !argv.is_empty());
                    commands.push(collect(&argv));
                    buffer.drain(..consumed);
                    wanted = 1;
                }
                Ok(Parsed::Skip { consumed }) => {
                    prop_assert!(consumed > 0 && consumed <= buffer.len() && argv.is_empty());
                    buffer.drain(..consumed);
                    wanted = 1;
                }
                Err(error) => {
                    prop_assert!(argv.is_empty());
                    return Ok((commands, Some(error.to_string())));
                }
            }
        }
    }
    Ok((commands, None))
}

/// What a node might answer, as a proxy or a script reads it: arbitrary bytes, replies of
/// every type with bytes flipped, cut or inserted, and aggregates nested past the parser's
/// depth limit.
fn reply_stream() -> impl Strategy<Value = Vec<u8>> {
    let written = (reply_tree(), any::<bool>()).prop_map(|(reply, resp3)| {
        let proto = if resp3 { Proto::Resp3 } else { Proto::Resp2 };
        let mut bytes = Vec::new();
        write_reply(&reply, &mut ReplyWriter::new(&mut bytes, proto));
        bytes
    });
    let edits = vec((any::<Index>(), any::<u8>(), any::<u8>()), 0..4);
    let mutated = (written, edits).prop_map(|(bytes, edits)| mutate(bytes, &edits));
    let deep = (
        prop::sample::select(vec![&b"*1\r\n"[..], b"%1\r\n:1\r\n", b"~1\r\n", b">1\r\n"]),
        0..400usize,
    )
        .prop_map(|(level, depth)| [level.repeat(depth), b":1\r\n".to_vec()].concat());
    prop_oneof![vec(any::<u8>(), 0..512), request_bytes(), mutated, deep]
}

proptest! {
    #![proptest_config(tandem_fuzzkit::config(RESP_FUZZ_CASES))]

    /// Fuzz target: the request parser never panics, keeps its promises, and parses the same
    /// commands however the stream is split into reads. (A split may close the connection
    /// sooner, as Redis's does: a line too long is refused once the bytes read without a
    /// newline pass the limit, so the commands before an error are a prefix of the others.)
    #[test]
    fn fuzz_parse_request(
        stream in request_stream(),
        cuts in vec(any::<Index>(), 0..8),
        limits in limits(),
    ) {
        let mut read_ends: Vec<usize> =
            cuts.iter().map(|cut| cut.index(stream.len() + 1)).collect();
        read_ends.push(stream.len());
        read_ends.sort_unstable();
        let (whole, whole_error) = parse_stream(&stream, &[stream.len()], &limits)?;
        let (split, split_error) = parse_stream(&stream, &read_ends, &limits)?;
        match (&whole_error, &split_error) {
            (None, None) => prop_assert_eq!(&whole, &split),
            (Some(_), None) => prop_assert!(split.starts_with(&whole)),
            (_, Some(_)) => prop_assert!(whole.starts_with(&split)),
        }
    }

    /// Fuzz target: the reply parser (what proxies and scripts read replies with) never
    /// panics, and a reply it reads is one it reads the same from exactly its own bytes.
    #[test]
    fn fuzz_parse_reply(bytes in reply_stream()) {
        if let Ok(Some((value, used))) = parse_reply(&bytes) {
            prop_assert!(used > 0 && used <= bytes.len());
            prop_assert_eq!(parse_reply(&bytes[..used]), Ok(Some((value, used))));
        }
    }
}
