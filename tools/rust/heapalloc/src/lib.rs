//! heapalloc for Rust: a `GlobalAlloc` that calls heapalloc's malloc family,
//! so `HEAPPROFILE=/tmp/p ./prog` writes heap profiles; and the profiler's
//! controls, books and profile (`pprof_heap`) from the program itself.
//!
//! ```no_run
//! #[global_allocator]
//! static A: heapalloc::HeapAlloc = heapalloc::HeapAlloc;
//!
//! let before = heapalloc::stats();
//! let v = vec![0u8; 1 << 20];
//! heapalloc::dump("after the buffer").ok();
//! assert!(heapalloc::stats().in_use >= before.in_use + v.len() as u64);
//! ```
//!
//! Declaring `HeapAlloc` the global allocator names the dependency in the
//! program, so it cannot be dropped without the compiler noticing.  Merely
//! linking the crate also routes Rust's `System` allocator to heapalloc
//! (libc's `malloc` is heapalloc's), but nothing in the program says so.
//!
//! build.rs picks the link: the shared library by default
//! (HEAPALLOC_LIB_DIR or pkg-config's libdir), the whole archive with
//! HEAPALLOC_STATIC=1.
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{CStr, CString};
use std::io;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

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
    fn heapalloc_profile_pprof(buf: *mut *mut c_void, len: *mut usize) -> c_int;

    // the malloc family: heapalloc's own, as this crate links it
    fn malloc(size: usize) -> *mut c_void;
    fn calloc(n: usize, size: usize) -> *mut c_void;
    fn realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn free(p: *mut c_void);
    fn free_sized(p: *mut c_void, size: usize);
    fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int;
}

/// Keeps the library linked in every binary that links this crate, even
/// one that calls none of these functions: rustc passes --as-needed, and
/// a library nothing refers to would be dropped, leaving glibc's malloc.
#[used]
static KEEP: unsafe extern "C" fn() -> *const c_char = heapalloc_version;

const EINVAL: i32 = 22;
const ENOENT: i32 = 2;

/// heapalloc's malloc aligns every block, however small, to 16 bytes
/// (HA_MIN_ALIGN: its size classes are multiples of 16).
const MIN_ALIGN: usize = 16;

/// The global allocator on heapalloc: `malloc`/`calloc`/`realloc`/`free_sized`,
/// and `posix_memalign` and `free` for alignments above 16.
///
/// ```no_run
/// #[global_allocator]
/// static A: heapalloc::HeapAlloc = heapalloc::HeapAlloc;
/// ```
#[derive(Clone, Copy, Default, Debug)]
pub struct HeapAlloc;

unsafe fn aligned(layout: &Layout) -> *mut u8 {
    let mut p: *mut c_void = ptr::null_mut();
    // posix_memalign wants a multiple of sizeof(void *): Layout's
    // alignment is a power of two above 16 here, so it is one
    if posix_memalign(&mut p, layout.align(), layout.size()) != 0 {
        return ptr::null_mut();
    }
    p as *mut u8
}

unsafe impl GlobalAlloc for HeapAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            malloc(layout.size()) as *mut u8
        } else {
            aligned(&layout)
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            calloc(1, layout.size()) as *mut u8
        } else {
            let p = aligned(&layout);
            if !p.is_null() {
                ptr::write_bytes(p, 0, layout.size());
            }
            p
        }
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // the size names the class, so free need not wait for the page map
        if layout.align() <= MIN_ALIGN {
            free_sized(p as *mut c_void, layout.size())
        } else {
            free(p as *mut c_void)
        }
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            return realloc(p as *mut c_void, new_size) as *mut u8;
        }
        // realloc keeps only 16-byte alignment: move the block by hand
        let new = match Layout::from_size_align(new_size, layout.align()) {
            Ok(l) => aligned(&l),
            Err(_) => return ptr::null_mut(),
        };
        if !new.is_null() {
            ptr::copy_nonoverlapping(p, new, layout.size().min(new_size));
            free(p as *mut c_void);
        }
        new
    }
}

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

/// The heap profile now as gzipped profile.proto, the bytes of a
/// PREFIX.NNNN.pb.gz dump (default sample type inuse_space; mappings with
/// build IDs), for `go tool pprof` or an HTTP handler.  Writes no file.
/// Err: `NotFound` when the profiler is not running (start it with
/// HEAPPROFILE or `start`), else the OS error (out of memory).
pub fn pprof_heap() -> io::Result<Vec<u8>> {
    let mut buf: *mut c_void = ptr::null_mut();
    let mut len = 0usize;
    let e = unsafe { heapalloc_profile_pprof(&mut buf, &mut len) };
    if e == ENOENT {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "heapalloc: the profiler is not running",
        ));
    }
    if e != 0 {
        return Err(io::Error::from_raw_os_error(e));
    }
    if buf.is_null() {
        return Ok(Vec::new());
    }
    // copied: the block is malloc's, which need not be the global allocator
    let v = unsafe { std::slice::from_raw_parts(buf as *const u8, len) }.to_vec();
    unsafe { free(buf) };
    Ok(v)
}

/// heapalloc's version, e.g. "0.1.0".
pub fn version() -> &'static str {
    unsafe { CStr::from_ptr(heapalloc_version()) }
        .to_str()
        .unwrap_or("")
}
