//! tests/integration/rust_crate.sh: a program linking the heapalloc crate, run with
//! HEAPPROFILE set.  A known Vec must show in the books (so Rust's
//! allocations are heapalloc's), dump() must write PREFIX.0001.heap, the
//! peak must hold after the Vec is gone, and start/stop/running must work.
use std::path::Path;

// Hides a value from the optimiser (std::hint::black_box is newer than
// Debian's rustc).
#[inline(always)]
fn keep<T>(x: T) -> T {
    let r = unsafe { std::ptr::read_volatile(&x) };
    std::mem::forget(x);
    r
}

const N: usize = 1 << 20; // u64s: 8 MiB, a large block counted as requested

fn check(what: &str, ok: bool, got: impl std::fmt::Debug) {
    if !ok {
        eprintln!("FAIL: {what}: {got:?}");
        std::process::exit(1);
    }
}

fn main() {
    let prefix = std::env::var("HEAPPROFILE").expect("HEAPPROFILE");
    check("running from HEAPPROFILE", heapalloc::running(), heapalloc::running());
    // configure.ac's AC_INIT, the one place the version is written (rust_crate.sh)
    let want = std::env::var("HA_VERSION").expect("HA_VERSION");
    check("version", heapalloc::version() == want, heapalloc::version());
    let before = heapalloc::stats();
    let v: Vec<u64> = keep(vec![7u64; N]);
    let bytes = (v.len() * std::mem::size_of::<u64>()) as u64;
    let during = heapalloc::stats();
    let d = heapalloc::dump("x");
    check("dump", d == Ok(()), d);
    check("in_use grew by the Vec", during.in_use >= before.in_use + bytes, (before, during));
    check("allocated grew by the Vec", during.allocated >= before.allocated + bytes, (before, during));
    check("peak >= in_use", during.peak >= during.in_use, during);
    let heap = format!("{prefix}.0001.heap");
    check("profile written", Path::new(&heap).is_file(), &heap);
    drop(v);
    let after = heapalloc::stats();
    // the format! above and the dump's own books may add a few bytes
    check("in_use fell by the Vec", after.in_use + bytes <= during.in_use + 4096, (during, after));
    check("freed grew by the Vec", after.freed >= during.freed + bytes, (during, after));
    check("peak kept", after.peak >= before.in_use + bytes, (before, after));
    check("dumps", after.dumps == before.dumps + 1, (before, after));
    // a peak that comes and goes between two stats() calls still counts
    // (HEAP_PROFILE_PEAK_INTERVAL=1 in the test: every new high is seen)
    let big = keep(vec![1u8; 12 << 20]);
    drop(big);
    let gone = heapalloc::stats();
    check("peak of a dropped Vec", gone.peak >= after.in_use + (12 << 20), (after, gone));
    check("in_use after it", gone.in_use < after.in_use + 4096, (after, gone));
    let d = heapalloc::dump("a\0b");
    check("NUL in a reason", d == Err(22), d);
    let s = heapalloc::start(&prefix);
    check("start while running (EBUSY)", s == Err(16), s);
    heapalloc::stop();
    check("stopped", !heapalloc::running(), heapalloc::running());
    let d = heapalloc::dump("y");
    check("dump while stopped (EINVAL)", d == Err(22), d);
    let again = format!("{prefix}_again");
    let s = heapalloc::start(&again);
    check("start", s == Ok(()), s);
    check("running again", heapalloc::running(), ());
    let d = heapalloc::dump("z");
    check("dump again", d == Ok(()), d);
    // the file counter carries on across stop/start
    check("second profile", Path::new(&format!("{again}.0002.heap")).is_file(), &again);
    heapalloc::stop();
    println!("in_use +{} dumps {}", during.in_use - before.in_use, after.dumps);
}
