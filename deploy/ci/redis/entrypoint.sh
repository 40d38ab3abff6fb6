#!/bin/sh
# As the official image does: without a config file, turn protected mode off, since the container network is
# the access control (nothing publishes this port).
set -eu
if [ "${1:-}" = "redis-server" ]; then
    shift
    exec redis-server --protected-mode no "$@"
fi
exec "$@"
