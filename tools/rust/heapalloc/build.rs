//! Link lines for heapalloc.
//!
//! - default: the shared library (`dylib=heapalloc`), found in
//!   HEAPALLOC_LIB_DIR, else `pkg-config --variable=libdir heapalloc`
//!   (PKG_CONFIG_PATH), else the linker's usual directories.
//! - HEAPALLOC_STATIC=1: libheapalloc.a linked whole (`+whole-archive`: a
//!   plain static link takes only the members something refers to, and
//!   libc would keep its own malloc), plus the shared libraries the
//!   archive refers to.
//!
//! A library found nowhere stops the build here, with how to point at it,
//! rather than as an undefined-symbol list from the linker.
//!
//! A directory outside the loader's default path gets an rpath
//! (`-Wl,-rpath,DIR`).  Cargo applies a dependency's rustc-link-arg only to
//! that package's own tests and examples, so the directory is also handed
//! to dependents as DEP_HEAPALLOC_LIBDIR (`links`): a binary's build.rs
//! adds the same rpath for itself (README, tests/integration/rust_crate/build.rs).
use std::env;
use std::path::{Path, PathBuf};
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

/// Where the linker looks unasked: LIBRARY_PATH, then the usual prefixes
/// (with Debian's multiarch directory for the target).
fn default_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = env::var_os("LIBRARY_PATH")
        .map(|p| env::split_paths(&p).collect())
        .unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("{arch}-linux-gnu");
    for pre in ["/usr/local/lib", "/usr/lib", "/lib"] {
        dirs.push(Path::new(pre).join(&multiarch));
        dirs.push(PathBuf::from(pre));
    }
    dirs.push(PathBuf::from("/usr/lib64"));
    dirs.push(PathBuf::from("/lib64"));
    dirs
}

/// The loader finds these without an rpath.
fn loader_default(d: &Path) -> bool {
    let s = d.to_string_lossy();
    let s = s.trim_end_matches('/');
    ["/lib", "/usr/lib", "/lib64", "/usr/lib64"].contains(&s)
        || (s.starts_with("/lib/") || s.starts_with("/usr/lib/")) && s.ends_with("-linux-gnu")
}

fn main() {
    for v in ["HEAPALLOC_LIB_DIR", "HEAPALLOC_STATIC", "PKG_CONFIG_PATH", "PKG_CONFIG", "LIBRARY_PATH"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let stat = env::var("HEAPALLOC_STATIC").map_or(false, |v| v == "1");
    let want = if stat { "libheapalloc.a" } else { "libheapalloc.so" };
    let given = env::var("HEAPALLOC_LIB_DIR").ok().filter(|d| !d.is_empty());
    let (dir, from) = match given {
        Some(d) => (Some(PathBuf::from(d)), "HEAPALLOC_LIB_DIR"),
        None => match pkg_config_libdir() {
            Some(d) => (Some(PathBuf::from(d)), "pkg-config's libdir"),
            None => (None, ""),
        },
    };
    let dir = match dir {
        Some(d) if d.join(want).exists() => d,
        _ => match default_dirs().into_iter().find(|d| d.join(want).exists()) {
            Some(d) if dir.is_none() => d,
            _ => {
                let looked = match &dir {
                    Some(d) => format!("no {want} in {} ({from})", d.display()),
                    None => format!(
                        "no {want} found: HEAPALLOC_LIB_DIR is unset, pkg-config \
                         knows no heapalloc, and the linker's usual directories lack it"
                    ),
                };
                // one message and a plain failure: a panic would add a backtrace
                eprintln!(
                    "heapalloc: {looked}.\n\
                     Point the build at the library, e.g.\n  \
                     HEAPALLOC_LIB_DIR=/opt/heapalloc/lib cargo build\n\
                     (a build tree: HEAPALLOC_LIB_DIR=/path/to/heapalloc/build/.libs), or\n  \
                     PKG_CONFIG_PATH=/opt/heapalloc/lib/pkgconfig cargo build"
                );
                std::process::exit(1);
            }
        },
    };
    let d = dir.display();
    println!("cargo:rustc-link-search=native={d}");
    println!("cargo:libdir={d}");
    if stat {
        // -bundle: left for the final link, where +whole-archive applies
        println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=heapalloc");
        // what the archive refers to (nm -u libheapalloc.a): the back-end
        // and stack capture (zlib is dlopened, the C++ runtime looked up)
        for l in ["mimalloc", "unwind"] {
            println!("cargo:rustc-link-lib=dylib={l}");
        }
    } else {
        // rustc links with --as-needed, and a -Wl,--no-as-needed from here
        // would land after the libraries: src/lib.rs's KEEP refers to the
        // library from every binary that links this crate instead
        println!("cargo:rustc-link-lib=dylib=heapalloc");
        if !loader_default(&dir) {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{d}");
        }
    }
}
