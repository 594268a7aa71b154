//! The function libraries in the segment: a [`Dict`] of libraries by name (header at
//! [`Layout::libraries_at`]), which holds everything a library is, and a [`Dict`] of
//! functions by name (header at [`Layout::functions_at`]), an index that says which library
//! holds each function (Redis keeps the same two tables, `libraries` and `functions`).
//!
//! A library is one block:
//!
//! ```text
//! LibraryHead  72 bytes  Link (next, hash of the name, key_len = the name's length,
//!                        aux = the code's length), the function table's length in bytes,
//!                        the number of functions, the code's SHA-1 in lower-case hex (the
//!                        key of the node's cache of loaded libraries)
//! name         key_len bytes: the key
//! code         aux bytes: the code FUNCTION LOAD was given, shebang line included
//! table        per function, in the order the code registered them:
//!                flags u8, name_len u32 LE, description_len u32 LE (u32::MAX: none),
//!                name, description
//! ```
//!
//! A function's index entry is `[Link: key_len = the function's name's length, aux = the
//! library's name's length][function name in lower case][library name]`: as in Redis,
//! function names are one namespace without case (`FCALL ECHO` calls `echo`; two libraries
//! cannot hold `echo` and `Echo`), library names are two names when their case differs. Each block's length follows from
//! its head, so [`owned`] and the flush need nothing else to account for it. [`check`] holds
//! the index to the libraries: every function of every library has its entry, naming that
//! library, and no other entry exists.

use bytemuck::{Pod, Zeroable};
use tandem_memory::Txn;

use crate::alloc::OutOfMemory;
use crate::cmd::scripts::{Registered, SHA_HEX_LEN, Sha, sha1_hex};
use crate::db::Layout;
use crate::dict::{Dict, LINK_BYTES, Link};
use crate::mem::Mem;

/// A library's block, up to its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct LibraryHead {
    link: Link,
    table_len: u32,
    functions: u32,
    sha: Sha,
}

const LIBRARY_HEAD_BYTES: usize = size_of::<LibraryHead>();
const _: () = assert!(LIBRARY_HEAD_BYTES == LINK_BYTES + 8 + SHA_HEX_LEN);
/// A function's fixed part in a library's table: flags, name length, description length.
const FUNCTION_HEAD_BYTES: usize = 9;
/// A description length that says there is none.
const NO_DESCRIPTION: u32 = u32::MAX;

fn libraries(layout: &Layout) -> Dict {
    Dict::new(layout.libraries_at, LIBRARY_HEAD_BYTES)
}

fn index(layout: &Layout) -> Dict {
    Dict::new(layout.functions_at, LINK_BYTES)
}

/// A library as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Library {
    pub name: Vec<u8>,
    pub code: Vec<u8>,
    /// The SHA-1 of the code.
    pub sha: Sha,
    pub functions: Vec<Registered>,
}

impl Library {
    /// The function table's bytes.
    fn table(&self) -> Vec<u8> {
        let mut table = Vec::new();
        for function in &self.functions {
            table.push(function.flags);
            table.extend_from_slice(&len_u32(function.name.len()).to_le_bytes());
            let description_len = match &function.description {
                Some(description) => len_u32(description.len()),
                None => NO_DESCRIPTION,
            };
            table.extend_from_slice(&description_len.to_le_bytes());
            table.extend_from_slice(&function.name);
            if let Some(description) = &function.description {
                table.extend_from_slice(description);
            }
        }
        table
    }
}

/// A length the functions family bounded far below 4 GiB.
fn len_u32(len: usize) -> u32 {
    let len = u32::try_from(len).expect("a bounded length");
    assert_ne!(len, NO_DESCRIPTION, "a bounded length");
    len
}

/// The functions of a library's table (`count` of them).
fn parse_table(table: &[u8], count: usize) -> Vec<Registered> {
    let mut functions = Vec::with_capacity(count);
    let mut at = 0;
    let u32_at = |at: usize| u32::from_le_bytes(table[at..at + 4].try_into().expect("4 bytes"));
    for _ in 0..count {
        let flags = table[at];
        let name_len = u32_at(at + 1) as usize;
        let description_len = u32_at(at + 5);
        at += FUNCTION_HEAD_BYTES;
        let name = table[at..at + name_len].to_vec();
        at += name_len;
        let description = (description_len != NO_DESCRIPTION).then(|| {
            let text = table[at..at + description_len as usize].to_vec();
            at += description_len as usize;
            text
        });
        functions.push(Registered {
            name,
            description,
            flags,
        });
    }
    assert_eq!(
        at,
        table.len(),
        "a library's table holds its functions exactly"
    );
    functions
}

