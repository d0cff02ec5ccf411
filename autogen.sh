#!/bin/sh
# Generate configure and the Makefile.in files.
set -e
cd "$(dirname "$0")"
mkdir -p config
autoreconf -fi
