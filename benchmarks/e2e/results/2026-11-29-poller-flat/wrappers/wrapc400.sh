#!/bin/sh
export GS_POLL_STATS=1 GS_CAP=400
exec /tmp/wt-exp/build/trainer/gradsync-train "$@"
