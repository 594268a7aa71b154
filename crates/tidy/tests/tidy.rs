//! The function-length ratchet: no non-test function in the workspace's crates runs past
//! [`LINES_MAX`] lines, except those `long_functions.txt` names, and none of those grows.
//!
//! A function's length is counted from its `fn` to its closing brace (doc comments and
//! attributes not counted). Test code (`#[test]` functions, `#[cfg(test)]` modules, `tests/`
//! and `benches/` directories) is left out. When a listed function gets shorter, its line in
//! `long_functions.txt` must come down with it (or go, at [`LINES_MAX`] or under): the file
//! only ever shrinks, and the test says which lines to change.
//!
//! And the codemap: `ARCHITECTURE.md` stays at most [`CODEMAP_LINES_MAX`] lines of at most
//! [`CODEMAP_WIDTH_MAX`] characters, so that it stays a map and not a history.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The most lines a function may take unless the ratchet file allows it more.
const LINES_MAX: usize = 100;

/// The most lines `ARCHITECTURE.md` may take.
const CODEMAP_LINES_MAX: usize = 400;

/// The widest line `ARCHITECTURE.md` may hold, in characters.
const CODEMAP_WIDTH_MAX: usize = 100;

/// The allowances, one per line: `crate-relative path::function lines`.
const ALLOWANCES: &str = include_str!("../long_functions.txt");

/// A function found in the sources: where it is, and how long.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Found {
    /// `crates/<crate>/src/<file>::<Type::>name`, unique in the workspace (a second function
    /// of the same name in the same file gets `#2`).
    key: String,
    lines: usize,
}

/// Collects the non-test functions of one file.
struct Collector<'a> {
    file: &'a str,
    /// The impl or trait being walked (`Type::`), empty at the top level.
    owner: String,
    found: Vec<Found>,
}

impl Collector<'_> {
    fn add(&mut self, name: &syn::Ident, start: proc_macro2::Span, block: &syn::Block) {
        let lines = block.brace_token.span.close().end().line - start.start().line + 1;
        let base = format!("{}::{}{}", self.file, self.owner, name);
        let mut key = base.clone();
        let mut copy = 1;
        while self.found.iter().any(|found| found.key == key) {
            copy += 1;
            key = format!("{base}#{copy}");
        }
        self.found.push(Found { key, lines });
    }
}

/// Whether `attrs` mark test code: `#[test]`, or `#[cfg(test)]` (alone, not in `cfg(any(..))`,
/// which builds outside tests too).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        if path.is_ident("test") {
            return true;
        }
        path.is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

/// The last segment of a type's path (`Foo` of `crate::x::Foo<T>`), for keys.
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(path) => path
            .path
            .segments
            .last()
            .map(|segment| segment.ident.to_string())
            .unwrap_or_default(),
        _ => String::from("_"),
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if !is_test(&module.attrs) {
            syn::visit::visit_item_mod(self, module);
        }
    }

    fn visit_item_fn(&mut self, function: &'ast syn::ItemFn) {
        self.function(&function.attrs, &function.sig, &function.block);
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if is_test(&item.attrs) {
            return;
        }
        let outer = std::mem::replace(&mut self.owner, format!("{}::", type_name(&item.self_ty)));
        syn::visit::visit_item_impl(self, item);
        self.owner = outer;
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        self.function(&function.attrs, &function.sig, &function.block);
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        let outer = std::mem::replace(&mut self.owner, format!("{}::", item.ident));
        syn::visit::visit_item_trait(self, item);
        self.owner = outer;
    }

    fn visit_trait_item_fn(&mut self, function: &'ast syn::TraitItemFn) {
        if let Some(block) = &function.default {
            self.function(&function.attrs, &function.sig, block);
        }
    }
}

impl<'ast> Collector<'_> {
    /// Counts a function unless it is test code; functions nested in its body count on their
    /// own, under the same owner.
    fn function(
        &mut self,
        attrs: &[syn::Attribute],
        sig: &syn::Signature,
        block: &'ast syn::Block,
    ) {
        if is_test(attrs) {
            return;
        }
        self.add(&sig.ident, sig.fn_token.span, block);
        syn::visit::visit_block(self, block);
    }
}

