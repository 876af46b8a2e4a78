#!/bin/sh
export GS_POLL_STATS=1 GS_LONG=800
exec /tmp/wt-exp/build/trainer/gradsync-train "$@"
