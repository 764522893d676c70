#!/usr/bin/env bash
# Thirty-first session, call 2, one H200 (issue 21): call 1's script again, run from .device/call/
# on the tree with two close samples settling a signature (2da2d01), on another host.
exec bash "$(dirname "$0")/call1.sh"
