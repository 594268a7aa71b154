//! The configurations in `examples/` that the README tells users to run are valid.

use std::path::Path;

use tandem_runtime::config::{NodeConfig, Role};

#[test]
fn the_example_primary_and_backup_configs_parse_and_agree() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let primary = NodeConfig::load(&examples.join("primary.toml")).unwrap();
    let backup = NodeConfig::load(&examples.join("backup.toml")).unwrap();
    assert_eq!(primary.role, Some(Role::Primary));
    assert_eq!(backup.role, Some(Role::Backup));
    assert_eq!(
        primary.group, backup.group,
        "both nodes serve the same group"
    );
    assert_eq!(backup.primary_address(), Some(primary.listen));
    assert_eq!(
        primary
            .backups()
            .map(|peer| peer.address)
            .collect::<Vec<_>>(),
        vec![backup.listen]
    );
}

// ---------------------------------------------------------------------------------------
// Fuzz target (docs/fuzzing.md): the config parser, `TANDEM_FUZZ_CASES` cases (a few
// seconds' worth in a debug build by default).

mod fuzz {
    use std::path::Path;

    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::sample::Index;
    use tandem_runtime::config::{ConfigError, EXAMPLE, NodeConfig};

    /// Cases the config fuzz target runs by default.
    const CONFIG_FUZZ_CASES: u32 = 32768;

    use tandem_fuzzkit::config as fuzz_config;

    /// A secret no error may quote while its key is on its line.
    const SECRET: &str = "s3cr3t-never-quoted-0123456789";

    /// Valid configurations to damage: the examples, the commented `EXAMPLE`, every field of
    /// it written out, and one with the secrets, users, a log and a cluster table.
    fn valid_texts() -> Vec<String> {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let read = |name: &str| std::fs::read_to_string(examples.join(name)).unwrap();
        let full = NodeConfig::from_toml_str(EXAMPLE).unwrap().to_toml_string();
        let secrets = format!(
            "node_id = 1\nlisten = \"127.0.0.1:7101\"\nresp_listen = \"127.0.0.1:6379\"\n\
             requirepass = \"{SECRET}\"\npeer_secret = \"{SECRET}\"\nrole = \"primary\"\n\n\
             [group]\nworkload = \"redis\"\nsafety = \"durable\"\n\n\
             [log]\ndir = \"/tmp/tandem-fuzz/log\"\n\n\
             [[users]]\nname = \"app\"\npassword = \"{SECRET}\"\nkeys = [\"app:*\"]\n\n\
             [[peers]]\nnode_id = 2\naddress = \"127.0.0.1:7102\"\nrole = \"backup\"\n"
        );
        // A cluster of three groups, each with its members and slots, serving RESP.
        let groups = "node_id = 1\nlisten = \"127.0.0.1:7101\"\n\
             resp_listen = \"127.0.0.1:6379\"\nredis_cluster = true\n\n\
             [group]\nworkload = \"redis\"\n\n[cluster]\ndata_dir = \"/tmp/tandem-fuzz\"\n\n\
             [[cluster.groups]]\nid = 1\nmembers = [1, 2]\nslots = [\"0-8000\"]\n\n\
             [[cluster.groups]]\nid = 2\nmembers = [2, 1]\nsafety = \"1-safe\"\n\
             slots = [\"8001-16000\", \"16001-16383\"]\n\n\
             [[peers]]\nnode_id = 2\naddress = \"127.0.0.1:7102\"\nresp = \"127.0.0.1:6479\"\n"
            .to_owned();
        vec![
            read("primary.toml"),
            read("backup.toml"),
            EXAMPLE.to_string(),
            full,
            secrets,
            groups,
        ]
    }

    /// One edit of a configuration's text.
    #[derive(Clone, Debug)]
    enum Edit {
        /// A character replaced by one that TOML gives a meaning (or none).
        Replace {
            at: Index,
            with: char,
        },
        Insert {
            at: Index,
            text: String,
        },
        Cut {
            at: Index,
        },
        DeleteLine {
            line: Index,
        },
        DuplicateLine {
            line: Index,
        },
    }

