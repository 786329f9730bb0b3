// Ground truth for heapalloc-symbolize: known bytes at known functions.
use std::hint::black_box;

#[inline(never)]
fn read_file(n: usize) -> Vec<u8> {
    vec![1u8; black_box(n)]
}

#[inline(never)]
fn build_index(n: u64) -> Vec<u64> {
    (0..black_box(n)).collect()
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
    std::mem::forget(black_box(read_file(3_000_000)));
    std::mem::forget(black_box(build_index(50_000)));
    std::mem::forget(black_box(make_names(1000)));
}
