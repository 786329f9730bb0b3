//! heapalloc for Rust: linking this crate makes heapalloc the process's
//! allocator (Rust's `System` allocator calls libc's `malloc`, which is
//! heapalloc's), so `HEAPPROFILE=/tmp/p ./prog` writes heap profiles; and it
//! drives the profiler and reads its books from the program itself.
//!
//! ```no_run
//! let before = heapalloc::stats();
//! let v = vec![0u8; 1 << 20];
//! heapalloc::dump("after the buffer").ok();
//! assert!(heapalloc::stats().in_use >= before.in_use + v.len() as u64);
//! ```
//!
//! build.rs picks the link: the shared library by default
//! (HEAPALLOC_LIB_DIR or pkg-config's libdir), the whole archive with
//! HEAPALLOC_STATIC=1.
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int};

/// `heapalloc_stats` of include/heapalloc.h, every field, in order.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
struct RawStats {
    mallocs: u64,
    small_spans: u64,
    small_span_bytes: u64,
    small_free_bytes: u64,
    large_blocks: u64,
    large_bytes: u64,
    thread_caches: u64,
    thread_cache_bytes: u64,
    metadata_bytes: u64,
    prof_alloc_bytes: u64,
    prof_free_bytes: u64,
    prof_samples: u64,
    prof_buckets: u64,
    prof_memory: u64,
    prof_dumps: u64,
    prof_peak_inuse: u64,
}

extern "C" {
    fn heapalloc_get_stats_size(out: *mut RawStats, size: usize);
    fn heapalloc_version() -> *const c_char;
    fn heapalloc_profile_start(prefix: *const c_char) -> c_int;
    fn heapalloc_profile_stop();
    fn heapalloc_profile_dump(reason: *const c_char) -> c_int;
    fn heapalloc_profile_running() -> c_int;
}

/// Keeps the library linked in every binary that links this crate, even
/// one that calls none of these functions: rustc passes --as-needed, and
/// a library nothing refers to would be dropped, leaving glibc's malloc.
#[used]
static KEEP: unsafe extern "C" fn() -> *const c_char = heapalloc_version;

const EINVAL: i32 = 22;

/// The profiler's books since profiling started (all zero while it has
/// never run), in allocated bytes (a small block counts its size class).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Bytes in use now: `allocated - freed`.
    pub in_use: u64,
    /// The highest `in_use` seen (at each dump, threshold check and
    /// `stats()` call; within HEAP_PROFILE_PEAK_INTERVAL of a peak that
    /// came and went between them, exact with HEAP_PROFILE_PEAK_INTERVAL=1).
    pub peak: u64,
    /// Bytes allocated.
    pub allocated: u64,
    /// Bytes freed.
    pub freed: u64,
    /// Sampled allocations recorded.
    pub samples: u64,
    /// Profiles written.
    pub dumps: u64,
}

fn c_string(s: &str) -> Result<CString, i32> {
    CString::new(s).map_err(|_| EINVAL)
}

fn errno_result(e: c_int) -> Result<(), i32> {
    if e == 0 {
        Ok(())
    } else {
        Err(e)
    }
}

/// Writes the next numbered profile now (PREFIX.NNNN.heap); `reason` goes
/// into the stderr line.  Err(errno): EINVAL when the profiler is not
/// running (or `reason` holds a NUL byte), else the write's error.
pub fn dump(reason: &str) -> Result<(), i32> {
    let r = c_string(reason)?;
    errno_result(unsafe { heapalloc_profile_dump(r.as_ptr()) })
}

/// Starts the profiler with `prefix` as HEAPPROFILE would.  Err(EBUSY)
/// when it already runs.
pub fn start(prefix: &str) -> Result<(), i32> {
    let p = c_string(prefix)?;
    errno_result(unsafe { heapalloc_profile_start(p.as_ptr()) })
}

/// Stops the profiler (no dump); a no-op when it is not running.
pub fn stop() {
    unsafe { heapalloc_profile_stop() }
}

/// Whether the profiler runs (HEAPPROFILE at start, or `start`).
pub fn running() -> bool {
    unsafe { heapalloc_profile_running() != 0 }
}

/// The profiler's books now.
pub fn stats() -> Stats {
    let mut raw = RawStats::default();
    unsafe { heapalloc_get_stats_size(&mut raw, std::mem::size_of::<RawStats>()) };
    Stats {
        in_use: raw.prof_alloc_bytes.saturating_sub(raw.prof_free_bytes),
        peak: raw.prof_peak_inuse,
        allocated: raw.prof_alloc_bytes,
        freed: raw.prof_free_bytes,
        samples: raw.prof_samples,
        dumps: raw.prof_dumps,
    }
}

/// heapalloc's version, e.g. "0.1.0".
pub fn version() -> &'static str {
    unsafe { CStr::from_ptr(heapalloc_version()) }
        .to_str()
        .unwrap_or("")
}
