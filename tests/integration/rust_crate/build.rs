// A build tree's libheapalloc.so is on no default path: run from there.
fn main() {
    if let Ok(d) = std::env::var("DEP_HEAPALLOC_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{d}");
    }
}
