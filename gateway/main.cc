#include <cstdio>
int main() { std::puts("geogate " GEOGATE_VERSION); }
