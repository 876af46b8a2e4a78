#!/bin/sh
export GS_POLL_STATS=1 GS_CAP=100
exec /tmp/wt-exp/build/trainer/gradsync-train "$@"
