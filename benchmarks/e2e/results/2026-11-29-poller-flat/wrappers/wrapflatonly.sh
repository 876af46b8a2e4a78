#!/bin/sh
export GS_POLL_STATS=1 GS_FLAT=1
exec /tmp/wt-exp/build/trainer/gradsync-train "$@"
