#include <cstdio>
int main() { std::puts("hinge"); return 0; }
