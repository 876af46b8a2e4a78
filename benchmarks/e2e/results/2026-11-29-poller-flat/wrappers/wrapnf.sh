#!/bin/sh
export GS_POLL_STATS=1 GS_NOFRESH=1
exec /tmp/wt-exp/build/trainer/gradsync-train "$@"
