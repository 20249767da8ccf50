#!/usr/bin/env sh
set -eu
echo "reporting ${check}=${status}: ${message:-}"
