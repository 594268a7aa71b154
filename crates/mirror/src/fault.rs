//! The process-wide SIGSEGV handler and the fixed table of regions it watches.
//!
//! Contract: a store to a read-only page of a watched region faults; the handler makes that
//! one page writable, then sets its bit in the region's bitmap, and returns, so the store runs
//! again and succeeds. In that order, a harvest that swaps the bit to zero and then protects
//! the page again never leaves a page writable with its bit clear (see `MprotectTracker`). A
//! fault anywhere else goes to the handler installed before ours, or, if that was the default
//! action, restores it and returns, so the fault recurs and kills the process as it would have.
//!
//! The handler takes no lock and allocates nothing: the table is [`SLOTS`] slots of atomics,
//! and a slot's bitmap lives until no handler can still be reading it (each slot counts the
//! handlers inside it; releasing a slot waits for that count to drop to zero).
//!
//! `unsafe` here: `sigaction`, reading `siginfo_t`, calling the previous handler, `mprotect`
//! of one page and `errno`, all in the handler or in installing it.

#![allow(unsafe_code)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::region::page_size;
use crate::{Region, TrackError};

/// How many regions the handler can watch at once (mprotect and soft-dirty trackers).
pub const SLOTS: usize = 64;

const FREE: u8 = 0;
/// Being filled in by `Watch::new`; the handler ignores it.
const CLAIMING: u8 = 1;
/// Watched: a fault inside is served.
const LIVE: u8 = 2;
/// Being released: the region is being made writable again; a fault inside just returns, so
/// the store runs again once the region is writable.
const CLOSING: u8 = 3;

/// One watched region.
struct Slot {
    state: AtomicU8,
    base: AtomicUsize,
    len: AtomicUsize,
    /// The first word of the region's bitmap, a bit per page.
    bits: AtomicPtr<AtomicU64>,
    /// Handlers inside this slot right now.
    active: AtomicU32,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            state: AtomicU8::new(FREE),
            base: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            bits: AtomicPtr::new(std::ptr::null_mut()),
            active: AtomicU32::new(0),
        }
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
/// The page size, for the handler (which must not run `page_size`'s once-initialisation).
static HANDLER_PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);
/// The action installed before ours, leaked so the handler can read it at any time.
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
/// Whether our handler is installed; held while installing it.
static INSTALLED: Mutex<bool> = Mutex::new(false);

/// A region registered with the handler: while it lives, a fault on a read-only page of the
/// region makes that page writable and sets its bit. Dropping it makes the whole region
/// writable and releases the slot.
#[derive(Debug)]
pub(crate) struct Watch {
    slot: usize,
    base: usize,
    len: usize,
    bits: Box<[AtomicU64]>,
}

impl Watch {
    /// Registers `region` (all bits clear). Its protections are left as they are.
    pub(crate) fn new(region: &Region) -> Result<Watch, TrackError> {
        install()?;
        let (base, len) = region.address_range();
        let words = region.page_count().div_ceil(64);
        let bits: Box<[AtomicU64]> = (0..words).map(|_| AtomicU64::new(0)).collect();
        let slot = TABLE
            .iter()
            .position(|slot| {
                slot.state
                    .compare_exchange(FREE, CLAIMING, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            })
            .ok_or(TrackError::WatchTableFull)?;
        let entry = &TABLE[slot];
        assert!(
            entry.active.load(Ordering::SeqCst) == 0,
            "a free slot has no handler inside"
        );
        entry.base.store(base, Ordering::SeqCst);
        entry.len.store(len, Ordering::SeqCst);
        entry.bits.store(bits.as_ptr().cast_mut(), Ordering::SeqCst);
        entry.state.store(LIVE, Ordering::SeqCst);
        Ok(Watch {
            slot,
            base,
            len,
            bits,
        })
    }

    /// The bitmap: bit `page % 64` of word `page / 64` is set once page `page` faulted.
    pub(crate) fn words(&self) -> &[AtomicU64] {
        &self.bits
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let entry = &TABLE[self.slot];
        entry.state.store(CLOSING, Ordering::SeqCst);
        let writable = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: the region `Watch::new` was given, still mapped (its tracker owns it and drops
        // it after this); making it writable changes no byte.
        let made = unsafe { libc::mprotect(self.base as *mut libc::c_void, self.len, writable) };
        assert!(
            made == 0,
            "mprotect of a watched region back to read-write failed"
        );
        // A handler that saw LIVE before the store above may still be setting a bit: wait for
        // it (handlers never block, so this is short). The SeqCst pairing with the handler's
        // increment-then-load means any handler not counted here sees CLOSING.
        while entry.active.load(Ordering::SeqCst) != 0 {
            std::hint::spin_loop();
        }
        entry.len.store(0, Ordering::SeqCst);
        entry.base.store(0, Ordering::SeqCst);
        entry.bits.store(std::ptr::null_mut(), Ordering::SeqCst);
        entry.state.store(FREE, Ordering::SeqCst);
    }
}

/// Installs the handler once per process, keeping the action it replaces.
fn install() -> Result<(), TrackError> {
    let mut installed = INSTALLED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if *installed {
        return Ok(());
    }
    HANDLER_PAGE_SIZE.store(page_size(), Ordering::SeqCst);
    // SAFETY: an all-zero sigaction is a valid value (SIG_DFL, empty mask, no flags).
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: reads the current action into `previous`; changes nothing.
    if unsafe { libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut previous) } != 0 {
        return Err(TrackError::last_os("sigaction(SIGSEGV) read"));
    }
    PREVIOUS.store(Box::into_raw(Box::new(previous)), Ordering::SeqCst);
    // SAFETY: as above, all-zero is valid; the fields are set below.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_sigsegv as *const () as libc::sighandler_t;
    // SA_ONSTACK: run on the thread's alternate stack when it has one, as Rust's own
    // stack-overflow handler (which we chain to) does.
    action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: `sa_mask` is a valid sigset_t to empty.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: installs `on_sigsegv`, which is async-signal-safe (atomics, mprotect, write).
    if unsafe { libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut()) } != 0 {
        return Err(TrackError::last_os("sigaction(SIGSEGV) install"));
    }
    *installed = true;
    Ok(())
}