/// The workspace's root (this crate is `crates/tidy`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/tidy sits two levels below the root")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The files a `#[cfg(test)] mod name;` in `file` (a path under the root) brings in:
/// `name.rs` or `name/mod.rs` beside a `lib.rs`, `main.rs` or `mod.rs`, else in the
/// directory named after the file.
fn test_module_files(root: &Path, file: &Path, tree: &syn::File) -> Vec<PathBuf> {
    let stem = file
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or_default();
    let parent = file.parent().expect("a file has a directory");
    let dir = if matches!(stem, "lib" | "main" | "mod") {
        parent.to_path_buf()
    } else {
        parent.join(stem)
    };
    tree.items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(module) if module.content.is_none() && is_test(&module.attrs) => {
                Some(module.ident.to_string())
            }
            _ => None,
        })
        .flat_map(|name| {
            [
                root.join(&dir).join(format!("{name}.rs")),
                root.join(&dir).join(&name).join("mod.rs"),
            ]
        })
        .collect()
}

/// Every non-test function of every crate's `src/`.
fn functions() -> Vec<Found> {
    let root = root();
    let mut crates: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .expect("the crates directory")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.join("src").is_dir())
        .collect();
    crates.sort();
    let mut parsed = Vec::new();
    for krate in crates {
        let mut files = Vec::new();
        rust_files(&krate.join("src"), &mut files);
        for path in files {
            let text = fs::read_to_string(&path)
                .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
            let tree = syn::parse_file(&text)
                .unwrap_or_else(|err| panic!("parsing {}: {err}", path.display()));
            let relative = path
                .strip_prefix(&root)
                .expect("under the root")
                .to_path_buf();
            parsed.push((relative, tree));
        }
    }
    let test_files: Vec<PathBuf> = parsed
        .iter()
        .flat_map(|(file, tree)| test_module_files(&root, file, tree))
        .collect();
    let mut found = Vec::new();
    for (relative, tree) in &parsed {
        if test_files.contains(&root.join(relative)) {
            continue;
        }
        let file = relative.to_string_lossy().replace('\\', "/");
        let mut collector = Collector {
            file: &file,
            owner: String::new(),
            found: Vec::new(),
        };
        collector.visit_file(tree);
        found.extend(collector.found);
    }
    found
}

/// The allowances: key → lines. Panics on a malformed line.
fn allowances() -> BTreeMap<String, usize> {
    let mut allowed = BTreeMap::new();
    for (number, line) in ALLOWANCES.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, lines) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("long_functions.txt:{}: want `key lines`", number + 1));
        let lines: usize = lines
            .parse()
            .unwrap_or_else(|_| panic!("long_functions.txt:{}: {lines} is no count", number + 1));
        let previous = allowed.insert(key.to_owned(), lines);
        assert!(previous.is_none(), "long_functions.txt lists {key} twice");
    }
    allowed
}

/// What is wrong with `found` against `allowed`: one line each, empty when all is well.
fn problems(found: &[Found], allowed: &BTreeMap<String, usize>) -> String {
    let mut out = String::new();
    let mut seen = BTreeMap::new();
    for function in found {
        seen.insert(function.key.as_str(), function.lines);
        match allowed.get(&function.key) {
            None if function.lines > LINES_MAX => {
                let _ = writeln!(
                    out,
                    "{} has {} lines, over {LINES_MAX}: split it",
                    function.key, function.lines
                );
            }
            Some(&limit) if function.lines > limit => {
                let _ = writeln!(
                    out,
                    "{} grew to {} lines, past its allowance of {limit}: shorten it",
                    function.key, function.lines
                );
            }
            Some(&limit) if function.lines < limit => {
                let fix = if function.lines > LINES_MAX {
                    format!("lower its line to {}", function.lines)
                } else {
                    String::from("remove its line")
                };
                let _ = writeln!(
                    out,
                    "{} is down to {} lines from its allowance of {limit}: {fix} in \
                     long_functions.txt",
                    function.key, function.lines
                );
            }
            _ => {}
        }
    }
    for key in allowed.keys() {
        if !seen.contains_key(key.as_str()) {
            let _ = writeln!(
                out,
                "{key} is in long_functions.txt but no longer in the sources: remove its line"
            );
        }
    }
    out
}

#[test]
fn no_function_grows_past_its_allowance() {
    let found = functions();
    assert!(
        found.len() > 1_000,
        "only {} functions found: the walk missed the sources",
        found.len()
    );
    let problems = problems(&found, &allowances());
    assert!(
        problems.is_empty(),
        "the function-length ratchet:\n{problems}"
    );
}

