# SPDX-License-Identifier: MIT
include_HEADERS = %D%/vmmx.h
vmmxincludedir = $(includedir)/vmmx
vmmxinclude_HEADERS = %D%/vmmx/policy.h %D%/vmmx/alloc.h
