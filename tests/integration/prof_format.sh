#!/bin/sh
# HEAP_PROFILE_FORMAT: pprof writes only PREFIX.NNNN.pb.gz (no .heap, no
# temporary left), both writes the pair numbered the same with the same
# numbers, junk gets one line and text; cleanup removes old .pb.gz too.
# The dump log names the .heap file of a dump, its .pb.gz when no .heap.
. "$top_srcdir/tests/lib/prof_lib.sh"
need_go
mkdir "$tmp/a" "$tmp/b" "$tmp/c"
HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_FORMAT=pprof HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" truth 2>"$tmp/a.err" ||
	fail "truth exited $?"
eq "pprof files" "$(lsd "$tmp/a" | tr '\n' ' ')" "p.0001.pb.gz p.log "
eq "pprof log" "$(grep -v '^#' "$tmp/a/p.log" | cut -f7)" "p.0001.pb.gz"
grep -q "^Dumping heap profile to $tmp/a/p.0001.pb.gz (Exiting" "$tmp/a.err" || fail "no dump line: $(cat "$tmp/a.err")"
gzip -t "$tmp/a/p.0001.pb.gz" || fail "not gzip"
# site_keep: 1000 objects of 1000 bytes, in use
eq "pb site_keep inuse_space" "$(flat inuse_space "$tmp/a/p.0001.pb.gz" site_keep)" 1000000
eq "pb site_half alloc_objects" "$(flat alloc_objects "$tmp/a/p.0001.pb.gz" site_half)" 300
"$GO" tool pprof -raw "$tmp/a/p.0001.pb.gz" 2>/dev/null | grep -q '^PeriodType: space bytes$' ||
	fail "period type is not space/bytes"
# the program's mapping carries its build ID, read from memory
bid=$(readelf -n "$W" 2>/dev/null | sed -n 's/^ *Build ID: *//p' | head -1)
if [ -n "$bid" ]; then
	"$GO" tool pprof -raw "$tmp/a/p.0001.pb.gz" 2>/dev/null | sed -n '/^Mappings/,$p' |
		grep -q " $W $bid" || fail "no build ID $bid on $W's mapping"
fi

echo old >"$tmp/b/p.0009.pb.gz"
HEAPPROFILE="$tmp/b/p" HEAP_PROFILE_FORMAT=both HEAP_PROFILE_SAMPLE_INTERVAL=64K "$W" truth 2>"$tmp/b.err" ||
	fail "truth exited $?"
eq "both files" "$(lsd "$tmp/b" | tr '\n' ' ')" "p.0001.heap p.0001.pb.gz p.log "
eq "both log" "$(grep -v '^#' "$tmp/b/p.log" | cut -f7)" "p.0001.heap"
"$GO" tool pprof -raw "$tmp/b/p.0001.pb.gz" 2>/dev/null | grep -q '^Period: 65536$' || fail "period is not 65536"
# sampled: both files unsample the same way (Go's scaleHeapSample)
for idx in inuse_space alloc_objects; do
	a=$("$GO" tool pprof -top -unit=B -sample_index=$idx "$W" "$tmp/b/p.0001.heap" 2>/dev/null | sed -n 's/.* of \([0-9]*\)B* total$/\1/p')
	b=$("$GO" tool pprof -top -unit=B -sample_index=$idx "$tmp/b/p.0001.pb.gz" 2>/dev/null | sed -n 's/.* of \([0-9]*\)B* total$/\1/p')
	[ -n "$a" ] || fail "no $idx total from the text file"
	eq "text vs pb $idx, R=64K" "$b" "$a"
done

HEAPPROFILE="$tmp/c/p" HEAP_PROFILE_FORMAT=protobuf "$W" exit 2>"$tmp/c.err" || fail "exit $?"
eq "junk format message" "$(grep -c 'HEAP_PROFILE_FORMAT="protobuf" is not text, pprof or both; using text$' "$tmp/c.err")" 1
eq "junk format files" "$(lsd "$tmp/c" | tr '\n' ' ')" "p.0001.heap p.log "
finish
