// tests/integration/prof_http_cxx.cc — the C++ call site of tests/integration/prof_http.c.
extern "C" void *keep[];

extern "C" __attribute__((noinline)) void http_new(int n)
{
	for (int i = 0; i < n; i++)
		keep[50000 + i] = new char[5000];
}