#[test]
fn the_ratchet_catches_a_grown_a_new_and_a_shrunk_function() {
    let allowed = BTreeMap::from([
        (String::from("a.rs::grown"), 120),
        (String::from("a.rs::shrunk"), 150),
        (String::from("a.rs::gone"), 130),
    ]);
    let found = [
        Found {
            key: String::from("a.rs::grown"),
            lines: 121,
        },
        Found {
            key: String::from("a.rs::shrunk"),
            lines: 90,
        },
        Found {
            key: String::from("a.rs::new"),
            lines: 101,
        },
        Found {
            key: String::from("a.rs::short"),
            lines: 100,
        },
    ];
    let text = problems(&found, &allowed);
    assert!(text.contains("a.rs::grown grew to 121 lines"), "{text}");
    assert!(text.contains("a.rs::shrunk is down to 90 lines"), "{text}");
    assert!(text.contains("remove its line"), "{text}");
    assert!(text.contains("a.rs::new has 101 lines"), "{text}");
    assert!(
        text.contains("a.rs::gone is in long_functions.txt"),
        "{text}"
    );
    assert!(!text.contains("a.rs::short"), "{text}");
}

#[test]
fn lengths_run_from_fn_to_the_closing_brace_and_skip_test_code() {
    let source = "
/// Doc lines are not counted.
fn three() {
    let x = 1;
}
impl Thing {
    fn two() {}
}
#[cfg(test)]
mod tests {
    fn hidden() {}
}
#[test]
fn also_hidden() {}
";
    let tree = syn::parse_file(source).unwrap();
    let mut collector = Collector {
        file: "f.rs",
        owner: String::new(),
        found: Vec::new(),
    };
    collector.visit_file(&tree);
    let found: Vec<(&str, usize)> = collector
        .found
        .iter()
        .map(|found| (found.key.as_str(), found.lines))
        .collect();
    assert_eq!(found, [("f.rs::three", 3), ("f.rs::Thing::two", 1)]);
}

#[test]
fn a_test_module_in_a_file_of_its_own_is_left_out() {
    let tree = syn::parse_file("#[cfg(test)]\nmod tests;\nmod kept;\n").unwrap();
    let root = Path::new("/r");
    assert_eq!(
        test_module_files(root, Path::new("crates/x/src/lib.rs"), &tree),
        [
            PathBuf::from("/r/crates/x/src/tests.rs"),
            PathBuf::from("/r/crates/x/src/tests/mod.rs")
        ]
    );
    assert_eq!(
        test_module_files(root, Path::new("crates/x/src/wal.rs"), &tree)[0],
        PathBuf::from("/r/crates/x/src/wal/tests.rs")
    );
}

/// What is wrong with a codemap's text: too many lines, or lines too wide (by line number).
fn codemap_problems(text: &str) -> String {
    let mut out = String::new();
    let lines = text.lines().count();
    if lines > CODEMAP_LINES_MAX {
        let _ = writeln!(
            out,
            "ARCHITECTURE.md has {lines} lines, past {CODEMAP_LINES_MAX}: say less, or move \
             history to docs/history.md"
        );
    }
    for (index, line) in text.lines().enumerate() {
        let width = line.chars().count();
        if width > CODEMAP_WIDTH_MAX {
            let _ = writeln!(
                out,
                "ARCHITECTURE.md:{}: {width} characters, past {CODEMAP_WIDTH_MAX}: wrap it",
                index + 1
            );
        }
    }
    out
}

#[test]
fn the_codemap_stays_short_and_narrow() {
    let text = fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let problems = codemap_problems(&text);
    assert!(problems.is_empty(), "the codemap:\n{problems}");
}

#[test]
fn the_codemap_check_catches_a_long_file_and_a_wide_line() {
    let long = "x\n".repeat(CODEMAP_LINES_MAX + 1);
    assert!(codemap_problems(&long).contains("401 lines"));
    let wide = format!("ok\n{}\n", "é".repeat(CODEMAP_WIDTH_MAX + 1));
    assert!(codemap_problems(&wide).contains("ARCHITECTURE.md:2: 101 characters"));
    let fine = format!("{}\n", "é".repeat(CODEMAP_WIDTH_MAX));
    assert_eq!(codemap_problems(&fine), "");
}
