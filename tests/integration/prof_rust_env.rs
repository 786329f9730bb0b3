// tests/integration/prof_rust_env.rs — std only.  Iterates std::env::vars() (which
// panics on a non-UTF-8 variable) before and after spawning itself as a
// child; run by tests/integration/prof_rust.sh with heapalloc preloaded under HEAPPROFILE.
use std::env;
use std::process::Command;

// Hides a value from the optimiser (std::hint::black_box is newer than
// Debian's rustc).
#[inline(always)]
fn opaque<T>(x: T) -> T {
    let r = unsafe { std::ptr::read_volatile(&x) };
    std::mem::forget(x);
    r
}

fn main() {
    let args: Vec<String> = env::args().collect();
    let before: Vec<(String, String)> = env::vars().collect();
    let mut keep: Vec<Vec<u8>> = Vec::new();
    for i in 0..1000 {
        keep.push(vec![1u8; 1000 + i]);
    }
    if args.len() > 1 && args[1] == "child" {
        println!("child {} vars", before.len());
        opaque(&keep);
        return;
    }
    let status = Command::new(&args[0]).arg("child").status().expect("spawn the child");
    assert!(status.success(), "child failed: {:?}", status);
    let after: Vec<(String, String)> = env::vars().collect();
    let hp = env::var("HEAPPROFILE").expect("HEAPPROFILE is not UTF-8 or unset");
    println!("parent {} vars before, {} after, HEAPPROFILE={}", before.len(), after.len(), hp);
    opaque(&keep);
}
