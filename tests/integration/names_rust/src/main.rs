// Ground truth for heapalloc-symbolize: known bytes at known functions.
// Hides a value from the optimiser (std::hint::black_box is newer than
// Debian's rustc).
#[inline(always)]
fn keep<T>(x: T) -> T {
    let r = unsafe { std::ptr::read_volatile(&x) };
    std::mem::forget(x);
    r
}

#[inline(never)]
fn read_file(n: usize) -> Vec<u8> {
    vec![1u8; keep(n)]
}

#[inline(never)]
fn build_index(n: u64) -> Vec<u64> {
    (0..keep(n)).collect()
}

#[inline(never)]
fn make_names(k: usize) -> Vec<Box<[u8; 96]>> {
    let mut v = Vec::with_capacity(k);
    for i in 0..k {
        v.push(Box::new([i as u8; 96]));
    }
    v
}

fn main() {
    // kept to the end: what is in use at exit is exactly what was allocated
    std::mem::forget(keep(read_file(3_000_000)));
    std::mem::forget(keep(build_index(50_000)));
    std::mem::forget(keep(make_names(1000)));
}
