# SPDX-License-Identifier: MIT
bin_PROGRAMS += %D%/vmmx-demo
%C%_vmmx_demo_SOURCES = %D%/vmmx-demo.c
%C%_vmmx_demo_LDADD = lib/libvmmx.la