/// The library whose block is at `entry`.
fn library_at(mem: &impl Mem, entry: usize) -> Library {
    let head: LibraryHead = mem.pod(entry);
    let name_len = head.link.key_len as usize;
    let code_len = head.link.aux as usize;
    let at = entry + LIBRARY_HEAD_BYTES;
    let table = mem.bytes(at + name_len + code_len, head.table_len as usize);
    Library {
        name: mem.bytes(at, name_len).to_vec(),
        code: mem.bytes(at + name_len, code_len).to_vec(),
        sha: head.sha,
        functions: parse_table(table, head.functions as usize),
    }
}

/// Bytes asked of the allocator for the library block at `entry`.
fn library_block_len(mem: &impl Mem, entry: usize) -> usize {
    let head: LibraryHead = mem.pod(entry);
    LIBRARY_HEAD_BYTES
        + head.link.key_len as usize
        + head.link.aux as usize
        + head.table_len as usize
}

/// Bytes asked of the allocator for the index entry at `entry`.
fn index_block_len(mem: &impl Mem, entry: usize) -> usize {
    let link: Link = mem.pod(entry);
    LINK_BYTES + link.key_len as usize + link.aux as usize
}

/// The block of library `name`, if the store holds it.
fn find_library(mem: &impl Mem, layout: &Layout, name: &[u8]) -> Option<usize> {
    let hash = crate::dict::hash(layout.seed(mem), name);
    libraries(layout)
        .find(mem, name, hash)
        .map(|found| found.entry)
}

/// Whether the store holds library `name`.
pub fn exists(mem: &impl Mem, layout: &Layout, name: &[u8]) -> bool {
    find_library(mem, layout, name).is_some()
}

/// The name of the library that holds function `name` (in any case), if any does.
pub fn library_of(mem: &impl Mem, layout: &Layout, name: &[u8]) -> Option<Vec<u8>> {
    let key = name.to_ascii_lowercase();
    let hash = crate::dict::hash(layout.seed(mem), &key);
    let found = index(layout).find(mem, &key, hash)?;
    let link: Link = mem.pod(found.entry);
    let at = found.entry + LINK_BYTES + link.key_len as usize;
    Some(mem.bytes(at, link.aux as usize).to_vec())
}

/// What `FCALL` needs of a function: its name as registered, its flags, its library's key
/// and where its library is.
#[derive(Clone, Debug)]
pub struct Called {
    pub name: Vec<u8>,
    pub flags: u8,
    /// The SHA-1 of the library's code.
    pub sha: Sha,
    library_entry: usize,
}

/// What `FCALL` needs of function `name`, if a library holds it.
pub fn called(mem: &impl Mem, layout: &Layout, name: &[u8]) -> Option<Called> {
    let library_name = library_of(mem, layout, name)?;
    let entry =
        find_library(mem, layout, &library_name).expect("an indexed function's library is stored");
    let head: LibraryHead = mem.pod(entry);
    let at = entry + LIBRARY_HEAD_BYTES + head.link.key_len as usize + head.link.aux as usize;
    let table = mem.bytes(at, head.table_len as usize);
    let function = parse_table(table, head.functions as usize)
        .into_iter()
        .find(|function| function.name.eq_ignore_ascii_case(name))
        .expect("an indexed function is in its library's table");
    Some(Called {
        name: function.name,
        flags: function.flags,
        sha: head.sha,
        library_entry: entry,
    })
}

/// The code of the library that holds the function `called` describes.
pub fn code(mem: &impl Mem, called: &Called) -> Vec<u8> {
    let head: LibraryHead = mem.pod(called.library_entry);
    let at = called.library_entry + LIBRARY_HEAD_BYTES + head.link.key_len as usize;
    mem.bytes(at, head.link.aux as usize).to_vec()
}

/// Every library, by name.
pub fn all(mem: &impl Mem, layout: &Layout) -> Vec<Library> {
    let mut all = Vec::new();
    libraries(layout).for_each(mem, |entry| all.push(library_at(mem, entry)));
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all
}

/// (libraries, functions) the store holds.
pub fn counts(mem: &impl Mem, layout: &Layout) -> (u64, u64) {
    (libraries(layout).len(mem), index(layout).len(mem))
}

/// Stores `library` (no library of its name, and none of its functions, may be stored).
pub fn insert(txn: &mut Txn<'_>, layout: &Layout, library: &Library) -> Result<(), OutOfMemory> {
    assert_eq!(
        library.sha,
        sha1_hex(&library.code),
        "a library's key is its code's"
    );
    let table = library.table();
    let len = LIBRARY_HEAD_BYTES + library.name.len() + library.code.len() + table.len();
    let entry = layout.alloc.alloc(txn, len)?;
    let head = LibraryHead {
        link: Link {
            next: 0,
            hash: crate::dict::hash(layout.seed(txn), &library.name),
            key_len: len_u32(library.name.len()),
            aux: len_u32(library.code.len()),
        },
        table_len: len_u32(table.len()),
        functions: len_u32(library.functions.len()),
        sha: library.sha,
    };
    let bytes = txn.set_range(entry, len);
    let (head_bytes, rest) = bytes.split_at_mut(LIBRARY_HEAD_BYTES);
    head_bytes.copy_from_slice(bytemuck::bytes_of(&head));
    let (name, rest) = rest.split_at_mut(library.name.len());
    name.copy_from_slice(&library.name);
    let (code, rest) = rest.split_at_mut(library.code.len());
    code.copy_from_slice(&library.code);
    rest.copy_from_slice(&table);
    // An error past the first allocation fails the whole call, whose txn then undoes it.
    libraries(layout).insert(txn, &layout.alloc, entry)?;
    for function in &library.functions {
        insert_index(
            txn,
            layout,
            &function.name.to_ascii_lowercase(),
            &library.name,
        )?;
    }
    Ok(())
}

