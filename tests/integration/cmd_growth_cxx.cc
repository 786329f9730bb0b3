// tests/integration/cmd_growth_cxx.cc — what `heapalloc growth` reads in C++: a heap that
// grows inside libstdc++ templates called from the program's own code (a
// class template's member, a plain function).  Two phases, one dump after
// each: every phase adds 1000 orders (the vector's buffer goes from 1024 to
// 2048 slots of 16 bytes) and 100 strings of 64 characters (a 32-byte
// object by new, a 65-byte buffer by libstdc++; the pointer vector from 128
// to 256 slots).
#include <heapalloc.h>

#include <string>
#include <vector>

namespace shop {
struct Order {
	long id;
	double price;
};

template <class T> struct Ledger {
	std::vector<T> rows;
	long added = 0;
	__attribute__((noinline)) void add(const T &t)
	{
		rows.push_back(t);              // growth: the orders
		added++;                        // (so push_back is no tail call)
	}
};
} // namespace shop

static shop::Ledger<shop::Order> ledger;
static std::vector<std::string *> names;

extern "C" __attribute__((noinline)) void record_orders(int n)
{
	for (int i = 0; i < n; i++)
		ledger.add(shop::Order{i, 1.5}); // growth: add
}

extern "C" __attribute__((noinline)) void keep_names(int n)
{
	for (int i = 0; i < n; i++)
		names.push_back(new std::string(64, 'x')); // growth: names
}

int main()
{
	for (int phase = 0; phase < 2; phase++) {
		record_orders(1000);            // growth: record_orders
		keep_names(100);                // growth: keep_names
		if (heapalloc_profile_dump("phase") != 0)
			return 99;
	}
	return 0;
}
