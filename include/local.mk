# SPDX-License-Identifier: MIT
include_HEADERS = %D%/vmmx.h
