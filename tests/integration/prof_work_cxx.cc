// tests/integration/prof_work_cxx.cc — the C++ call site of tests/integration/prof_work.c.
#include <cstddef>

extern "C" void *keep[];

extern "C" __attribute__((noinline)) void site_new(int n)
{
	for (int i = 0; i < n; i++)
		keep[30000 + i] = new char[5000];
}
