// Ground truth for heapalloc-symbolize on a Rust binary with debug info
// (tests/integration/names_rust_dbg.sh): known bytes at known functions and lines.
// The test finds each line by its "site:" comment.

// Hides a value from the optimiser (std::hint::black_box is newer than
// Debian's rustc).
#[inline(always)]
fn keep<T>(x: T) -> T {
    let r = unsafe { std::ptr::read_volatile(&x) };
    std::mem::forget(x);
    r
}

#[inline(never)]
fn open_session(n: usize) -> Vec<u8> {
    vec![7u8; keep(n)] // site: open_session
}

#[inline(always)]
fn word_table(n: u64) -> Vec<u64> {
    (0..keep(n)).collect() // site: word_table
}

// inlined into index_words, and called out of line from main
#[inline]
fn tokenize(n: usize) -> Vec<u32> {
    vec![5u32; keep(n)] // site: tokenize
}

#[inline(never)]
fn index_words(n: u64) -> Vec<u64> {
    let v = word_table(n); // site: index_words>word_table
    std::mem::forget(keep(tokenize(1000))); // site: index_words>tokenize
    keep(v)
}

fn main() {
    std::mem::forget(keep(open_session(3_000_000))); // site: main>open_session
    std::mem::forget(keep(index_words(50_000))); // site: main>index_words
    let f: fn(usize) -> Vec<u32> = keep(tokenize);
    std::mem::forget(keep(f(2000))); // site: main>tokenize
    std::mem::forget(keep(Box::new([3u8; 4096]))); // site: main
}
