#!/bin/sh
export GS_POLL_STATS=1 GS_DIV=8
exec /tmp/wt-exp/build/trainer/gradsync-train "$@"