fn insert_index(
    txn: &mut Txn<'_>,
    layout: &Layout,
    function: &[u8],
    library: &[u8],
) -> Result<(), OutOfMemory> {
    let len = LINK_BYTES + function.len() + library.len();
    let entry = layout.alloc.alloc(txn, len)?;
    let link = Link {
        next: 0,
        hash: crate::dict::hash(layout.seed(txn), function),
        key_len: len_u32(function.len()),
        aux: len_u32(library.len()),
    };
    let bytes = txn.set_range(entry, len);
    bytes[..LINK_BYTES].copy_from_slice(bytemuck::bytes_of(&link));
    bytes[LINK_BYTES..LINK_BYTES + function.len()].copy_from_slice(function);
    bytes[LINK_BYTES + function.len()..].copy_from_slice(library);
    index(layout).insert(txn, &layout.alloc, entry)
}

/// Deletes library `name` and its functions' index entries; false if it is not stored.
pub fn delete(txn: &mut Txn<'_>, layout: &Layout, name: &[u8]) -> bool {
    let hash = crate::dict::hash(layout.seed(txn), name);
    let Some(found) = libraries(layout).find(txn, name, hash) else {
        return false;
    };
    let library = library_at(txn, found.entry);
    let block_len = library_block_len(txn, found.entry);
    libraries(layout).remove(txn, &layout.alloc, found);
    layout.alloc.free(txn, found.entry, block_len);
    for function in &library.functions {
        let key = function.name.to_ascii_lowercase();
        let hash = crate::dict::hash(layout.seed(txn), &key);
        let found = index(layout)
            .find(txn, &key, hash)
            .expect("a library's function is in the index");
        let block_len = index_block_len(txn, found.entry);
        index(layout).remove(txn, &layout.alloc, found);
        layout.alloc.free(txn, found.entry, block_len);
    }
    true
}

/// Deletes every library and function.
pub fn flush(txn: &mut Txn<'_>, layout: &Layout) {
    let alloc = layout.alloc;
    libraries(layout).clear(txn, &alloc, |txn, entry| {
        let len = library_block_len(txn, entry);
        alloc.free(txn, entry, len);
    });
    index(layout).clear(txn, &alloc, |txn, entry| {
        let len = index_block_len(txn, entry);
        alloc.free(txn, entry, len);
    });
}

/// Pushes every block the two tables hold, as (segment offset, bytes asked for).
pub fn owned(mem: &impl Mem, layout: &Layout, owned: &mut Vec<(usize, usize)>) {
    let libraries = libraries(layout);
    libraries.blocks(mem, |block, len| owned.push((block, len)));
    libraries.for_each(mem, |entry| {
        owned.push((entry, library_block_len(mem, entry)))
    });
    let index = index(layout);
    index.blocks(mem, |block, len| owned.push((block, len)));
    index.for_each(mem, |entry| {
        owned.push((entry, index_block_len(mem, entry)))
    });
}

/// The name under which an index that disagrees with the libraries is reported.
pub const CHECK_FUNCTION_INDEX: &str = "the function index holds exactly the libraries' functions";

/// The index holds exactly the libraries' functions, each naming its library, and each
/// library is keyed by its code's SHA-1.
pub fn check(mem: &impl Mem, layout: &Layout) -> Result<(), tandem_store::Inconsistency> {
    let fail = |detail: String| {
        Err(tandem_store::Inconsistency {
            check: CHECK_FUNCTION_INDEX,
            detail,
        })
    };
    let mut functions = 0u64;
    for library in all(mem, layout) {
        if library.sha != sha1_hex(&library.code) {
            return fail(format!(
                "library '{}' is keyed by another code's SHA-1",
                String::from_utf8_lossy(&library.name)
            ));
        }
        for function in &library.functions {
            functions += 1;
            if library_of(mem, layout, &function.name).as_deref() != Some(&library.name) {
                return fail(format!(
                    "function '{}' of library '{}' is not indexed to it",
                    String::from_utf8_lossy(&function.name),
                    String::from_utf8_lossy(&library.name)
                ));
            }
        }
    }
    let indexed = index(layout).len(mem);
    if indexed != functions {
        return fail(format!(
            "the libraries hold {functions} functions, the index {indexed}"
        ));
    }
    Ok(())
}
