//! Link lines for heapalloc.  Rust's global allocator (System) calls libc's
//! malloc, so once libheapalloc is linked the whole process allocates
//! through it; what matters is that it really is linked.
//!
//! - default: the shared library (`dylib=heapalloc`), searched in
//!   HEAPALLOC_LIB_DIR, else `pkg-config --variable=libdir heapalloc`, else
//!   the linker's default paths.
//! - HEAPALLOC_STATIC=1: libheapalloc.a linked whole (`+whole-archive`: a
//!   plain static link takes only the members something refers to, and
//!   libc would keep its own malloc), plus the shared libraries the
//!   archive refers to.
//!
//! The directory is handed to dependents as DEP_HEAPALLOC_LIBDIR (`links`),
//! so a binary's own build.rs can add an rpath for a build tree: cargo
//! passes a dependency's rustc-link-arg to nobody but its own targets.
use std::env;
use std::path::Path;
use std::process::Command;

fn pkg_config_libdir() -> Option<String> {
    let pc = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let out = Command::new(pc)
        .args(["--variable=libdir", "heapalloc"])
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !dir.is_empty()).then_some(dir)
}

fn main() {
    for v in ["HEAPALLOC_LIB_DIR", "HEAPALLOC_STATIC", "PKG_CONFIG_PATH", "PKG_CONFIG"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let dir = env::var("HEAPALLOC_LIB_DIR")
        .ok()
        .filter(|d| !d.is_empty())
        .or_else(pkg_config_libdir);
    let stat = env::var("HEAPALLOC_STATIC").map_or(false, |v| v == "1");
    if let Some(d) = &dir {
        let want = if stat { "libheapalloc.a" } else { "libheapalloc.so" };
        if !Path::new(d).join(want).exists() {
            println!("cargo:warning=heapalloc: no {want} in {d}");
        }
        println!("cargo:rustc-link-search=native={d}");
        println!("cargo:libdir={d}");
    }
    if stat {
        // -bundle: left for the final link, where +whole-archive applies
        println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=heapalloc");
        // what the archive refers to (nm -u libheapalloc.a): the back-end,
        // stack capture, stack table, pprof writer, operator new's bad_alloc
        for l in ["mimalloc", "unwind", "xxhash", "z", "stdc++"] {
            println!("cargo:rustc-link-lib=dylib={l}");
        }
    } else {
        // rustc links with --as-needed, and a -Wl,--no-as-needed from here
        // would land after the libraries: src/lib.rs's KEEP refers to the
        // library from every binary that links this crate instead
        println!("cargo:rustc-link-lib=dylib=heapalloc");
        // this package's own tests and examples find a build tree's library
        if let Some(d) = &dir {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{d}");
        }
    }
}
