//! tests/integration/remote_dump_rust.sh: tests/integration/remote_sites.c's `hold` mode in Rust,
//! heapalloc::HeapAlloc the global allocator and no profiling variable, for
//! `heapalloc dump PID`.  Keeps site_big's 2048 blocks of 64 KiB (128 MiB) and
//! site_small's 131072 blocks of 512 bytes (64 MiB), allocates and frees 1000
//! blocks of 64 KiB at site_gone, then writes to READY (created whole, by
//! rename) "big BYTES small BYTES alloc BYTES free BYTES" (the books as
//! heapalloc::stats() reads them after the last allocation) and waits for
//! stdin to close, allocating nothing.
//! Usage: remote_sites READY
use std::io::{Read, Write};

#[global_allocator]
static A: heapalloc::HeapAlloc = heapalloc::HeapAlloc;

#[inline(never)]
fn site_big(keep: &mut Vec<Vec<u8>>) {
    for _ in 0..2048 {
        let mut v = Vec::with_capacity(65536);
        v.push(1u8);
        keep.push(v);
    }
}

#[inline(never)]
fn site_small(keep: &mut Vec<Vec<u8>>) {
    for _ in 0..131072 {
        let mut v = Vec::with_capacity(512);
        v.push(2u8);
        keep.push(v);
    }
}

#[inline(never)]
fn site_gone() -> usize {
    let mut sum = 0;
    for i in 0..1000 {
        let mut v: Vec<u8> = Vec::with_capacity(65536);
        v.push(i as u8);
        sum += unsafe { std::ptr::read_volatile(&v[0]) } as usize;
    }
    sum
}

extern "C" {
    fn rename(from: *const std::os::raw::c_char, to: *const std::os::raw::c_char) -> i32;
}

fn main() {
    let ready = std::env::args().nth(1).expect("usage: remote_sites READY");
    // Everything after the books are read allocates nothing (the dump's
    // totals must be those books): the file, the names and the line's
    // buffer are made first, stdin is read unbuffered.
    let tmp = std::ffi::CString::new(format!("{ready}.tmp")).unwrap();
    let fin = std::ffi::CString::new(ready).unwrap();
    let mut out = std::fs::File::create(tmp.to_str().unwrap()).expect("create READY.tmp");
    let mut stdin = unsafe { <std::fs::File as std::os::unix::io::FromRawFd>::from_raw_fd(0) };
    let mut line = [0u8; 160];
    // every block the sites keep goes into this one buffer, allocated here
    let mut keep: Vec<Vec<u8>> = Vec::with_capacity(2048 + 131072);
    site_big(&mut keep);
    site_small(&mut keep);
    let gone = site_gone();
    let st = heapalloc::stats();
    let n = {
        let mut c = std::io::Cursor::new(&mut line[..]);
        write!(c, "big {} small {} alloc {} free {}\n", 2048 * 65536, 131072 * 512,
               st.allocated, st.freed).expect("format");
        c.position() as usize
    };
    out.write_all(&line[..n]).expect("write READY.tmp");
    drop(out);
    if unsafe { rename(tmp.as_ptr(), fin.as_ptr()) } != 0 {
        std::process::exit(2);
    }
    // hold: nothing allocated from here until stdin closes
    let mut buf = [0u8; 64];
    while let Ok(k) = stdin.read(&mut buf) {
        if k == 0 {
            break;
        }
    }
    // site_gone's sum of first bytes, 0 + 1 + ... + 255 over and over
    if keep.len() != 2048 + 131072 || gone != (0..1000).map(|i| i % 256).sum::<usize>() {
        std::process::exit(1);
    }
}