    fn edit() -> impl Strategy<Value = Edit> {
        let meaningful = prop_oneof![
            prop::sample::select(vec![
                '=', '[', ']', '"', '\'', '#', '\n', '.', ',', '{', '}', '-', '0', '9', ' ', 'é',
                '\u{0}', '\u{feff}', '😀',
            ]),
            any::<char>(),
        ];
        let snippet = prop_oneof![
            "[a-z_]{1,12} = [0-9]{1,25}",
            "\\[\\[?[a-z_.]{0,10}\\]\\]?\n",
            "\"[^\"]{0,8}\"",
            ".{0,12}",
        ];
        prop_oneof![
            4 => (any::<Index>(), meaningful).prop_map(|(at, with)| Edit::Replace { at, with }),
            2 => (any::<Index>(), snippet).prop_map(|(at, text)| Edit::Insert { at, text }),
            1 => any::<Index>().prop_map(|at| Edit::Cut { at }),
            1 => any::<Index>().prop_map(|line| Edit::DeleteLine { line }),
            1 => any::<Index>().prop_map(|line| Edit::DuplicateLine { line }),
        ]
    }

    /// `text` after `edit`, on the character (or line) the edit picks; lines that hold a
    /// secret are left alone, so that every secret stays on its key's line.
    fn apply(text: &str, edit: &Edit) -> String {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let editable: Vec<usize> = (0..lines.len())
            .filter(|&line| !lines[line].contains(SECRET))
            .collect();
        if editable.is_empty() {
            return text.to_string();
        }
        let pick_line = |index: &Index| editable[index.index(editable.len())];
        let mut lines: Vec<String> = lines.iter().map(|line| line.to_string()).collect();
        let char_at = |line: &str, index: &Index| {
            let starts: Vec<usize> = line.char_indices().map(|(at, _)| at).collect();
            (!starts.is_empty()).then(|| starts[index.index(starts.len())])
        };
        match edit {
            Edit::Replace { at, with } => {
                let line = pick_line(at);
                if let Some(byte) = char_at(&lines[line], at) {
                    let old = lines[line][byte..].chars().next().expect("a char");
                    lines[line].replace_range(byte..byte + old.len_utf8(), &with.to_string());
                }
            }
            Edit::Insert { at, text } => {
                let line = pick_line(at);
                let byte = char_at(&lines[line], at).unwrap_or(0);
                lines[line].insert_str(byte, text);
            }
            Edit::Cut { at } => {
                let line = pick_line(at);
                let byte = char_at(&lines[line], at).unwrap_or(0);
                lines[line].truncate(byte);
                lines.truncate(line + 1);
            }
            Edit::DeleteLine { line: index } => {
                lines.remove(pick_line(index));
            }
            Edit::DuplicateLine { line: index } => {
                let at = pick_line(index);
                lines.insert(at, lines[at].clone());
            }
        }
        lines.concat()
    }

    /// What every parse must give: a configuration that reads back from its own TOML, or an
    /// error that names the field or the line and quotes no secret.
    fn check_parse(text: &str) -> Result<(), TestCaseError> {
        match NodeConfig::from_toml_str(text) {
            Ok(config) => {
                let again = NodeConfig::from_toml_str(&config.to_toml_string());
                prop_assert!(again.is_ok(), "{:?}", again.err());
                prop_assert_eq!(again.expect("checked"), config);
            }
            Err(error) => {
                let shown = error.to_string();
                prop_assert!(
                    !shown.contains(SECRET),
                    "an error quoted a secret: {}",
                    shown
                );
                match &error {
                    ConfigError::Invalid { field, message } => {
                        prop_assert!(!field.is_empty() && !message.is_empty(), "{}", shown);
                    }
                    ConfigError::Syntax { message, .. } => {
                        prop_assert!(message.starts_with("config: "), "{}", shown);
                        prop_assert!(message.len() > "config: ".len(), "{}", shown);
                    }
                    other => prop_assert!(false, "parsing text read a file: {other}"),
                }
            }
        }
        Ok(())
    }

    /// The configurations the target damages are valid to begin with.
    #[test]
    fn the_texts_to_damage_are_valid() {
        for text in valid_texts() {
            NodeConfig::from_toml_str(&text).unwrap_or_else(|error| panic!("{error}\n{text}"));
        }
    }

    proptest! {
        #![proptest_config(fuzz_config(CONFIG_FUZZ_CASES))]

        /// Fuzz target: valid configurations with characters replaced, text inserted or cut,
        /// lines deleted or repeated.
        #[test]
        fn fuzz_config_parser_on_damaged_configs(
            base in prop::sample::select(valid_texts()),
            edits in vec(edit(), 1..6),
        ) {
            let text = edits.iter().fold(base, |text, edit| apply(&text, edit));
            check_parse(&text)?;
        }

        /// Fuzz target: text that is not a configuration at all.
        #[test]
        fn fuzz_config_parser_on_arbitrary_text(text in ".{0,400}") {
            check_parse(&text)?;
        }
    }
}
