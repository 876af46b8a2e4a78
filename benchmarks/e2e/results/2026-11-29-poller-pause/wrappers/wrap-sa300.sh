#!/bin/sh
export GS_POLL_STATS=1 GS_LONG=300
exec /tmp/wt-exp/build/trainer/gradsync-train "$@"