extern "C" fn on_sigsegv(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: errno is this thread's; the handler restores it so the interrupted code never
    // sees the mprotect's.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: the kernel passes a valid siginfo_t for a SA_SIGINFO handler.
    let address = unsafe { (*info).si_addr() } as usize;
    let served = serve(address);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    if !served {
        chain(signal, info, context);
    }
}

/// Serves a fault at `address` if it lies in a watched region; says whether it did.
fn serve(address: usize) -> bool {
    let page_size = HANDLER_PAGE_SIZE.load(Ordering::Relaxed);
    for slot in &TABLE {
        if !contains(slot, address) {
            continue;
        }
        slot.active.fetch_add(1, Ordering::SeqCst);
        let state = slot.state.load(Ordering::SeqCst);
        let mine = contains(slot, address) && (state == LIVE || state == CLOSING);
        if mine && state == LIVE {
            let base = slot.base.load(Ordering::SeqCst);
            let page = (address - base) / page_size;
            unprotect(base + page * page_size, page_size);
            let bits = slot.bits.load(Ordering::SeqCst);
            // SAFETY: `bits` has a word for every page of the region and lives until `active`
            // is back to zero (`Watch::drop` waits for it).
            let word = unsafe { &*bits.add(page / 64) };
            word.fetch_or(1 << (page % 64), Ordering::SeqCst);
        }
        slot.active.fetch_sub(1, Ordering::SeqCst);
        if mine {
            return true;
        }
    }
    false
}

fn contains(slot: &Slot, address: usize) -> bool {
    let base = slot.base.load(Ordering::SeqCst);
    let len = slot.len.load(Ordering::SeqCst);
    address >= base && address - base < len
}

/// Makes one page writable from inside the handler; on failure (`vm.max_map_count`, memory)
/// the store can never complete, so it says why on stderr and aborts.
fn unprotect(page: usize, page_size: usize) {
    let writable = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: the page lies in a watched region, which is mapped while its slot is LIVE.
    if unsafe { libc::mprotect(page as *mut libc::c_void, page_size, writable) } == 0 {
        return;
    }
    let message = b"tandem-mirror: mprotect in the SIGSEGV handler failed (vm.max_map_count \
                    or memory exhausted); aborting\n";
    // SAFETY: write(2) and abort(3) are async-signal-safe; the message is a static buffer.
    unsafe {
        libc::write(libc::STDERR_FILENO, message.as_ptr().cast(), message.len());
        libc::abort();
    }
}

/// Passes a fault that is not ours to the action installed before ours.
fn chain(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let previous = PREVIOUS.load(Ordering::SeqCst);
    // SAFETY: set before our handler was installed and never freed.
    let previous = unsafe { &*previous };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        restore_default(signal, info);
    } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: with SA_SIGINFO the previous action's handler has this signature.
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        handler(signal, info, context);
    } else {
        // SAFETY: without SA_SIGINFO the previous action's handler takes the signal alone.
        let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        handler(signal);
    }
}

/// Restores the default action (an ignored SIGSEGV from a fault would loop forever, so that is
/// the default too). A fault recurs when the handler returns and kills the process; a SIGSEGV
/// sent by `kill` does not recur, so it is raised again, delivered once the handler returns.
fn restore_default(signal: libc::c_int, info: *mut libc::siginfo_t) {
    // SAFETY: all-zero is SIG_DFL with an empty mask.
    let default: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: installs the default action; async-signal-safe.
    unsafe { libc::sigaction(signal, &default, std::ptr::null_mut()) };
    // SAFETY: the kernel passes a valid siginfo_t.
    let sent = unsafe { (*info).si_code } <= 0;
    if sent {
        // SAFETY: raise is async-signal-safe.
        unsafe { libc::raise(signal) };
    }
}
