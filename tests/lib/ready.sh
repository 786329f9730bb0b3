# tests/lib/ready.sh — sourced by the drivers that start a program and read it
# from outside once it says it is ready.
# program_ready FILE — wait (60 s at most) until FILE exists while process $pid
# lives; 0 when it does.
program_ready() {
	_i=0
	while [ ! -f "$1" ] && [ $_i -lt 600 ]; do
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
		_i=$((_i + 1))
	done
	[ -f "$1" ]
}
