//! The SIGSEGV handler serves only its regions' faults: any other goes to the handler installed
//! before it, or kills the process as it would have. Each case runs in a child process (this
//! test binary again, running `child_process_entry` alone), since it dies or fills the
//! process-wide table.

#![allow(unsafe_code)]

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

use tandem_mirror::{MprotectTracker, Region, TrackError, TrackerKind, WATCHED_REGIONS_MAX};

use crate::common;

/// Names the case a child runs.
const CHILD_ENV: &str = "TANDEM_MIRROR_CHILD";
/// What the previous handler exits with.
const PREVIOUS_HANDLER_EXIT: i32 = 42;

/// Runs this binary's `child_process_entry` alone with `CHILD_ENV` set to `case`.
fn run_child(case: &str) -> Output {
    let binary = std::env::current_exe().expect("the test binary's path");
    Command::new(binary)
        .args([
            "--exact",
            "chain::child_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, case)
        .output()
        .expect("run the test binary as a child")
}

/// Does nothing in a normal run; in a child, runs the case `CHILD_ENV` names.
#[test]
fn child_process_entry() {
    match std::env::var(CHILD_ENV).as_deref() {
        Ok("stray-store") => stray_store(),
        Ok("previous-handler") => {
            install_previous_handler();
            stray_store();
        }
        Ok("fill-table") => fill_table(),
        Ok(case) => panic!("no child case {case}"),
        Err(_) => {}
    }
}

/// A store the tracker serves, then one to an address no region holds (the first page, never
/// mapped: the same fault as a null store, which `write_volatile` refuses in debug builds).
fn stray_store() {
    let mut tracker = common::make(TrackerKind::Mprotect, 1).expect("a mprotect tracker");
    tracker.region_mut().as_mut_slice()[0] = 1;
    let mut dirty_pages = Vec::new();
    tracker.harvest(&mut dirty_pages).expect("a harvest");
    assert_eq!(dirty_pages, [0]);
    println!("served a fault in the region");
    let stray = std::ptr::without_provenance_mut::<u8>(16);
    // SAFETY: none: this store faults on purpose, and the process must die of it.
    unsafe { stray.write_volatile(1) };
    println!("survived a stray store");
}

extern "C" fn exit_from_previous_handler(
    _: libc::c_int,
    _: *mut libc::siginfo_t,
    _: *mut libc::c_void,
) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(PREVIOUS_HANDLER_EXIT) };
}

/// Installs a handler before the tracker's, which must be chained to.
fn install_previous_handler() {
    // SAFETY: all-zero is a valid sigaction; the handler and flags are set below.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = exit_from_previous_handler as *const () as libc::sighandler_t;
    action.sa_flags = libc::SA_SIGINFO;
    // SAFETY: installs a handler that only calls _exit.
    let installed = unsafe { libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut()) };
    assert_eq!(installed, 0, "install the previous handler");
}

/// Watches regions until the table is full: the next is refused, its region handed back.
fn fill_table() {
    let mut trackers = Vec::new();
    let refusal = loop {
        match MprotectTracker::new(Region::with_pages(1).expect("map a page")) {
            Ok(tracker) => trackers.push(tracker),
            Err(refusal) => break refusal,
        }
    };
    assert!(
        matches!(refusal.error, TrackError::WatchTableFull),
        "{}",
        refusal.error
    );
    assert_eq!(trackers.len(), WATCHED_REGIONS_MAX);
    let mut region = refusal.region;
    region.as_mut_slice()[1] = 5;
    assert_eq!(
        region.as_slice()[1],
        5,
        "a refused region is handed back writable"
    );
    trackers.pop();
    MprotectTracker::new(region).expect("a slot freed by a dropped tracker");
    println!("table full at {WATCHED_REGIONS_MAX}");
}

#[test]
fn a_fault_outside_every_region_kills_the_process() {
    let output = run_child("stray-store");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("served a fault in the region"),
        "child output:\n{stdout}"
    );
    assert!(!stdout.contains("survived"), "child output:\n{stdout}");
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGSEGV),
        "child: {:?}",
        output.status
    );
}

#[test]
fn a_fault_outside_every_region_reaches_the_previous_handler() {
    let output = run_child("previous-handler");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("served a fault in the region"),
        "child output:\n{stdout}"
    );
    assert_eq!(
        output.status.code(),
        Some(PREVIOUS_HANDLER_EXIT),
        "child: {:?}",
        output.status
    );
}

#[test]
fn a_full_table_refuses_and_hands_the_region_back() {
    let output = run_child("fill-table");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "child {:?}:\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("table full at"), "child output:\n{stdout}");
}
