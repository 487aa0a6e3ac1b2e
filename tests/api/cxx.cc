// SPDX-License-Identifier: MIT
// vmmx.h compiles as C++ and its API links from C++.
#include "vmmx.h"

#include <cstring>
#include <string>

extern "C" {
#include "tests/tap/basic.h"
}

int main()
{
	plan(5);
	ok(std::string(vmmx_strerror(-VMMX_ENOMEM)).size() > 0, "vmmx_strerror from C++");
	is_int(VMMX_VERSION, (long long)vmmx_version(), "vmmx_version matches the header");
	struct vmmx_config cfg;
	vmmx_config_init(&cfg);
	is_uint(sizeof(cfg), cfg.size, "vmmx_config_init sets size from C++");
	uint64_t v = 0;
	is_int(0, vmmx_parse_size("3GiB", 0, &v), "vmmx_parse_size from C++");
	is_uint(3ull << 30, v, "vmmx_parse_size value from C++");
	return tap_done();
}
