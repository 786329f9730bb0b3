#include <vector>
std::vector<int> v;
__attribute__((noinline)) void fill(int n) { for (int i = 0; i < n; i++) v.push_back(i); }
int main() { fill(1000000); }
