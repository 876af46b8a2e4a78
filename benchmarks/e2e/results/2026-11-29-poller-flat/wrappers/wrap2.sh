#!/bin/sh
export GS_POLL_STATS=1 GS_SPINS=2
exec /tmp/wt-exp/build/trainer/gradsync-train "$@"
