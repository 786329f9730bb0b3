//! tests/integration/rust_crate_pprof.sh: heapalloc::HeapAlloc as the global allocator,
//! and pprof_heap()'s profile of known blocks at named sites.  Run with
//! HEAP_PROFILE_SAMPLE_INTERVAL=1 and no HEAPPROFILE: the profiler is off
//! (pprof_heap says NotFound) until start(PREFIX); then each site_* leaves
//! its blocks in use, the profile goes to FILE, and the script reads it back
//! with go tool pprof.  Here: alignment, contents kept across an
//! over-aligned realloc, zeroed memory, the errors.
//! Usage: pprof_heap FILE PREFIX
use std::alloc::{alloc_zeroed, Layout};
use std::io::ErrorKind;

#[global_allocator]
static A: heapalloc::HeapAlloc = heapalloc::HeapAlloc;

// Hides a value from the optimiser (std::hint::black_box is newer than
// Debian's rustc).
#[inline(always)]
fn keep<T>(x: T) -> T {
    let r = unsafe { std::ptr::read_volatile(&x) };
    std::mem::forget(x);
    r
}

fn check(what: &str, ok: bool, got: impl std::fmt::Debug) {
    if !ok {
        eprintln!("FAIL: {what}: {got:?}");
        std::process::exit(1);
    }
}

fn aligned_at<T>(what: &str, p: *const T, align: usize) {
    check(what, p as usize % align == 0, p);
}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct A64([u8; 64]);
#[repr(C, align(256))]
#[derive(Clone, Copy)]
struct A256([u8; 256]);
#[repr(C, align(4096))]
#[derive(Clone, Copy)]
struct A4096([u8; 4096]);

/// 100000 bytes, malloc
#[inline(never)]
fn site_plain() -> Vec<u8> {
    let mut v = Vec::with_capacity(keep(100_000));
    v.resize(100_000, 3u8);
    v
}

/// 50000 bytes, calloc
#[inline(never)]
fn site_zeroed() -> Vec<u8> {
    vec![0u8; keep(50_000)]
}

// The aligned blocks are large (above 32 KiB): a size-class block whose
// size is a multiple of the alignment is aligned by luck, a large block
// behind its 16-byte header is not.

/// 1000 x 64 = 64000 bytes, 64-aligned
#[inline(never)]
fn site_align64() -> Vec<A64> {
    vec![A64([64; 64]); keep(1000)]
}

/// 200 x 256 = 51200 bytes, 256-aligned
#[inline(never)]
fn site_align256() -> Vec<A256> {
    vec![A256([1; 256]); keep(200)]
}

/// 10 x 4096 = 40960 bytes, page-aligned
#[inline(never)]
fn site_align4096() -> Box<[A4096; 10]> {
    Box::new([A4096([40; 4096]); 10])
}

/// 49152 zeroed bytes, page-aligned (alloc_zeroed above 16)
#[inline(never)]
fn site_zeroed4096() -> *mut u8 {
    unsafe { alloc_zeroed(Layout::from_size_align(keep(49152), 4096).unwrap()) }
}

/// over-aligned realloc: 100 then 200 blocks of 256 bytes; 51200 in use
#[inline(never)]
fn site_grow256() -> Vec<A256> {
    let mut v = Vec::with_capacity(keep(100));
    for i in 0..101u32 {
        v.push(A256([i as u8; 256]));
    }
    v
}

/// plain realloc: 1000 u64s grown in place or moved to 5000 (40000 bytes)
#[inline(never)]
fn site_grow() -> Vec<u64> {
    let mut v: Vec<u64> = Vec::with_capacity(keep(1000));
    v.extend(0..1000u64);
    v.reserve_exact(4000);
    v
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    check("usage: pprof_heap FILE PREFIX", args.len() == 3, &args);
    let e = heapalloc::pprof_heap().map(|v| v.len());
    check("pprof_heap before start (NotFound)", matches!(&e, Err(x) if x.kind() == ErrorKind::NotFound), &e);
    let s = heapalloc::start(&args[2]);
    check("start", s == Ok(()), s);

    let plain = keep(site_plain());
    let zeroed = keep(site_zeroed());
    let a64 = keep(site_align64());
    let a256 = keep(site_align256());
    let a4096 = keep(site_align4096());
    let z4096 = keep(site_zeroed4096());
    let g256 = keep(site_grow256());
    let grow = keep(site_grow());

    check("plain", plain.len() == 100_000 && plain.iter().all(|&b| b == 3), plain.len());
    check("zeroed", zeroed.iter().all(|&b| b == 0), zeroed.len());
    aligned_at("align64", a64.as_ptr(), 64);
    check("align64 contents", a64.iter().all(|a| a.0.iter().all(|&b| b == 64)), a64.len());
    aligned_at("align256", a256.as_ptr(), 256);
    check("align256 contents", a256.iter().all(|a| a.0.iter().all(|&b| b == 1)), a256.len());
    aligned_at("align4096", a4096.as_ptr(), 4096);
    check("align4096 contents", a4096.iter().all(|a| a.0.iter().all(|&b| b == 40)), ());
    check("zeroed4096 allocated", !z4096.is_null(), z4096);
    aligned_at("zeroed4096", z4096, 4096);
    let z = unsafe { std::slice::from_raw_parts(z4096, 49152) };
    check("zeroed4096 contents", z.iter().all(|&b| b == 0), ());
    aligned_at("grow256", g256.as_ptr(), 256);
    check("grow256 capacity", g256.capacity() == 200, g256.capacity());
    for (i, a) in g256.iter().enumerate() {
        check("grow256 contents kept by realloc", a.0.iter().all(|&b| b == i as u8), i);
    }
    check("grow capacity", grow.capacity() == 5000, grow.capacity());
    check("grow contents", grow.iter().copied().eq(0..1000u64), ());

    let pb = heapalloc::pprof_heap();
    let pb = match pb {
        Ok(v) => v,
        Err(e) => {
            check("pprof_heap", false, e);
            return;
        }
    };
    check("gzip magic", pb.len() > 18 && pb[0] == 0x1f && pb[1] == 0x8b, pb.len());
    let w = std::fs::write(&args[1], &pb);
    check("write the profile", w.is_ok(), w);
    let d = heapalloc::stats().dumps;
    check("pprof_heap writes no dump", d == 0, d);

    heapalloc::stop();
    let e = heapalloc::pprof_heap().map(|v| v.len());
    check("pprof_heap after stop (NotFound)", matches!(&e, Err(x) if x.kind() == ErrorKind::NotFound), &e);
    println!("ok {}", pb.len());
}
