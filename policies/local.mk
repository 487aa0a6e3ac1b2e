# SPDX-License-Identifier: MIT
# Placement policies: one plugin each, installed in $(pkglibdir)/policies.
# They use only include/vmmx/policy.h (and policies/args.h) and never link libvmmx.
policydir = $(pkglibdir)/policies
policy_LTLIBRARIES = \
	%D%/vmmx_policy_device-first.la \
	%D%/vmmx_policy_device.la \
	%D%/vmmx_policy_host.la \
	%D%/vmmx_policy_interleave.la \
	%D%/vmmx_policy_tiered.la \
	%D%/vmmx_policy_lru.la
POLICY_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -no-undefined
POLICY_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
noinst_HEADERS = %D%/args.h

%C%_vmmx_policy_device_first_la_SOURCES = %D%/device_first.c
%C%_vmmx_policy_device_first_la_CFLAGS = $(POLICY_CFLAGS)
%C%_vmmx_policy_device_first_la_LDFLAGS = $(POLICY_LDFLAGS)
%C%_vmmx_policy_device_la_SOURCES = %D%/device.c
%C%_vmmx_policy_device_la_CFLAGS = $(POLICY_CFLAGS)
%C%_vmmx_policy_device_la_LDFLAGS = $(POLICY_LDFLAGS)
%C%_vmmx_policy_host_la_SOURCES = %D%/host.c
%C%_vmmx_policy_host_la_CFLAGS = $(POLICY_CFLAGS)
%C%_vmmx_policy_host_la_LDFLAGS = $(POLICY_LDFLAGS)
%C%_vmmx_policy_interleave_la_SOURCES = %D%/interleave.c
%C%_vmmx_policy_interleave_la_CFLAGS = $(POLICY_CFLAGS)
%C%_vmmx_policy_interleave_la_LDFLAGS = $(POLICY_LDFLAGS)
%C%_vmmx_policy_tiered_la_SOURCES = %D%/tiered.c
%C%_vmmx_policy_tiered_la_CFLAGS = $(POLICY_CFLAGS)
%C%_vmmx_policy_tiered_la_LDFLAGS = $(POLICY_LDFLAGS)
%C%_vmmx_policy_lru_la_SOURCES = %D%/lru.c
%C%_vmmx_policy_lru_la_CFLAGS = $(POLICY_CFLAGS) $(PTHREAD_CFLAGS)
%C%_vmmx_policy_lru_la_LDFLAGS = $(POLICY_LDFLAGS) $(PTHREAD_LIBS)
